"""A warm training process, so local train jobs do not each pay for starting Python and torch.

Each local `train` job is a short client (standard library only): it asks a worker to train its
combination and writes the returned row and record itself. A worker imports torch once, serves
one request at a time, resets torch.compile's in-memory state before each run (each run
compiles; inductor's disk cache stays, as for a user's second run) and exits after `IDLE_S`
seconds without work, when its code changed, or after a CUDA error (which can leave the
process's CUDA context broken for good).

- Repeats are independent measurements: each repeat index has its own worker process, so the
  spread between repeats includes what differs between processes (memory layout, allocator,
  thread pool), as a fresh process per run would.
- A run dies with its job: while it trains, the worker watches the client's connection, and when
  the client goes (Ctrl-C, a killed job) it stops at once; nothing is written, since the outputs
  come only from the client.
- What a run prints (the mode's own output included) goes to the job's log.
- Timed runs on one machine never overlap, also across Snakemake invocations and with
  warm_worker off: each takes `timed_slot()` (a lock file) while it runs.

On a cluster each job trains in its own process instead (a remote job's config has warm_worker
off: workflow/rules/common.smk).
"""

import contextlib
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mnistbench import BenchError

IDLE_S = 30
SOCKETS = "results/.trainer-r{repeat}.sock"  # relative to the workflow's working directory
PACKAGE = Path(__file__).resolve().parent


def socket_for(repeat: int) -> str:
    return SOCKETS.format(repeat=repeat)


def worker_log(sock_path: str) -> str:
    """Where a worker writes what it prints between runs: logs/, beside the rules' logs."""
    os.makedirs("logs", exist_ok=True)
    return os.path.join("logs", Path(sock_path).name.lstrip(".").removesuffix(".sock") + ".log")


