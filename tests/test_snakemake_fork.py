"""The tests' Snakemake fork server (tests/snakemake_fork.py) runs a command line as `python -m
snakemake` does: the same output and exit status, in the caller's folder and environment, and a
command that outlives its timeout is killed."""

import subprocess
import sys
import time

import pytest
from snakemake_fork import Client

pytestmark = pytest.mark.slow  # each case starts Snakemake as a plain process too

SNAKEFILE = """
import os, sys
print("parsed in", os.getcwd(), "with", os.environ.get("FORK_TEST"), "first path", sys.path[0], file=sys.stderr)
if os.environ.get("FORK_TEST") == "slow":
    import time
    time.sleep(60)


rule all:
    output:
        "done",
    shell:
        "touch {output}"
"""


@pytest.fixture(scope="module")
def client():
    c = Client()
    yield c
    c.close()


def plain(argv, cwd):
    return subprocess.run([sys.executable, "-m", "snakemake", *argv], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("argv", [["--version"], ["--cores", "1", "-n"], ["--cores", "1"], ["--no-such-flag"]])
def test_a_forked_command_line_is_what_python_m_snakemake_gives(client, tmp_path, monkeypatch, argv):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    monkeypatch.setenv("FORK_TEST", "set by the test")
    forked = client.run(argv, cwd=tmp_path, timeout=120)
    made = (tmp_path / "done").exists()
    (tmp_path / "done").unlink(missing_ok=True)
    ref = plain(argv, tmp_path)
    assert forked.returncode == ref.returncode and made == (tmp_path / "done").exists()
    assert forked.stdout.splitlines()[:1] == ref.stdout.splitlines()[:1]
    said = [line for line in ref.stderr.splitlines() if line.startswith("parsed in") or ": error:" in line]
    assert said == [line for line in forked.stderr.splitlines() if line.startswith("parsed in") or ": error:" in line]
    if argv != ["--version"]:
        assert said, ref.stderr


def test_a_command_past_its_timeout_is_killed(client, tmp_path, monkeypatch):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    monkeypatch.setenv("FORK_TEST", "slow")
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        client.run(["--cores", "1", "-n"], cwd=tmp_path, timeout=3)
    assert time.monotonic() - t0 < 50
    monkeypatch.setenv("FORK_TEST", "quick")
    assert client.run(["--cores", "1", "-n"], cwd=tmp_path, timeout=120).returncode == 0  # the server goes on
