"""MNIST's four files: fetched from the first mirror that serves them whole (torchvision's
downloader, or a copy for file://), each checked against its md5 and as an IDX file, and moved into
place only once all four are good.
"""

import gzip
import math
import os
import shutil
import struct
import tempfile
import zlib
from http.client import HTTPException
from pathlib import Path
from urllib.error import URLError
from urllib.parse import urlparse
from urllib.request import url2pathname

from mnistbench import BenchError, files

FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


class _Refused(Exception):
    """One mirror's copy of a file cannot be used; the message says why."""


def download(root, mirrors: list[str], md5: dict[str, str], log=print) -> None:
    """Fetch, verify and extract the four files into root/MNIST/raw.

    Files are fetched into a private temporary folder and moved into place only once all four
    matched their md5 and extracted whole, so a failure never leaves a partial or corrupt file
    behind. A mirror whose file fails (unreachable, wrong md5, a truncated or corrupt archive)
    is skipped for the next one.
    """
    raw = Path(root) / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    # A full disk names the folder the files go to (never the mirror's file, nor the private
    # temporary folder they are fetched into).
    with files.no_space_is_fatal(raw, where=raw), tempfile.TemporaryDirectory(dir=raw, prefix=".download-") as tmp:
        for filename in FILES:
            tried = []
            # An archive verified earlier stays beside the extracted files (which Snakemake deletes
            # before a rerun): it is used first, so a rerun never depends on a mirror again.
            kept = raw / filename
            for url in ([kept.resolve().as_uri()] if kept.exists() else []) + [
                m.rstrip("/") + "/" + filename for m in mirrors
            ]:
                try:
                    _fetch(url, Path(tmp), filename, md5[filename], raw)
                except _Refused as e:
                    for name in (filename, filename.removesuffix(".gz")):
                        (Path(tmp) / name).unlink(missing_ok=True)
                    tried.append(f"{url} ({e})")
                    log(f"{filename}: {url} refused: {e}")
                    continue
                log(f"downloaded {filename} from {url}")
                break
            else:
                raise BenchError(
                    f"could not download {filename}: tried {'; '.join(tried)}. "
                    "Fix the mirror list `mnist.mirrors` or the checksums `mnist.md5` in the config"
                )
        # Only a complete, verified set is moved into place.
        for filename in FILES:
            for name in (filename, filename.removesuffix(".gz")):
                os.replace(Path(tmp) / name, raw / name)


def _fetch(url: str, folder: Path, filename: str, md5: str, dest: Path) -> None:
    """Download (torchvision) or copy (file://, which torchvision's downloader cannot read) one
    file, check its md5, extract it next to itself and check the extracted IDX file is whole.
    Raises _Refused saying why this copy cannot be used; a full disk names `dest`, the folder the
    files are for."""
    # torchvision is imported here, not at the top: train jobs import this module and should not
    # pay for it.
    from torchvision.datasets.utils import calculate_md5, download_url

    got = folder / filename
    try:
        if url.startswith("file://"):
            shutil.copyfile(url2pathname(urlparse(url).path), got)
        else:
            download_url(url, folder, filename)
    except (URLError, OSError, HTTPException, RuntimeError, ValueError) as e:  # HTTPException: a cut-off reply
        files.raise_if_full(e, folder, where=dest)
        raise _Refused(" ".join(str(getattr(e, "reason", e)).split()) or type(e).__name__) from e
    if not got.exists():
        raise _Refused("nothing was downloaded")
    actual = calculate_md5(got)
    if actual != md5:
        raise _Refused(f"md5 {actual} != expected {md5}")
    out = folder / filename.removesuffix(".gz")
    try:
        with gzip.open(got, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        files.raise_if_full(e, out, where=dest)
        raise _Refused(f"corrupt archive: {type(e).__name__}: {' '.join(str(e).split())}") from e
    _check_idx(out)


def _check_idx(path: Path) -> None:
    """An IDX file (MNIST's format) holds exactly the bytes its header announces."""
    data = path.read_bytes()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise _Refused("not an MNIST (IDX, unsigned byte) file")
    ndim = data[3]
    head = 4 + 4 * ndim
    if len(data) < head:
        raise _Refused("truncated IDX header")
    dims = struct.unpack(f">{ndim}I", data[4:head])
    want = math.prod(dims)
    if len(data) - head != want:
        raise _Refused(f"IDX file holds {len(data) - head} bytes of data, its header announces {want}")
