"""The warm worker trains exactly what an in-process run trains, and reports errors in one line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mnistbench import BenchError, data, synthetic, train, worker


@pytest.fixture
def tensors(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=96, n_test=32)
    data.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    data.save_tensors(data.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    return str(tmp_path / "t.pt")


def test_worker_matches_in_process_training(tensors, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the socket path is relative, as in the workflow
    cfg = dict(train.DEFAULTS, train_samples=96, test_samples=32, warmup_steps=1, epochs=2)
    log = tmp_path / "job.log"
    req = dict(cfg=cfg, data_path=tensors, device="cpu", mode="module", batch_size=8, repeat=1, log_path=str(log))
    row, record = worker.train(req, "w.sock")
    local, _ = train.train(cfg, tensors, "cpu", "module", 8, 1, log=lambda m: None)
    assert row["status"] == "ok" and row["final_loss"] == pytest.approx(local["final_loss"], abs=1e-6)
    assert len(record["step_times_s"]) == row["steps"] and record["environment"]["threads"] == row["threads"]
    assert "epoch 2/2" in log.read_text()  # progress goes to the job's log
    with pytest.raises(BenchError, match="cuda:7"):
        worker.train(dict(req, device="cuda:7"), "w.sock")
    # One worker served both requests and is still up for the next job.
    assert os.path.exists("w.sock")


def test_a_cuda_error_retires_the_worker_and_nothing_else_does():
    # CUDA errors are sticky: the process's context stays broken, so the next job needs a new one.
    assert worker.poisoned({"error": "AcceleratorError: CUDA error: an illegal memory access was encountered"})
    assert worker.poisoned({"row": {"status": "error", "message": "RuntimeError: device-side assert triggered"}})
    assert not worker.poisoned({"row": {"status": "oom", "message": "out of memory at batch size 4096"}})
    assert not worker.poisoned({"error": "CUDA not available on this host for device 'cuda'"})


CLIENT = """
import json, sys
from mnistbench import BenchError, worker
try:
    row, _ = worker.train(json.loads(sys.argv[1]), sys.argv[2])
    print(row["status"])
except BenchError as e:
    sys.exit(f"error: {e}")
"""


@pytest.fixture
def long_run(tmp_path, monkeypatch):
    """A request that trains for several seconds (the beginner's code at batch 1), and how to
    start a client for it in its own process, as a Snakemake job would."""
    md5 = synthetic.write(tmp_path / "m", n_train=4096, n_test=32)
    data.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    data.save_tensors(data.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    monkeypatch.chdir(tmp_path)
    cfg = dict(train.DEFAULTS, train_samples=4096, test_samples=32, warmup_steps=1, epochs=6, retime=0)
    log = tmp_path / "job.log"
    req = dict(cfg=cfg, data_path=str(tmp_path / "t.pt"), device="cpu", mode="seed", batch_size=1, repeat=0)
    req["log_path"] = str(log)
    env = dict(os.environ, PYTHONPATH=str(Path(worker.__file__).parents[1]))

    def client():
        return subprocess.Popen(
            [sys.executable, "-c", CLIENT, json.dumps(req), str(tmp_path / "w.sock")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    return client, log


def worker_pid(log: Path, timeout=120) -> int:
    """The worker's pid once the run's first epoch is logged (the worker writes the job's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and "epoch 1/" in log.read_text():
            for p in Path("/proc").iterdir():
                if p.name.isdigit():
                    try:
                        cmd = (p / "cmdline").read_bytes().split(b"\0")
                    except OSError:
                        continue
                    if b"mnistbench.worker" in cmd and any(c.endswith(b"w.sock") for c in cmd):
                        return int(p.name)
        time.sleep(0.1)
    raise AssertionError(f"no worker trained: {log.read_text() if log.exists() else 'no log'}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_a_killed_job_stops_its_run(long_run):
    client, log = long_run
    job = client()
    pid = worker_pid(log)
    job.kill()  # Ctrl-C or a killed job: the client process is gone
    job.wait(timeout=30)
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the worker kept training a cancelled run"
    text = log.read_text()
    assert "cancelled" in text and "epoch 6/6" not in text


def test_a_killed_worker_gives_the_job_one_line(long_run):
    client, log = long_run
    job = client()
    pid = worker_pid(log)
    os.kill(pid, signal.SIGKILL)
    _, err = job.communicate(timeout=60)
    assert job.returncode != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the training worker (pid") and "ended" in lines[0], err