def fingerprint() -> str:
    """Changes whenever a source file of the package changes: a stale worker must not serve."""
    h = hashlib.sha256()
    for f in sorted(f for f in PACKAGE.iterdir() if f.suffix in (".py", ".c")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _slot_path() -> Path:
    return Path(tempfile.gettempdir()) / f"mnistbench-timed-{os.getuid()}.lock"


def timed_slot_busy() -> bool:
    """Whether some process holds the timed-run slot right now."""
    try:
        import fcntl
    except ImportError:
        return False
    with open(_slot_path(), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


@contextlib.contextmanager
def timed_slot(log=print):
    """Hold this machine's slot for timed runs (an exclusive lock on a file of this user in the
    temp dir) for the duration of one run; wait while another process holds it. Inside a Slurm
    job the scheduler places jobs, so there it is a no-op."""
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: the Snakemake resource limit still holds
        yield
        return
    if os.environ.get("SLURM_JOB_ID"):
        yield
        return
    with open(_slot_path(), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            log(f"waiting: another timed run holds this machine ({f.read().strip() or 'unknown process'})")
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} in {os.getcwd()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _send(conn, obj) -> None:
    blob = json.dumps(obj, default=str).encode()
    conn.sendall(struct.pack(">Q", len(blob)) + blob)


def _recv(conn):
    head = _exact(conn, 8)
    return json.loads(_exact(conn, struct.unpack(">Q", head)[0]))


def _exact(conn, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


def train(request: dict, sock_path: str) -> tuple[dict, dict]:
    """Client side: train `request` in the worker at sock_path (starting one if none is up)."""
    request = dict(request, fingerprint=fingerprint())
    for _ in range(3):
        conn = _connect(sock_path)
        with conn:
            _send(conn, request)
            pid = "?"
            try:
                ack = _recv(conn)
                if ack.get("stale"):  # it was serving older code and has now exited
                    time.sleep(0.2)
                    continue
                pid = ack["pid"]
                reply = _recv(conn)
            except (ConnectionError, OSError) as e:
                raise BenchError(
                    f"the training worker (pid {pid}) ended before the run finished ({e}); see the job's log "
                    f"and rerun the job, or set warm_worker: false to train in the job's own process"
                ) from None
        if "error" in reply:
            raise BenchError(reply["error"])
        return reply["row"], reply["record"]
    raise BenchError("the training worker kept reporting stale code; rerun the job")


def _connect(sock_path: str, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    started = False
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock_path)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
        if not started:
            if os.path.exists(sock_path):
                os.unlink(sock_path)  # left by a worker that died
            path = os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")])
            with open(worker_log(sock_path), "a") as out:  # the worker's own output between runs
                subprocess.Popen(
                    [sys.executable, "-m", "mnistbench.worker", sock_path],
                    env=dict(os.environ, PYTHONPATH=path),
                    start_new_session=True,  # outlives this job; it watches its clients instead
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            started = True
        if time.monotonic() > deadline:
            raise BenchError(f"no training worker answered on {sock_path}; see {worker_log(sock_path)}")
        time.sleep(0.05)


def serve(sock_path: str) -> None:
    import torch

    from mnistbench import train as trainer

    mine = fingerprint()
    tmp = f"{sock_path}.{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(tmp)
    os.replace(tmp, sock_path)  # appear atomically, ready to accept
    server.listen(64)
    server.settimeout(IDLE_S)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                # Idle: leave, unless another worker is timing a run now. Then exiting (tearing
                # down torch) would disturb it; wait, this repeat's next job is likely coming.
                if timed_slot_busy():
                    continue
                return
            with conn:
                try:
                    req = _recv(conn)
                except ConnectionError:
                    continue
                if req.pop("fingerprint") != mine:
                    _send(conn, {"stale": True})
                    return
                _send(conn, {"pid": os.getpid()})
                watch = _watch(conn, req.get("log_path"))
                reply = _run(req, trainer, torch)
                watch.set()
                try:
                    _send(conn, reply)
                except OSError:  # the job went meanwhile: its outputs are simply not written
                    pass
                if poisoned(reply):
                    return
    finally:
        server.close()
        _unlink_if_mine(sock_path)


def _watch(conn, log_path) -> threading.Event:
    """Stop this process if the client goes while its run trains. The thread sleeps in recv (the
    client sends nothing more), so it costs the timed loop nothing. Returns the event that marks
    the run's end; after it, the client closing is expected."""
    done = threading.Event()

    def wait():
        try:
            gone = conn.recv(1) == b""
        except OSError:
            gone = True
        if gone and not done.is_set():
            if log_path:
                with open(log_path, "a") as f:
                    print("cancelled: the job ended while its run trained; the worker stops the run", file=f)
            os._exit(1)

    threading.Thread(target=wait, daemon=True).start()
    return done


def poisoned(reply: dict) -> bool:
    """Whether the run hit a CUDA error: those are sticky, so the next job needs a fresh process."""
    text = reply.get("error", "") + str(reply.get("row", {}).get("message", ""))
    return any(s in text for s in ("CUDA error", "device-side assert", "CUBLAS_STATUS", "CUDNN_STATUS"))


def _unlink_if_mine(sock_path: str) -> None:
    # Another worker may have replaced the socket since; only a dead one's path is ours to remove.
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock_path)
        s.close()
    except OSError:
        try:
            os.unlink(sock_path)
        except OSError:
            pass


@contextlib.contextmanager
def _output_to(path):
    """Send this process's stdout and stderr (file descriptors, so C code's output too) to `path`
    for the duration of a run."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a", buffering=1) as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield f
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _run(req: dict, trainer, torch) -> dict:
    # Every run compiles again (in-memory state cleared). Inductor's disk cache stays, so after
    # the first run of a graph `setup_s` is a warm-cache compile, as a user's second run is.
    torch.compiler.reset()
    log_path = req.pop("log_path", None) or os.devnull  # the rest are train.train's arguments
    with _output_to(log_path) as f, timed_slot(log=lambda msg: print(msg, file=f)):
        try:
            row, record = trainer.train(**req, log=lambda msg: print(msg, file=f))
            return {"row": row, "record": record}
        except BenchError as e:
            return {"error": str(e)}
        except Exception as e:  # a bug: keep the worker alive, fail the job with its message
            import traceback

            traceback.print_exc(file=f)
            return {"error": f"{type(e).__name__}: {e}"}
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


if __name__ == "__main__":
    serve(sys.argv[1])
