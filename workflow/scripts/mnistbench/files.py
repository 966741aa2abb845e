"""Writing outputs so that an interrupted job never leaves a half-written file: every file is
written under a temporary name in the same folder, then renamed into place (atomic on POSIX).

Standard library only: the train job's client writes its outputs without importing torch.
"""

import csv
import errno
import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path


def full_disk(where) -> str:
    """The line for a full disk (or quota) under `where`."""
    return (
        f"no space left on the disk of {where} (the disk is full): free some space there, or put "
        "results/ on a bigger disk (results/ may be a symlink to a folder there), and rerun"
    )


def raise_if_full(error: BaseException, path, where=None) -> None:
    """A full disk (or quota) is the user's to fix: one line naming where it was written (`where`,
    else the file being written: of a copy, its destination, never its source; else `path`), a
    BenchError (the package's __init__ imports nothing heavy), whatever library raised it and
    however deep."""
    from mnistbench import BenchError

    seen = error
    while seen is not None and not isinstance(seen, BenchError):  # a BenchError already says it
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            # A copy (shutil.copyfile, os.sendfile) names its source first and its destination
            # second: the destination is the file that did not fit.
            raise BenchError(full_disk(where or seen.filename2 or seen.filename or path)) from None
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)


@contextmanager
def no_space_is_fatal(path, where=None):
    """Within it, a full disk ends the job with raise_if_full's line instead of a traceback."""
    try:
        yield
    except Exception as e:
        raise_if_full(e, path, where)
        raise


@contextmanager
def atomic(path, suffix: str = ""):
    """Yield a temporary path beside `path`; on success it replaces `path`, on failure it is removed.
    `suffix` keeps an extension that a writer reads (matplotlib picks the format from it)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{suffix}")
    try:
        with no_space_is_fatal(path):
            yield tmp
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path, text: str) -> None:
    with atomic(path) as tmp:
        tmp.write_text(text)


def write_json(path, obj) -> None:
    with atomic(path) as tmp:
        tmp.write_text(json.dumps(obj, default=str))


def write_rows(path, columns, rows) -> None:
    """A CSV file of dict rows with the given columns."""
    with atomic(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def write_csv(path, df) -> None:
    """A pandas DataFrame as CSV, without its index."""
    with atomic(path) as tmp:
        df.to_csv(tmp, index=False)


def sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def intact(path, checksum) -> bool:
    """Whether `path` still holds what was written (the sha256 in the file `checksum` matches)."""
    try:
        return Path(checksum).read_text().strip() == sha256(path)
    except OSError:
        return False
