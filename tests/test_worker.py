"""The warm worker trains exactly what an in-process run trains, and reports errors in one line."""

import os

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
