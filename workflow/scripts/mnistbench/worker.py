"""A warm training process, so local train jobs do not each pay for starting Python and torch.

Each local `train` job is a short client (standard library only): it asks the worker to train
its combination and writes the returned row and record itself. The worker imports torch once,
serves one request at a time (so timed runs never overlap, even across Snakemake invocations),
resets torch.compile's in-memory state before each run (each run compiles; inductor's disk cache
stays, as for a user's second run) and exits after `IDLE_S` seconds without work, when its code
changed, or after a CUDA error (which can leave the process's CUDA context broken for good). If the client is killed, nothing
is written: the outputs come only from the client.

On a cluster each job trains in its own process instead (a remote job's config has warm_worker
off: workflow/rules/common.smk).
"""

import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from mnistbench import BenchError

IDLE_S = 30
SOCKET = "results/.trainer.sock"  # relative to the workflow's working directory
PACKAGE = Path(__file__).resolve().parent


def fingerprint() -> str:
    """Changes whenever a source file of the package changes: a stale worker must not serve."""
    h = hashlib.sha256()
    for f in sorted(PACKAGE.glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


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
            reply = _recv(conn)
        if reply.get("stale"):  # it was serving older code and has now exited
            time.sleep(0.2)
            continue
        if "error" in reply:
            raise BenchError(reply["error"])
        return reply["row"], reply["record"]
    raise RuntimeError("the training worker kept reporting stale code")


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
            subprocess.Popen(
                [sys.executable, "-m", "mnistbench.worker", sock_path],
                env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")])),
                start_new_session=True,  # outlives this job, not killed with it
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            started = True
        if time.monotonic() > deadline:
            raise RuntimeError(f"no training worker answered on {sock_path}")
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
            except socket.timeout:
                return
            with conn:
                try:
                    req = _recv(conn)
                except ConnectionError:
                    continue
                if req.pop("fingerprint") != mine:
                    _send(conn, {"stale": True})
                    return
                reply = _run(req, trainer, torch)
                try:
                    _send(conn, reply)
                except OSError:  # the job was killed meanwhile: its outputs are simply not written
                    pass
                if poisoned(reply):
                    return
    finally:
        server.close()
        _unlink_if_mine(sock_path)


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


def _run(req: dict, trainer, torch) -> dict:
    # Every run compiles again (in-memory state cleared). Inductor's disk cache stays, so after
    # the first run of a graph `setup_s` is a warm-cache compile, as a user's second run is.
    torch.compiler.reset()
    log_path = req.pop("log_path", None)  # the rest are train.train's arguments
    with open(log_path, "a", buffering=1) if log_path else open(os.devnull, "w") as f:
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
