"""What every job's script shares: a log file, and one clear line for a user's mistake."""

import json
import os
import signal
import sys
import traceback
from contextlib import contextmanager

INTERRUPTED = "interrupted: rerun the same command to finish"
# The workflow's config as JSON, for jobs run as commands rather than as Snakemake scripts: the
# Snakefile sets it in its own environment, which every job it starts inherits.
CONFIG_ENV = "MNISTBENCH_CONFIG"
# The interpreter that runs a train job (its rule's shell command names it as $MNISTBENCH_PYTHON).
PYTHON_ENV = "MNISTBENCH_PYTHON"
# The script a train job runs, named as $MNISTBENCH_TRAIN_SCRIPT in its rule's shell command.
TRAIN_SCRIPT_ENV = "MNISTBENCH_TRAIN_SCRIPT"
# The Snakemake process that runs the pipeline (pipeline_token), set like CONFIG_ENV: a warm worker
# serves the jobs of the pipeline it was started for and ends when that process does (worker.py).
PIPELINE_ENV = "MNISTBENCH_PIPELINE"


def _started(pid: int) -> str | None:
    """When process `pid` started (psutil's create_time, to the microsecond), or None if it is gone."""
    import psutil  # a dependency of Snakemake, so present wherever a pipeline runs

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{p.create_time():.6f}"
    except psutil.Error:
        return None


def pipeline_token(pid: int | None = None) -> str:
    """Names one process for as long as it lives, a reused pid excluded: 'pid@start time'."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}@{_started(pid)}"


def pipeline_alive(token: str) -> bool:
    """Whether the process `token` (pipeline_token) names still runs."""
    pid, _, started = token.partition("@")
    try:
        return _started(int(pid)) == started
    except ValueError:
        return False


def config_from_env() -> dict:
    from mnistbench import BenchError

    try:
        return json.loads(os.environ[CONFIG_ENV])
    except (KeyError, ValueError) as e:
        raise BenchError(f"no workflow config in ${CONFIG_ENV}: run this job through snakemake") from e


def _stop(signum, frame):
    raise KeyboardInterrupt


def forward_interrupts() -> None:
    """Called in the Snakemake process (where it runs the jobs): an interrupt sent to Snakemake
    alone (SIGINT) makes it wait for the running jobs without telling them, so a train job would
    finish and write outputs that Snakemake then calls incomplete. Pass it on to every process
    below Snakemake as SIGTERM (job() ends a job on it), then interrupt Snakemake as before."""
    try:
        import psutil  # a dependency of Snakemake, so present wherever this runs
    except ImportError:
        return

    def forward(signum, frame):
        for child in psutil.Process().children(recursive=True):
            try:
                child.send_signal(signal.SIGTERM)
            except psutil.Error:
                pass
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, forward)
    except ValueError:  # not the main thread (Snakemake's GUI): interrupts stay as they were
        pass


@contextmanager
def job(snakemake):
    """Yield a `log(msg)` that writes to the rule's log (and stderr, for Snakemake's console).

    A BenchError ends the job with its one line on stderr and in the log, not a traceback; so do
    a full disk and an interrupt (any signal Snakemake sends to stop a job: the job writes no
    output after it). Any other exception keeps its traceback in the log for debugging.
    """
    from mnistbench import BenchError, files

    # SIGINT too: a process started in the background by a shell (or by a parent that ignores
    # it) inherits SIGINT ignored, and would then not stop on Ctrl-C.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    path = snakemake.log[0] if snakemake.log else None
    f = open(path, "a", buffering=1) if path else None

    def log(msg):
        if f:
            try:
                print(msg, file=f)
            except OSError:  # a full disk: the line still reaches the console
                pass
        print(msg, file=sys.stderr, flush=True)

    try:
        try:
            yield log
        except Exception as e:
            files.raise_if_full(e, path or "the job's output")
            raise
    except BenchError as e:
        log(f"error: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        log(INTERRUPTED)
        sys.exit(130)
    except BaseException:
        if f:
            traceback.print_exc(file=f)
        raise
    finally:
        if f:
            try:
                f.close()
            except OSError:
                pass
