"""The machine's slot for timed work: no two timed runs (train, profile, the preload's copy timings)
ever overlap on one machine, also across Snakemake invocations and users. The slot is an exclusive
lock on a file every user of the machine shares (/tmp/mnistbench-timed.lock, or the file
MNISTBENCH_TIMED_SLOT names); a process that finds it held waits, saying who holds it.

Standard library only: the train job's client takes it without importing torch.
"""

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from mnistbench import BenchError, jobs


def _slot_path() -> Path:
    # /tmp, not $TMPDIR (which may differ per user): one slot for every user of the machine.
    # MNISTBENCH_TIMED_SLOT names another file, for processes whose timings nobody compares: the
    # test suite gives each of its parallel test processes its own.
    if os.environ.get("MNISTBENCH_TIMED_SLOT"):
        return Path(os.environ["MNISTBENCH_TIMED_SLOT"])
    return Path("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()) / "mnistbench-timed.lock"


def _open_slot():
    """The slot's lock file, opened without following a symbolic link (anyone may plant one in
    /tmp) and created readable and writable by every user, whatever the umask. Another user's
    file that this user may not write is opened to read: a lock needs no more."""
    path = _slot_path()
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        mode = "r+"
        try:
            try:
                fd = os.open(path, os.O_RDWR | nofollow)
            except PermissionError:
                fd, mode = os.open(path, os.O_RDONLY | nofollow), "r"
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | nofollow, 0o666)
                os.fchmod(fd, 0o666)
            except FileExistsError:  # another process created it meanwhile
                continue
            except OSError as e:  # its folder is missing, not writable, read-only, full
                raise BenchError(
                    f"the timed-run lock {path} cannot be created ({e.strerror}): make {path.parent} a folder "
                    "this user may write, or name a lock file in one with MNISTBENCH_TIMED_SLOT, and rerun"
                ) from None
        except OSError as e:  # ELOOP: a symbolic link
            raise BenchError(
                f"the timed-run lock {path} cannot be opened safely ({e.strerror}): remove it and rerun"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BenchError(f"the timed-run lock {path} is not a regular file: remove it and rerun")
        return os.fdopen(fd, mode)
    raise BenchError(f"the timed-run lock {path} keeps changing: remove it and rerun")


def holder_now() -> str | None:
    """Who holds the timed-run slot right now (the line its holder wrote: `holder()`), or None."""
    try:
        import fcntl
    except ImportError:
        return None
    with _open_slot() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            return f.read(300).strip() or "unknown process"
        fcntl.flock(f, fcntl.LOCK_UN)
        return None


def busy() -> bool:
    """Whether some process holds the timed-run slot right now."""
    return holder_now() is not None


def holder() -> str:
    """This process as the timed-run slot names its holder: its pid and uid, and the pipeline it
    runs for (an idle worker of that pipeline stays while the run is timed: _Idle)."""
    pipeline = os.environ.get(jobs.PIPELINE_ENV)
    return f"pid {os.getpid()} of uid {os.getuid()}" + (f", pipeline {pipeline}" if pipeline else "")


@contextlib.contextmanager
def timed_slot(log=print):
    """Hold this machine's slot for timed runs (an exclusive lock on a file that every user of
    the machine shares) for the duration of one run; wait while another process holds it. Inside a Slurm
    job the scheduler places jobs, so there it is a no-op."""
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: the Snakemake resource limit still holds
        yield
        return
    if os.environ.get("SLURM_JOB_ID"):
        yield
        return
    with _open_slot() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            log(f"waiting: another timed run holds this machine ({f.read(200).strip() or 'unknown process'})")
            fcntl.flock(f, fcntl.LOCK_EX)
        if f.writable():  # who holds it, for the next one's waiting line
            f.seek(0)
            f.truncate()
            f.write(holder())
            f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
