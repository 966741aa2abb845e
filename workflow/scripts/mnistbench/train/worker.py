"""A warm training process, so local train jobs do not each pay for starting Python and torch.

Each local `train` job is a short client (standard library only): it asks a worker to train its
combination and writes the returned row and record itself; the `profile` job asks the first
repeat's worker for its rows the same way. A worker imports torch once, serves one request at a
time (each run compiles afresh: see modes.Compiled) and exits when the pipeline it was started
for ends (the Snakemake process that jobs.PIPELINE_ENV names), after `IDLE_S` seconds in which
neither it nor a timed run of its own pipeline was busy, when a job with another identity comes
(other code, another pipeline, another compiler or environment: `identity`), or after a CUDA
error (which can leave the process's CUDA context broken for good).

- Repeats are independent measurements: each repeat index has its own worker process, so the
  spread between repeats includes what differs between processes (memory layout, allocator,
  thread pool), as a fresh process per run would.
- A run dies with its job: while it trains, the worker watches the client's connection, and when
  the client goes (Ctrl-C, a killed job) it stops at once; nothing is written, since the outputs
  come only from the client.
- What a run prints (the mode's own output included) goes to the job's log.
- Timed runs on one machine never overlap, also across Snakemake invocations, users and with
  warm_worker off: each takes `timed_slot()` (a lock file every user shares) while it runs.
- Only this user's jobs reach a worker: its socket lies in a directory only the user may enter
  (0700) and is itself 0600; a client must prove it holds the key kept there (0600, the
  standard library's authenticated `multiprocessing.connection`), and the caller's uid is
  checked where the system tells it (SO_PEERCRED). A request is checked before it runs (its
  files inside the working directory, its settings of the schema's types and ranges); a bad one
  is refused in one line and the worker stays up, as it does when a run cannot start (its
  error goes to the job).

On a cluster each job trains in its own process instead (a remote job's config has warm_worker
off: workflow/rules/common.smk).
"""

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import AuthenticationError, Client, Listener
from pathlib import Path

from mnistbench import BenchError, jobs
from mnistbench.config import depends
from mnistbench.measure import slot

IDLE_S = 30
IDLE_CHECK_S = 1  # how often a worker looks whether its pipeline runs and times a run
SOCKETS = "results/.trainer/r{repeat}.sock"  # relative to the workflow's working directory
PACKAGE = Path(__file__).resolve().parents[1]
# What a request holds: train.train's arguments and the job's log; a profile job's request
# (kind "profile") holds profiling.profile_device's instead.
REQUEST = {"cfg", "data_path", "device", "network", "mode", "batch_size", "repeat", "models_at_once", "log_path"}
PROFILE_REQUEST = {"kind", "cfg", "data_path", "device", "networks", "modes", "batch_sizes", "log_path"}


def socket_for(repeat: int) -> str:
    return SOCKETS.format(repeat=repeat)


def worker_log(sock_path: str) -> str:
    """Where a worker writes what it prints between runs: logs/, beside the rules' logs."""
    os.makedirs("logs", exist_ok=True)
    return os.path.join("logs", Path(sock_path).name.lstrip(".").removesuffix(".sock") + ".log")


def fingerprint() -> str:
    """Changes whenever a source file of the package changes: a stale worker must not serve."""
    h = hashlib.sha256()
    for f in sorted(f for f in PACKAGE.rglob("*") if f.suffix in (".py", ".c")):
        h.update(str(f.relative_to(PACKAGE)).encode() + f.read_bytes())
    return h.hexdigest()[:16]


