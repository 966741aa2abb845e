"""Writing outputs so that an interrupted job never leaves a half-written file: every file is
written under a temporary name in the same folder, then renamed into place (atomic on POSIX).

Standard library only: the train job's client writes its outputs without importing torch.
"""

import csv
import json
import os
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic(path, suffix: str = ""):
    """Yield a temporary path beside `path`; on success it replaces `path`, on failure it is removed.
    `suffix` keeps an extension that a writer reads (matplotlib picks the format from it)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{suffix}")
    try:
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
