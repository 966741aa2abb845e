"""The warm worker trains exactly what an in-process run trains, and reports errors in one line."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from conftest import jobs as planned
from conftest import make_tensors, snakemake, tiny_config, train_request
from mnistbench import BenchError, jobs
from mnistbench.data import download, preload, synthetic
from mnistbench.measure import slot
from mnistbench.train import profiling, records, trainer, worker

# Each test starts worker processes (torch imported, a socket served) and waits for them: seconds
# apiece, so they stay out of the edit loop (`pytest -m fast`).
pytestmark = pytest.mark.slow


@pytest.fixture
def tensors(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=96, n_test=32)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    return str(tmp_path / "t.pt")


def test_worker_matches_in_process_training(tensors, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the socket path is relative, as in the workflow
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, retime=0, train_samples=96, test_samples=32, warmup_steps=1, epochs=2)
    log = tmp_path / "job.log"
    req = train_request(cfg, tensors, "module", 8, repeat=1, log_path=str(log))
    row, record = worker.train(req, "w/w.sock", siblings=["w/v.sock"])
    # The other repeat's worker started with this one and listened before this run was timed.
    assert os.stat("w/v.sock").st_mtime < datetime.fromisoformat(row["start_utc"]).timestamp()
    local, _ = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "module", 8, 1, log=lambda m: None)
    assert row["status"] == "ok" and row["final_loss"] == pytest.approx(local["final_loss"], abs=1e-6)
    assert len(records.step_times(record)) == row["steps"] and record["environment"]["threads"] == row["threads"]
    assert "epoch 2/2" in log.read_text()  # progress goes to the job's log
    with pytest.raises(BenchError, match="cuda:7"):
        worker.train(dict(req, device="cuda:7"), "w/w.sock")
    # One worker served both requests and is still up for the next job.
    assert os.path.exists("w/w.sock")


def test_workers_started_together_all_listen_when_it_returns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    worker.start_together(["w/a.sock", "w/b.sock"])
    assert os.path.exists("w/a.sock") and os.path.exists("w/b.sock")


def test_a_reply_of_a_million_step_times_arrives_and_a_huge_request_does_not():
    """A batch-1 run long enough for min_timed_s returns about a million step times (over 16 MiB of
    JSON); the reply must arrive whole, while a worker still reads no request that large."""
    from multiprocessing import Pipe

    a, b = Pipe()
    record = {"step_times_s": [1.2345678e-05 + i * 1e-12 for i in range(1_000_000)]}
    sender = threading.Thread(target=worker._send, args=(a, record))
    sender.start()
    got = worker._recv(b)
    sender.join()
    assert len(json.dumps(record)) > 1 << 24 and got == record

    def send_huge():
        with contextlib.suppress(OSError):  # the reader hangs up after the length
            worker._send(a, {"cfg": "x" * (1 << 24)})

    sender = threading.Thread(target=send_huge)
    sender.start()
    with pytest.raises(OSError, match="bad message length"):
        worker._recv(b, worker.MAX_REQUEST)
    b.close()
    sender.join()


def test_a_cuda_error_retires_the_worker_and_nothing_else_does():
    # CUDA errors are sticky: the process's context stays broken, so the next job needs a new one.
    assert worker.poisoned({"error": "AcceleratorError: CUDA error: an illegal memory access was encountered"})
    assert worker.poisoned({"row": {"status": "error", "message": "RuntimeError: device-side assert triggered"}})
    assert not worker.poisoned({"row": {"status": "oom", "message": "out of memory at batch size 4096"}})
    assert not worker.poisoned({"error": "CUDA not available on this host for device 'cuda'"})


CLIENT = """
import json, sys
from mnistbench import BenchError
from mnistbench.train import worker
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
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    monkeypatch.chdir(tmp_path)
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=4096, test_samples=32, warmup_steps=1, epochs=6, retime=0)
    log = tmp_path / "job.log"
    req = train_request(cfg, tmp_path / "t.pt", "seed", 1, log_path=str(log))
    env = dict(os.environ, PYTHONPATH=str(Path(worker.__file__).parents[2]))

    def client():
        return subprocess.Popen(
            [sys.executable, "-c", CLIENT, json.dumps(req), str(tmp_path / "w/w.sock")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    return client, log


def worker_pid(log: Path, timeout=120) -> int:
    """The pid of the worker serving this test's socket (tests in other processes run workers of
    their own) once the run's first epoch is logged (the worker writes the job's log)."""
    sock = str(log.parent / "w/w.sock").encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and "epoch 1/" in log.read_text():
            for p in Path("/proc").iterdir():
                if p.name.isdigit():
                    try:
                        cmd = (p / "cmdline").read_bytes().split(b"\0")
                    except OSError:
                        continue
                    if b"mnistbench.train.worker" in cmd and sock in cmd:
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
    # What is known of how it ended (its parent, this job, was told), never an empty "()"; a SIGKILL
    # is what the kernel's out-of-memory killer sends: the run's estimate, and the fixes for memory.
    assert "(killed by signal 9 (SIGKILL), the signal the kernel's out-of-memory killer sends (this run's" in lines[0]
    assert "estimate: about 0." in lines[0] and "GB free); its log: logs/w.log); if memory ran out, train" in lines[0]
    assert "()" not in lines[0], err


def test_a_worker_gone_while_the_kernel_killed_for_memory_says_so_though_this_job_did_not_start_it(tmp_path):
    """The job that started a worker learns its exit status; the others do not, but the kernel's
    count of out-of-memory kills tells them that it killed meanwhile."""
    if worker.oom_kills() is None:
        pytest.skip("this system does not count out-of-memory kills (/proc/vmstat)")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs, of a process this job did not start as a worker
    since = worker.oom_kills() - 1  # one kill since the run began
    line = worker._lost(str(tmp_path / "w.sock"), gone.pid, EOFError(), "about 30 GB on cpu, of 21 GB free", since)
    assert "it has exited; its exit status went to the job that started it: the kernel's out-of-memory killer" in line
    assert "(this run's estimate: about 30 GB on cpu, of 21 GB free)" in line and "set warm_worker" not in line
    assert line.endswith(
        "; train fewer copies (models_at_once), a smaller batch size or a smaller network, or free memory"
    )
    quiet = worker._lost(str(tmp_path / "w.sock"), gone.pid, EOFError(), "about 1 GB", since + 1)
    assert "memory" not in quiet and "set warm_worker: false" in quiet


def test_a_lost_connection_to_a_worker_that_still_runs_says_only_that(tmp_path):
    """The line says one thing: the worker ended (and how), or it still runs and the connection
    failed; never both."""
    line = worker._lost(str(tmp_path / "w.sock"), os.getpid(), ConnectionResetError("reset by peer"))
    assert line.startswith(f"the connection to the training worker (pid {os.getpid()}) failed before the run finished")
    assert "(ConnectionResetError reset by peer); the worker still runs; its log:" in line and "ended" not in line


def serve_one(folder: Path, tensors: str):
    """A worker that served one run, started in `folder` (its working directory, which the
    request's files lie in) under umask 000 (the worst a user may have): the request and the
    socket path."""
    old = os.umask(0)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(folder)  # the socket path is relative, as in the workflow
            cfg = dict(
                trainer.DEFAULTS, min_timed_s=0, retime=0, train_samples=96, test_samples=32, warmup_steps=1, epochs=1
            )
            req = train_request(cfg, tensors, "module", 8, log_path=str(folder / "job.log"))
            worker.train(req, "w/w.sock")
    finally:
        os.umask(old)
    return req, folder / "w/w.sock"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One worker for the tests that only send it requests (it serves one at a time): starting a
    worker costs seconds. Each such test works in its folder, so that a worker started again
    (after IDLE_S without work) has the same working directory."""
    folder = tmp_path_factory.mktemp("served")
    return serve_one(folder, str(make_tensors(folder, 96, 32)))


@pytest.fixture
def served_alone(tensors, tmp_path):
    """A worker of this test's own, started under umask 000 for sure (`served` may have been
    started again since), whose folder's permissions the test may change."""
    return serve_one(tmp_path, tensors)


def mode_of(path) -> int:
    return os.stat(path).st_mode & 0o777


def test_the_socket_and_its_key_are_private_whatever_the_umask(served_alone):
    _, sock = served_alone
    assert mode_of(sock.parent) == 0o700 and mode_of(sock) == 0o600 and mode_of(sock.parent / "authkey") == 0o600


@pytest.mark.parametrize(
    "change, why",
    [
        (dict(log_path="/etc/mnistbench-owned.log"), "log_path '/etc/mnistbench-owned.log' lies outside"),
        (dict(data_path="/etc/shadow"), "data_path '/etc/shadow' lies outside"),
        (dict(data_path="w/../../t.pt"), "data_path 'w/../../t.pt' lies outside"),
        (dict(cfg_training=dict(amp_dtype="__class__")), "training.amp_dtype"),
        (dict(cfg_epochs=-1), "epochs"),
        (dict(batch_size="8"), "batch_size '8' is not an integer"),
        (dict(extra=1), "extra"),
    ],
)
def test_a_bad_request_is_refused_in_one_line_and_the_worker_stays(served, change, why, monkeypatch):
    req, sock = served
    monkeypatch.chdir(sock.parents[1])
    bad = dict(req, cfg=dict(req["cfg"]))
    for k, v in change.items():
        if k.startswith("cfg_"):
            bad["cfg"][k[4:]] = dict(bad["cfg"][k[4:]], **v) if isinstance(v, dict) else v
        else:
            bad[k] = v
    with pytest.raises(BenchError, match="the training worker refused the request: .*" + re.escape(why)):
        worker.train(bad, str(sock))
    assert not os.path.exists("/etc/mnistbench-owned.log")
    row, _ = worker.train(req, str(sock))  # the same worker serves the next job
    assert row["status"] == "ok"


def test_the_worker_profiles_what_an_in_process_profile_does(served, monkeypatch):
    req, sock = served
    monkeypatch.chdir(sock.parents[1])
    ask = dict(
        cfg=req["cfg"],
        data_path=req["data_path"],
        device="cpu",
        networks=["mlp-16-16"],
        modes=["manual", "module"],
        batch_sizes=[1, 8],
    )
    rows = worker.profile(dict(ask, log_path=req["log_path"]), str(sock))
    local = profiling.profile_device(**ask, log=lambda m: None)
    keys = ["mode", "batch_size", "status", "split", "steps", "threads"]
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in local]
    assert all(r["status"] == "ok" and r["ops_step"] > 0 for r in rows) and set(rows[0]) == set(records.PROFILE_COLUMNS)
    assert "cpu mlp-16-16 manual bs1: ok" in Path(req["log_path"]).read_text()  # progress goes to the job's log
    with pytest.raises(BenchError, match="refused the request: modes \\['nope'\\] are not a list of known modes"):
        worker.profile(dict(ask, modes=["nope"]), str(sock))