def identity() -> str:
    """What a worker's runs depend on besides the request: the package's sources (fingerprint),
    the interpreter, the environment that changes a run (depends.environment: the C compiler and
    what it reads, the threads variables a run records, ...) and the pipeline it serves. A worker
    serves only jobs of its own identity: any other one finds it stale (it exits) and starts a
    worker in its own environment."""
    parts = [fingerprint(), sys.executable, depends.environment(), os.environ.get(jobs.PIPELINE_ENV, "")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _private_dir(sock_path: str) -> Path:
    """The socket's directory, only this user's: created 0700, and made so if it is not (it is
    this pipeline's own folder). Another user's, or a symbolic link, is refused."""
    d = Path(sock_path).parent
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise BenchError(f"{d} (the training worker's folder) is not a folder of this user: remove it and rerun")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def authkey(sock_path: str) -> bytes:
    """The secret a client proves it holds, kept 0600 in the socket's private directory; made once,
    by whichever process needs it first (written whole under another name, then linked in)."""
    d = _private_dir(sock_path)
    path = d / "authkey"
    if not path.exists():
        tmp = d / f".authkey.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise BenchError(f"{path} is not a private file of this user: remove {d} and rerun")
        return f.read()


def _send(conn, obj) -> None:
    conn.send_bytes(json.dumps(obj, default=str).encode())  # JSON, not pickle: plain data only


# The largest request a worker reads. Replies come from this user's own authenticated worker and
# have no limit: one carries the run's record with every step time (~20 bytes each in JSON), and
# a batch-1 run that needs many epochs to reach min_timed_s times about a million steps (a 16 MiB
# limit on replies once cut such a run off).
MAX_REQUEST = 1 << 24


def _recv(conn, limit=None):
    return json.loads(conn.recv_bytes(limit))


def peer_uid(conn) -> int | None:
    """The uid of the process at the other end of a unix socket (None where the system does not say)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    s = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        return struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    finally:
        s.close()


def train(request: dict, sock_path: str, siblings=()) -> tuple[dict, dict]:
    """Client side: train `request` in the worker at sock_path (starting one if none is up).
    `siblings`: the sockets of the other repeats' workers, started together with this one when
    none is up yet (see start_together)."""
    reply = _ask(request, sock_path, siblings)
    return reply["row"], reply["record"]


def profile(request: dict, sock_path: str) -> list[dict]:
    """Client side: profiling.profile_device's rows for `request` (PROFILE_REQUEST), from the
    worker at sock_path, which has torch and the compiler imported already."""
    return _ask(dict(request, kind="profile"), sock_path)["rows"]


def _ask(request: dict, sock_path: str, siblings=()) -> dict:
    request = dict(request, fingerprint=identity())
    key = authkey(sock_path)
    if not os.path.exists(sock_path):
        start_together([sock_path, *(s for s in siblings if not os.path.exists(s))])
    for _ in range(3):
        conn = _connect(sock_path, key)
        if conn is None:  # the worker left as this job connected: start another
            continue
        with conn:
            _send(conn, request)
            pid, needs, ooms = "?", "", oom_kills()
            try:
                ack = _recv(conn)
                if ack.get("stale"):  # it was serving older code and has now exited
                    time.sleep(0.2)
                    continue
                if "refused" in ack:
                    raise BenchError(f"the training worker refused the request: {ack['refused']}")
                pid, needs = ack["pid"], ack.get("needs", "")
                reply = _recv(conn)
            except (EOFError, OSError) as e:
                raise BenchError(_lost(sock_path, pid, e, needs, ooms)) from None
        if "error" in reply:
            raise BenchError(reply["error"])
        return reply
    raise BenchError(
        f"the training worker on {sock_path} kept serving other code, another environment or another pipeline "
        "(is another Snakemake run using this working directory?): rerun the job when it has ended"
    )


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (/proc/vmstat),
    or None where the system does not say."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _lost(sock_path: str, pid, error: BaseException, needs: str = "", ooms: int | None = None) -> str:
    """What is known of a worker whose connection closed mid-run, as one line: how it ended where
    this process started it, or that it still runs and only the connection failed; its log; and
    the fix. Where it was killed by SIGKILL, or the kernel's out-of-memory killer killed a process
    since the run began (`ooms`: its count then; the worker need not be this job's child), the line
    says that it may have been for lack of memory, with the run's estimate (`needs`, which the
    worker sent as the run began)."""
    proc = _spawned.get(sock_path)
    status = None
    if proc is not None and (pid == "?" or proc.pid == pid):
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = proc.wait(timeout=5)
    if status is not None and status < 0:
        how = f"killed by signal {-status}"
        with contextlib.suppress(ValueError):
            how += f" ({signal.Signals(-status).name})"
    elif status is not None:
        how = f"exit status {status}"
    elif pid != "?" and _alive(pid):
        return (
            f"the connection to the training worker (pid {pid}) failed before the run finished "
            f"({type(error).__name__} {error}".strip()
            + f"); the worker still runs; its log: {worker_log(sock_path)}"
        )
    else:
        how = "it has exited; its exit status went to the job that started it"
    fix = "see the job's log and rerun the job, or set warm_worker: false to train in the job's own process"
    memory = "train fewer copies (models_at_once), a smaller batch size or a smaller network, or free memory"
    estimate = f" (this run's estimate: {needs})" if needs else ""
    now = oom_kills()
    if ooms is not None and now is not None and now > ooms:
        how += f": the kernel's out-of-memory killer killed a process meanwhile{estimate}"
        fix = memory
    elif status == -signal.SIGKILL:
        how += f", the signal the kernel's out-of-memory killer sends{estimate}"
        fix = f"if memory ran out, {memory}; else see the job's log and rerun the job"
    return f"the training worker (pid {pid}) ended before the run finished ({how}; its log: {worker_log(sock_path)}); {fix}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    return True


def _connect(sock_path: str, key: bytes, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    started = False
    while True:
        try:
            return Client(sock_path, family="AF_UNIX", authkey=key)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        except (EOFError, ConnectionResetError):
            return None
        except AuthenticationError:
            raise BenchError(
                f"the training worker on {sock_path} holds another key (its folder was replaced): "
                f"end it (see {worker_log(sock_path)} for its pid) and rerun"
            ) from None
        if not started:
            if os.path.exists(sock_path):
                os.unlink(sock_path)  # left by a worker that died
            _spawn(sock_path)
            started = True
        if time.monotonic() > deadline:
            raise BenchError(f"no training worker answered on {sock_path}; see {worker_log(sock_path)}")
        time.sleep(0.05)


# The workers this process started, by socket: how one ended can be told only to its parent.
_spawned: dict[str, subprocess.Popen] = {}


def _spawn(sock_path: str) -> subprocess.Popen:
    path = os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")])
    with open(worker_log(sock_path), "a") as out:  # the worker's own output between runs
        _spawned[sock_path] = subprocess.Popen(
            [sys.executable, "-m", "mnistbench.train.worker", sock_path],
            env=dict(os.environ, PYTHONPATH=path),
            start_new_session=True,  # outlives this job; it watches its clients instead
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return _spawned[sock_path]


def start_together(sock_paths, timeout_s: float = 120.0) -> None:
    """Start a worker on each of sock_paths at once and return when each listens (or has died:
    its job then starts another). The first train job of a pipeline starts every repeat's worker
    this way: their `import torch` overlap on the machine's cores before any run is timed,
    instead of each following a timed run, one after another, and nothing starts beside a
    timed run later."""
    if len(sock_paths) < 2:
        return  # one worker: _connect starts it
    procs = {p: _spawn(p) for p in sock_paths}
    deadline = time.monotonic() + timeout_s
    while procs and time.monotonic() < deadline:
        procs = {p: proc for p, proc in procs.items() if not os.path.exists(p) and proc.poll() is None}
        time.sleep(0.05)


def check_request(req: dict, validator) -> str | None:
    """Why a request cannot run (None if it can): its keys, its files inside this worker's working
    directory (the workflow's), its run settings of the schema's types and ranges."""
    import jsonschema

    from mnistbench.config import networks
    from mnistbench.config.catalog import MODES

    # Without a log_path, what the run prints is dropped.
    profiles = req.get("kind") == "profile"
    odd = (set(req) ^ (PROFILE_REQUEST if profiles else REQUEST)) - {"log_path"}
    if odd:
        return f"it holds {', '.join(sorted(odd))} unlike a {'profile' if profiles else 'train'} job's request"
    # Paths as the job wrote them (absolute, symbolic links not followed: results/ may be a link
    # to a bigger disk), against the working directory as the system names it to both processes;
    # without "..", a path under it is reached through it.
    home = os.getcwd()
    for key in ("data_path", "log_path") if "log_path" in req else ("data_path",):
        path = req[key]
        if (
            not isinstance(path, str)
            or ".." in Path(path).parts
            or os.path.commonpath([home, os.path.abspath(path)]) != home
        ):
            return f"{key} {path!r} lies outside the working directory {home}"
    if not isinstance(req["device"], str) or not re.fullmatch(r"[a-z]+(:\d+)?", req["device"]):
        return f"malformed device {req['device']!r}"
    named = req["networks"] if profiles else [req["network"]]
    for name in named if isinstance(named, list) else [named]:
        try:
            networks.network(name)
        except (networks.BadNetwork, TypeError) as e:
            return f"network {name!r} is not a `models` entry ({e})"
    if profiles:
        if not isinstance(req["networks"], list):
            return f"networks {req['networks']!r} are not a list"
        if not isinstance(req["modes"], list) or not all(m in MODES for m in req["modes"]):
            return f"modes {req['modes']!r} are not a list of known modes"
        if not isinstance(req["batch_sizes"], list) or not all(type(b) is int and b >= 1 for b in req["batch_sizes"]):
            return f"batch_sizes {req['batch_sizes']!r} are not a list of integers >= 1"
    else:
        if req["mode"] not in MODES:
            return f"unknown mode {req['mode']!r}"
        for key, least in (("batch_size", 1), ("repeat", 0), ("models_at_once", 1)):
            if type(req[key]) is not int or req[key] < least:
                return f"{key} {req[key]!r} is not an integer >= {least}"
    e = jsonschema.exceptions.best_match(validator.iter_errors(req["cfg"]))
    if e is not None:
        return f"config value {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
    return None


def _load_validator():
    """The config schema's validator, built once per worker: `jsonschema.validate` builds a new
    one on every call, ~18 ms a request against under 1 ms with this one."""
    import jsonschema

    from mnistbench.config import schema

    return jsonschema.validators.validator_for(schema.load())(schema.load())


class _Idle:
    """Ends the worker when the pipeline it serves ends (the Snakemake process jobs.PIPELINE_ENV
    names, as it was when the worker started), and after IDLE_S seconds in which it served no
    request and no timed run of its own pipeline held this machine. While its pipeline's other
    workers time runs, this repeat's next job is likely coming, and exiting (tearing down torch)
    would disturb the run being timed; the short gaps between two runs do not count as idle, or
    every worker would leave (and its next job pay for a new one) while the others' runs go on.
    Another pipeline's runs (another working directory, another user) extend nothing. The
    socket goes first, so a job arriving meanwhile starts a new worker."""

    def __init__(self, sock_path: str):
        self.sock_path, self.inode = sock_path, os.stat(sock_path).st_ino
        self.pipeline = os.environ.get(jobs.PIPELINE_ENV, "")
        self.lock, self.last = threading.Lock(), time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    @contextlib.contextmanager
    def busy(self):
        with self.lock:
            yield
            self.last = time.monotonic()

    def _watch(self):
        while True:
            time.sleep(IDLE_CHECK_S)
            with self.lock:
                if self.pipeline and not jobs.pipeline_alive(self.pipeline):
                    print(f"its pipeline (process {self.pipeline}) ended: the worker leaves", flush=True)
                    self.leave(0)
                if self._own_run_timed():
                    self.last = time.monotonic()
                elif time.monotonic() - self.last > IDLE_S:
                    self.leave(0)

    def _own_run_timed(self) -> bool:
        """Whether a timed run of this worker's pipeline holds the machine."""
        if not self.pipeline:
            return False
        try:
            held_by = slot.holder_now()
        except BenchError:  # the slot cannot be opened: the runs say so; this only idles
            return False
        return held_by is not None and held_by.endswith(f", pipeline {self.pipeline}")

    def leave(self, status: int):
        """Remove the socket if it is still this worker's (another may have replaced it), and exit."""
        with contextlib.suppress(OSError):
            if os.stat(self.sock_path).st_ino == self.inode:
                os.unlink(self.sock_path)
        sys.stdout.flush()
        os._exit(status)


def serve(sock_path: str) -> None:
    import importlib

    import torch

    from mnistbench.train import memory

    # The tasks a request may name, imported by name (depends.TASKS: what the fingerprint of a
    # timed job's code covers besides this server).
    tasks = {kind: getattr(importlib.import_module(f"mnistbench.{m}"), f) for kind, (m, f) in depends.TASKS.items()}
    mine, validator = identity(), _load_validator()
    key = authkey(sock_path)
    tmp = f"{sock_path}.{os.getpid()}"
    old = os.umask(0o177)  # the socket is 0600 from the start
    try:
        listener = Listener(tmp, family="AF_UNIX", authkey=key)
    finally:
        os.umask(old)
    os.replace(tmp, sock_path)  # appear atomically, ready to accept
    idle = _Idle(sock_path)
    while True:
        try:
            conn = listener.accept()  # authenticates the client: a wrong key ends here
        except (AuthenticationError, EOFError, OSError) as e:
            print(f"refused a connection: {type(e).__name__}: {e}", flush=True)
            continue
        with idle.busy(), conn:
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                print(f"refused a connection of uid {uid}: this worker serves uid {os.getuid()} only", flush=True)
                continue
            try:
                req = _recv(conn, MAX_REQUEST)
            except (EOFError, OSError, ValueError):
                continue
            if not isinstance(req, dict) or req.pop("fingerprint", None) != mine:
                _send(conn, {"stale": True})
                print("a job of another identity (code, environment or pipeline) came: the worker leaves", flush=True)
                idle.leave(0)
            problem = check_request(req, validator)
            if problem:
                print(f"refused a request: {problem}", flush=True)
                _send(conn, {"refused": problem})
                continue
            needs = memory.summary(**req) if req.get("kind", "train") == "train" else ""
            _send(conn, {"pid": os.getpid(), "needs": needs})
            watch = _watch(conn, req.get("log_path", os.devnull))
            reply = _run(req, tasks[req.pop("kind", "train")], torch)
            watch.set()
            try:
                _send(conn, reply)
            except OSError:  # the job went meanwhile: its outputs are simply not written
                pass
            if poisoned(reply):
                idle.leave(1)


def _watch(conn, log_path) -> threading.Event:
    """Stop this process if the client goes while its run trains. The thread waits on the
    connection (the client sends nothing more), so it costs the timed loop nothing. Returns the
    event that marks the run's end; after it, the client closing is expected."""
    done = threading.Event()

    def wait():
        try:
            conn.poll(None)
            conn.recv_bytes()
            gone = False
        except (EOFError, OSError):
            gone = True
        if gone and not done.is_set():
            with open(log_path, "a") as f:
                print("cancelled: the job ended while its run trained; the worker stops the run", file=f)
            os._exit(1)

    threading.Thread(target=wait, daemon=True).start()
    return done


def poisoned(reply: dict) -> bool:
    """Whether the run hit a CUDA error: those are sticky, so the next job needs a fresh process."""
    text = reply.get("error", "") + str(reply.get("row", {}).get("message", ""))
    return any(s in text for s in ("CUDA error", "device-side assert", "CUBLAS_STATUS", "CUDNN_STATUS"))


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


def _run(req: dict, task, torch) -> dict:
    """`task` (train.train, or profiling.profile_device for a profile job) on the request. What
    keeps a run from starting (the timed-run slot, the job's log) is its job's error, in the line
    the job would print training in its own process; the worker stays up."""
    log_path = req.pop("log_path", os.devnull)  # the rest are the task's arguments
    try:
        with _output_to(log_path) as f, slot.timed_slot(log=lambda msg: print(msg, file=f)):
            try:
                out = task(**req, log=lambda msg: print(msg, file=f))
                return {"rows": out} if isinstance(out, list) else {"row": out[0], "record": out[1]}
            except BenchError as e:
                return {"error": str(e)}
            except Exception as e:  # a bug: keep the worker alive, fail the job with its message
                import traceback

                traceback.print_exc(file=f)
                return {"error": f"{type(e).__name__}: {e}"}
            finally:
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    except BenchError as e:
        return {"error": str(e)}
    except OSError as e:  # the job's log cannot be written
        return {"error": f"{log_path}: {e.strerror or e}: make its folder writable and rerun"}


if __name__ == "__main__":
    serve(sys.argv[1])
