"""bench/gpu_reference.py, the one command of the day a GPU machine is lent, run here: in its
cpu-only mode on a tiny grid and the loopback mirror, so that it cannot rot between the sessions
that have a GPU; and its guard, which stops a step past its time and records why a step failed."""

import csv
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile

import pytest
import yaml
from conftest import REPO, job_stats
from mnistbench.data import synthetic

PNG = b"\x89PNG\r\n\x1a\n"


def module():
    spec = importlib.util.spec_from_file_location("gpu_reference", REPO / "bench" / "gpu_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_cpu_only_run_packs_its_results_and_every_step_with_why_one_failed(mirror, tmp_path):
    url, md5 = mirror
    (tmp_path / "mirror.yaml").write_text(yaml.safe_dump(dict(mnist=dict(mirrors=[url], md5=md5))))
    # A model-size preset the config's schema refuses: its step fails, saying why, and the step
    # after it still runs.
    (tmp_path / "sizes.yaml").write_text("repeats: three\n")
    out = tmp_path / "out"
    cmd = [sys.executable, str(REPO / "bench" / "gpu_reference.py"), "--cpu-only", "--quick"]
    cmd += ["--configfile", str(tmp_path / "mirror.yaml"), "--sizes", str(tmp_path / "sizes.yaml")]
    cmd += ["--data", str(tmp_path / "no-mnist"), "--wheelhouse", str(tmp_path / "no-wheels")]
    cmd += ["--workdir", str(tmp_path / "work"), "--out", str(out), "--budget", "8"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]  # one step failed, on purpose

    # What comes back from the device machine: a few files, no folders, plain names.
    assert sorted(p.name for p in out.iterdir()) == ["gpu_reference.log", "reference-cpu.tar.gz", "steps.csv"]
    with tarfile.open(out / "reference-cpu.tar.gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert all(name.startswith("reference/cpu/") for name in files)
    files = {name.removeprefix("reference/cpu/"): data for name, data in files.items()}

    for table in ("runs", "summary", "environment", "ladder", "fits", "crossover", "speedup"):
        assert f"summary/{table}.csv" in files, sorted(files)
    # The whole grid: the ends' runs of the first pipeline and the middle batch size of the second.
    runs = list(csv.DictReader(io.StringIO(files["summary/runs.csv"].decode())))
    assert {r["device"] for r in runs} == {"cpu"} and len(runs) == 2 * 3 * 2  # modes x batch sizes x repeats
    assert sorted({int(r["batch_size"]) for r in runs}) == [8, 16, 64]
    assert "## The headline" in files["summary.md"].decode()
    assert files["figures/ladder.png"].startswith(PNG)
    assert json.loads(files["versions.json"])["packages"]["snakemake"]

    steps = {r["step"]: r for r in csv.DictReader(io.StringIO(files["steps.csv"].decode()))}
    assert list(steps) == ["install", "versions", "pipeline_ends", "gpu_tests", "pipeline", "sizes", "gpu_check"]
    assert steps["install"]["status"] == "skipped" and "nothing to install" in steps["install"]["reason"]
    assert steps["gpu_tests"]["status"] == "skipped" and "GPU" in steps["gpu_tests"]["reason"]
    assert "tests/test_persistent.py" in steps["gpu_tests"]["command"]
    assert steps["pipeline_ends"]["status"] == "ok" and "batch_sizes=[8,64]" in steps["pipeline_ends"]["command"]
    assert steps["pipeline"]["status"] == "ok" and steps["pipeline"]["exit_status"] == "0"
    # ... the whole grid then trains only the middle batch size's runs, and profiles nothing again.
    pipeline = subprocess.CompletedProcess([], 0, files["logs/pipeline.log"].decode(), "")
    assert job_stats(pipeline)["train"] == 2 * 1 * 2 and "profile" not in job_stats(pipeline)
    assert float(steps["pipeline"]["wall_s"]) > 0 and "snakemake" in steps["pipeline"]["command"]
    assert steps["sizes"]["status"] == "failed" and steps["sizes"]["exit_status"] == "1"
    assert "repeats" in steps["sizes"]["reason"], steps["sizes"]["reason"]
    assert steps["gpu_check"]["status"] == "ok", steps["gpu_check"]["reason"]
    assert "samples/s (median over repeats)" in files["logs/gpu_check.log"].decode()
    assert "repeats" in files["logs/sizes.log"].decode()

    commands = {c["name"]: c for c in json.loads(files["commands.json"])}
    assert commands["sizes"]["command"][:3] == [sys.executable, "-m", "snakemake"]
    assert commands["sizes"]["wall_s"] > 0 and commands["sizes"]["timeout_s"] > 0
    assert files["steps.csv"] == (out / "steps.csv").read_bytes()
    log = (out / "gpu_reference.log").read_text()
    assert re.search(r"^\S+ sizes +failed +1 ", log, re.M), log


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["heard", "ignored"])
def test_a_step_past_its_time_is_stopped_and_recorded(tmp_path, sigint):
    """Stopped by the interrupt at its deadline, also where this script runs with SIGINT ignored
    (started in the background by a shell), which its steps would inherit: not by the kill after
    GRACE_S."""
    gr = module()
    slow = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(120)"]
    before = signal.signal(signal.SIGINT, sigint)  # what this test process's children inherit
    try:
        step = gr.run(gr.Step("slow"), slow, 1, dict(os.environ), tmp_path / "slow.log", lambda line: None)
    finally:
        signal.signal(signal.SIGINT, before)
    assert step.status == "timed_out" and step.wall_s < 30, step
    assert step.exit_status == -signal.SIGINT and step.wall_s < 1 + gr.GRACE_S, step
    assert step.reason == "stopped after 1 s (its share of the budget)"
    assert "started" in (tmp_path / "slow.log").read_text()


def test_a_failed_step_says_why_in_one_line(tmp_path):
    gr = module()
    failing = [sys.executable, "-c", "import sys; print('working'); sys.exit('error: the wheel is missing')"]
    step = gr.run(gr.Step("failing"), failing, 60, dict(os.environ), tmp_path / "failing.log", lambda line: None)
    assert (step.status, step.exit_status) == ("failed", 1)
    assert step.reason == "exit 1: error: the wheel is missing"


def test_only_mnists_own_content_is_taken_as_the_data(tmp_path):
    gr = module()
    synthetic.write(tmp_path, n_train=20, n_test=10)
    with pytest.raises(ValueError, match="does not hold MNIST's train-images"):
        gr.mnist_md5(tmp_path)
    with pytest.raises(ValueError, match="is missing"):
        gr.mnist_md5(tmp_path / "elsewhere")