OTHER_USER = """
import json, sys
from multiprocessing.connection import Client
try:
    c = Client(sys.argv[1], family="AF_UNIX", authkey=bytes.fromhex(sys.argv[2]))
    c.send_bytes(json.dumps(json.loads(sys.argv[3])).encode())
    print("reply", c.recv_bytes())
except Exception as e:
    print("refused", type(e).__name__)
"""


def test_another_local_user_cannot_reach_the_worker_or_have_it_open_a_file(served_alone, tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("running a client as another user needs root (to switch to uid 65534)")
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else None
    if python is None:
        pytest.skip("no system python3 for the other user's client")
    req, sock = served_alone
    monkeypatch.chdir(tmp_path)
    key = (sock.parent / "authkey").read_bytes().hex()
    target = tmp_path / "private" / "planted.txt"
    target.parent.mkdir(mode=0o700)
    evil = dict(req, log_path=str(target), fingerprint=worker.identity())

    def as_nobody(*args):
        p = subprocess.run([python, "-c", OTHER_USER, *args], user=65534, group=65534, capture_output=True, text=True)
        return p.stdout.strip() + p.stderr.strip()

    # The folder keeps another user out, even one who somehow holds the key.
    assert as_nobody(str(sock), key, json.dumps(evil)) == "refused PermissionError"
    # Were the folder and socket open to all, the worker still checks the caller's uid: it
    # closes the connection once the client authenticated.
    closed = [d for d in sock.parents if not os.stat(d).st_mode & 0o001]
    for d in closed:  # pytest's temp folders are private: let the other user through them
        os.chmod(d, os.stat(d).st_mode | 0o001)
    try:
        os.chmod(sock.parent, 0o755)
        os.chmod(sock, 0o777)
        got = as_nobody(str(sock), key, json.dumps(evil))
        assert got in ("refused EOFError", "refused BrokenPipeError", "refused ConnectionResetError"), got
    finally:
        for d in closed:
            os.chmod(d, os.stat(d).st_mode & ~0o001)
    assert not target.exists()
    row, _ = worker.train(req, str(sock))  # still up, and only its owner's jobs run
    assert row["status"] == "ok"
    assert mode_of(sock.parent) == 0o700


@pytest.fixture
def idle_clock(tmp_path, monkeypatch):
    """A worker's idle watch (worker._Idle) at about a third of its speed (a check every 0.5 s,
    IDLE_S 1.5 s), serving the pipeline `pipeline` names (this test process by default): start()
    starts it; `left` holds when it would have exited (the watching thread stops there)."""
    monkeypatch.setattr(worker, "IDLE_S", 1.5)
    monkeypatch.setattr(worker, "IDLE_CHECK_S", 0.5)
    left = []

    def leave(self, status):
        left.append(time.monotonic())
        threading.Event().wait()

    monkeypatch.setattr(worker._Idle, "leave", leave)
    sock = tmp_path / "w.sock"
    sock.touch()

    def start(pipeline=None):
        monkeypatch.setenv(jobs.PIPELINE_ENV, pipeline or jobs.pipeline_token())
        worker._Idle(str(sock))
        monkeypatch.setenv(jobs.PIPELINE_ENV, jobs.pipeline_token())

    return start, left


def test_an_idle_worker_stays_while_its_pipelines_runs_are_timed_and_leaves_after_idle_s_without(idle_clock):
    """Gaps between the runs of the pipeline's other workers are not idleness: a worker that left
    in them would make its next job pay for a new worker. IDLE_S without its own pipeline's
    timed runs is."""
    start, left = idle_clock
    start()
    with slot.timed_slot(log=lambda m: None):  # another worker's run, longer than IDLE_S
        time.sleep(2)
    time.sleep(0.75)  # the gap before the next run: the worker was idle 2.75 s, but not the pipeline
    with slot.timed_slot(log=lambda m: None):
        time.sleep(1)
    assert not left
    released = time.monotonic()
    while not left and time.monotonic() - released < 5:
        time.sleep(0.1)
    # The pipeline was last seen busy at most a check (0.5 s) before the release.
    assert left and 1 <= left[0] - released <= 3.5, (released, left)


def test_another_pipelines_timed_runs_do_not_keep_a_worker(idle_clock, monkeypatch):
    start, left = idle_clock
    start()
    began = time.monotonic()
    monkeypatch.setenv(jobs.PIPELINE_ENV, jobs.pipeline_token(os.getppid()))  # a run of another pipeline
    with slot.timed_slot(log=lambda m: None):
        while not left and time.monotonic() - began < 6:
            time.sleep(0.1)
    assert left and left[0] - began <= 3.5, (began, left)


def test_a_worker_leaves_when_its_pipeline_ends(idle_clock, monkeypatch):
    monkeypatch.setattr(worker, "IDLE_S", 600)  # long: only the pipeline's end ends it
    start, left = idle_clock
    pipeline = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start(jobs.pipeline_token(pipeline.pid))
        time.sleep(1.5)
        assert not left  # its pipeline runs
    finally:
        pipeline.kill()
        pipeline.wait()
    ended = time.monotonic()
    while not left and time.monotonic() - ended < 5:
        time.sleep(0.1)
    assert left and left[0] - ended <= 2, (ended, left)


def test_a_lock_that_cannot_be_opened_is_the_jobs_line_and_the_worker_stays(served, tmp_path, monkeypatch):
    """The line a job training in its own process (warm_worker: false) prints, not a worker's death."""
    req, sock = served
    monkeypatch.chdir(sock.parents[1])
    monkeypatch.setenv("MNISTBENCH_TIMED_SLOT", str(tmp_path / "missing" / "slot.lock"))
    with pytest.raises(BenchError) as own_process:
        with slot.timed_slot(log=lambda m: None):  # what train.py does with warm_worker: false
            pass
    line = str(own_process.value)
    assert "slot.lock cannot be created (No such file or directory): make" in line and "missing a folder" in line
    with pytest.raises(BenchError) as warm:
        worker.train(req, str(sock))
    inode = os.stat(sock).st_ino  # the worker that refused it
    assert str(warm.value) == line
    with pytest.raises(BenchError) as again:
        worker.train(req, str(sock))
    assert str(again.value) == line and os.stat(sock).st_ino == inode  # the same worker, still up


COMPILER_FAILED = (
    "kernel needs a C compiler that runs (/bin/false --version: exit status 1): "
    "set CC to a working C compiler, or install one (gcc or clang)"
)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the kernel")
def test_a_changed_compiler_starts_a_new_worker(served, monkeypatch):
    req, sock = served
    monkeypatch.chdir(sock.parents[1])
    monkeypatch.delenv("CC", raising=False)
    kernel = dict(req, mode="kernel")
    row, before = worker.train(kernel, str(sock))
    assert row["status"] == "ok", row["message"]
    monkeypatch.setenv("CC", "/bin/false")  # the worker that built it must not serve this one
    # The compiler's line, as the job's error (no `unsupported` row that a plain rerun would keep).
    with pytest.raises(BenchError, match=re.escape(COMPILER_FAILED)):
        worker.train(kernel, str(sock))
    monkeypatch.delenv("CC")
    row, record = worker.train(kernel, str(sock))
    assert row["status"] == "ok", row["message"]
    assert record["environment"]["pid"] != before["environment"]["pid"]  # a new worker built it


def live_workers(wd: Path) -> list:
    """The worker processes serving the pipelines of working directory wd."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            if "mnistbench.train.worker" in (p.info["cmdline"] or []) and p.info["cwd"] == str(wd) and alive(p.pid):
                found.append(p.pid)
    return found


def test_a_symlinked_results_folder_trains_in_warm_workers(mirror, prepared, tmp_path_factory):
    """results/ as a link to a folder elsewhere (a bigger disk, as on a cluster)."""
    import pandas as pd

    url, md5 = mirror
    elsewhere = tmp_path_factory.mktemp("bigger-disk") / "results"
    shutil.move(prepared / "results", elsewhere)  # the preloaded data too, file times kept
    (prepared / "results").symlink_to(elsewhere)
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["manual", "module"], batch_sizes=[8], warm_worker=True)
    proc = snakemake(prepared, cfg)
    runs = pd.read_csv(prepared / "results/summary/runs.csv")
    assert len(runs) == 2 and (runs["status"] == "ok").all(), runs[["mode", "status", "message"]]
    assert proc.stderr.count("(warm worker)") == 2, proc.stderr[-3000:]
    assert (elsewhere / "summary.md").exists() and "train" not in planned(snakemake(prepared, cfg, "-n"))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the kernel")
def test_workers_end_with_their_pipeline_and_a_fixed_compiler_redoes_the_kernel(mirror, prepared, monkeypatch):
    """A pipeline's workers do not outlive it; the next pipeline, with a working compiler, trains
    its kernel runs in workers of its own (those of the last one had CC=/bin/false)."""
    url, md5 = mirror
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["module", "kernel"], batch_sizes=[8], repeats=2)
    module = [f"results/runs/cpu/mlp-16-16/module/bs8/r{r}" for r in (0, 1)]
    kernel = [f"results/runs/cpu/mlp-16-16/kernel/bs8/r{r}" for r in (0, 1)]
    monkeypatch.setenv("CC", "/bin/false")  # the kernel leaves the grid; the workers start with it
    snakemake(prepared, cfg, *(f"{r}.csv" for r in module))
    ended = time.monotonic()
    pids = {json.loads((prepared / f"{r}.json").read_text())["environment"]["pid"] for r in module}
    assert len(pids) == 2  # one worker per repeat
    while any(alive(p) for p in pids) and time.monotonic() - ended < 10:  # a check a second
        time.sleep(0.2)
    assert not [p for p in pids if alive(p)] and not live_workers(prepared)
    monkeypatch.delenv("CC")
    snakemake(prepared, cfg, *(f"{r}.csv" for r in kernel))
    for r in kernel:
        row = (prepared / f"{r}.csv").read_text()
        assert ",ok," in row and "could not build" not in row, row
    assert "train" not in planned(snakemake(prepared, cfg, "-n", *(f"{r}.csv" for r in module + kernel)))


def test_a_grid_that_only_the_missing_compiler_empties_names_the_compiler(mirror, prepared, monkeypatch):
    url, md5 = mirror
    monkeypatch.setenv("CC", "/bin/false")
    proc = snakemake(prepared, tiny_config(url, md5, devices=["cpu"], modes=["kernel"]), "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert COMPILER_FAILED in out, out[-3000:]
    assert "add a mode" not in out
