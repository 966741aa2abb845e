"""`python -m snakemake ARGS` for the tests, without importing Snakemake again for every call.

A dry run of a tiny grid costs 1.8 s of cpu, 1.1 s of it Snakemake importing itself and its
plugins, and the suite runs Snakemake about 150 times. This server imports it once; each command
line then runs in a process forked from it, in the caller's folder, with the caller's environment
and output files, through `snakemake.cli.main`, the function `python -m snakemake` calls. Every
call is a fresh process: nothing of one run reaches the next, and the server itself never runs a
workflow (it has imported none of the project's code).

    server: python tests/snakemake_fork.py    (one JSON request a line on stdin)
    client: run(argv, cwd, env, timeout)      (conftest.snakemake)
"""

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# What Snakemake imports while it reads and plans a workflow, beyond its command line: imported
# once here, not again in every forked call (a dry run of the shared tiny pipeline: 0.44-0.56 s
# of cpu in the forked process, 0.32-0.38 s with these; measured). Snakemake's and other
# packages' modules only, none of the project's; a name another version lacks is passed over.
PLANNING = (
    "snakemake.workflow",
    "snakemake.dag",
    "snakemake.persistence",
    "snakemake.parser",
    "snakemake.profiles",
    "snakemake.storage",
    "snakemake.report.html_reporter",
    "jsonschema",
    "requests",
    "smart_open",
    "jinja2",
    "yte",
    "dpath",
    "docutils.core",
    "docutils.parsers.rst",
    "pygments.formatters.html",
    "PIL.Image",
)


def serve():
    # As `python -m snakemake`: the caller's folder, not this file's, is the first import path.
    sys.path.pop(0)
    import snakemake.cli

    for name in PLANNING:
        try:
            importlib.import_module(name)
        except ImportError:
            pass

    main = Path(snakemake.cli.__file__).with_name("__main__.py")
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()  # every line this server prints is flushed: the child inherits no buffer
        if pid == 0:
            run_child(snakemake.cli.main, str(main), req)
        print(json.dumps(dict(pid=pid)), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(dict(returncode=os.waitstatus_to_exitcode(status))), flush=True)


def run_child(main, argv0: str, req: dict):
    """In the forked process: become the process `python -m snakemake` would have started."""
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(req["stdout"], os.O_WRONLY), 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY), 2)
        sys.path.insert(0, req["cwd"])
        sys.argv = [argv0, *req["argv"]]
        main(req["argv"])
        code = 0
    except SystemExit as e:  # as the interpreter turns sys.exit's argument into a status
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os._exit(code)


class Client:
    """One server for this test process, started on first use; calls run one at a time."""

    def __init__(self):
        self.proc, self.lock, self.pending = None, threading.Lock(), b""

    def start(self):
        cmd = [sys.executable, __file__]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.pending = b""

    def reply(self, timeout=None) -> dict | None:
        """The server's next line, or None if none came within `timeout` seconds (read from the
        pipe itself: a buffered reader could hold a line that select() then never sees)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            if not select.select([fd], [], [], timeout)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the Snakemake fork server ended")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, argv: list, cwd, timeout: float) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory() as tmp:
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            req = dict(
                argv=[str(a) for a in argv], cwd=str(cwd), env=dict(os.environ), stdout=str(out), stderr=str(err)
            )
            self.proc.stdin.write(json.dumps(req).encode() + b"\n")
            pid = self.reply()["pid"]
            done = self.reply(timeout)
            if done is None:  # as subprocess.run does: kill the command, then say it timed out
                os.kill(pid, signal.SIGKILL)
                self.reply()
                raise subprocess.TimeoutExpired(["snakemake", *argv], timeout, out.read_text(), err.read_text())
            returncode = done["returncode"]
            args = [sys.executable, "-m", "snakemake", *argv]
            return subprocess.CompletedProcess(args, returncode, out.read_text(), err.read_text())

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


if __name__ == "__main__":
    serve()
