"""What every Snakemake script shares: a log file, and one clear line for a user's mistake."""

import sys
import traceback
from contextlib import contextmanager


@contextmanager
def job(snakemake):
    """Yield a `log(msg)` that writes to the rule's log (and stderr, for Snakemake's console).

    A BenchError ends the job with its one line on stderr and in the log, not a traceback; any
    other exception keeps its traceback in the log for debugging.
    """
    from mnistbench import BenchError

    path = snakemake.log[0] if snakemake.log else None
    f = open(path, "a", buffering=1) if path else None

    def log(msg):
        if f:
            print(msg, file=f)
        print(msg, file=sys.stderr, flush=True)

    try:
        yield log
    except BenchError as e:
        log(f"error: {e}")
        sys.exit(1)
    except BaseException:
        if f:
            traceback.print_exc(file=f)
        raise
    finally:
        if f:
            f.close()
