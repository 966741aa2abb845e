"""A run that cannot fit in memory is refused before it allocates, in one line, with a limit set
low (the environment's override, or a cgroup of the test's own), never by filling this machine."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import REPO, make_tensors
from mnistbench import BenchError
from mnistbench.train import memory, trainer


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    return make_tensors(tmp_path_factory.mktemp("memory"), 64, 16)


def test_a_run_that_cannot_fit_is_an_unsupported_row_and_a_smaller_one_trains(tensors, monkeypatch):
    monkeypatch.setenv(memory.FREE_ENV, "50M")
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=64, test_samples=16, warmup_steps=1, epochs=1, retime=0)
    quiet = dict(log=lambda m: None)
    small, _ = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "module", 8, 0, **quiet)
    assert small["status"] == "ok", small["message"]
    # mlp-2048-2048 holds 5.8 M parameters: five copies of its weights alone are 116 MB.
    big, _ = trainer.train(cfg, tensors, "cpu", "mlp-2048-2048", "module", 8, 0, **quiet)
    line = big["message"]
    assert big["status"] == "unsupported" and "\n" not in line, line
    for part in ("needs about 0.11", "of memory on cpu by its estimate", "5,824,522 parameters"):
        assert part in line, line
    assert "more than the 0.0524 GB free on this machine (MNISTBENCH_FREE_MEMORY)" in line, line
    assert "train fewer copies (models_at_once), a smaller batch size or a smaller network" in line, line
    assert big["initial_loss"] == "", "the refused run built its network before it was refused"
    # K copies multiply the need: one copy of mlp-256 (0.2 M parameters) fits in 10 MB, 8 do not.
    monkeypatch.setenv(memory.FREE_ENV, "10M")
    s = trainer.networks.build(cfg, "mlp-256")
    assert memory.too_big(cfg, s, "module", "cpu", 8, 1) is None
    assert "x 8 copies" in memory.too_big(cfg, s, "module", "cpu", 8, 8)
    with pytest.raises(BenchError, match="MNISTBENCH_FREE_MEMORY='lots' is not an amount of memory: set it as 2G"):
        memory.parse_bytes("lots")


def cgroup_of_its_own(limit: int) -> Path:
    """A child of this process's memory cgroup (v2 or v1) limited to `limit` bytes; skips where
    none can be made."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            bases, file = memory.CGROUP2, "memory.max"
        elif "memory" in controllers.split(","):
            bases, file = ("/sys/fs/cgroup/memory",), "memory.limit_in_bytes"
        else:
            continue
        for base in bases:
            d = Path(base) / path.lstrip("/") / f"mnistbench-test-{uuid.uuid4().hex[:8]}"
            try:
                d.mkdir()
            except OSError:
                continue
            try:
                (d / file).write_text(str(limit))
                return d
            except OSError:
                d.rmdir()
    pytest.skip("no memory cgroup can be made here")


@pytest.mark.slow  # a process of its own, importing torch
def test_what_is_free_is_the_cgroups_where_it_limits_the_run():
    """A process in a cgroup of 2 GB on a larger machine: what it may still allocate is the
    cgroup's, less what it already holds (torch's import among it), and the line names the cgroup."""
    d = cgroup_of_its_own(2 << 30)
    try:
        code = "from mnistbench.train import memory; free, where = memory.free('cpu'); print(free, where)"
        env = dict(os.environ, PYTHONPATH=str(REPO / "workflow/scripts"))
        env.pop(memory.FREE_ENV, None)
        out = subprocess.run(
            ["sh", "-c", f'echo $$ > "{d}/cgroup.procs" && exec "$@"', "sh", sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split(maxsplit=1)
    finally:
        d.rmdir()
    assert 0 < int(out[0]) < 2 << 30 and out[1].strip() == "this machine's cgroup of the run", out
