"""MNIST on disk and on the device: download with torchvision, preload as tensors, time the copies."""

import gzip
import math
import os
import shutil
import socket
import statistics
import struct
import tempfile
import zlib
from http.client import HTTPException
from pathlib import Path
from urllib.error import URLError
from urllib.parse import urlparse
from urllib.request import url2pathname

import torch

from mnistbench import BenchError, devices, files

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


def load_raw(root) -> dict[str, torch.Tensor]:
    """Normalised float32 tensors: images [N, 784] scaled to [0, 1] (as ToTensor does), labels int64."""
    from torchvision.datasets import MNIST

    out = {}
    for split, train in (("train", True), ("test", False)):
        try:
            ds = MNIST(root, train=train, download=False)
        except (RuntimeError, ValueError, AssertionError) as e:
            raise BenchError(
                f"MNIST files under {root}/MNIST/raw are missing or corrupt ({' '.join(str(e).split())}); "
                "delete them and rerun the download_mnist rule"
            ) from e
        out[f"{split}_x"] = ds.data.reshape(len(ds.data), -1).to(torch.float32).div_(255.0)
        out[f"{split}_y"] = ds.targets.to(torch.int64)
    return out


def save_tensors(tensors: dict, path, checksum=None) -> None:
    """The tensors, and (when `checksum` names a file) their sha256 beside them: the workflow
    treats a tensor file that no longer matches it as missing (files.intact)."""
    with files.atomic(path) as tmp:
        torch.save(tensors, tmp)
    if checksum:
        files.write_text(checksum, files.sha256(path) + "\n")


def load_tensors(path, device: str) -> dict[str, torch.Tensor]:
    """Memory-mapped, so a job that uses part of the data reads only that part from disk. A file
    that cannot be read is the user's input error (BenchError), not a result of the run."""
    try:
        tensors = torch.load(path, map_location=device, weights_only=True, mmap=True)
        missing = {"train_x", "train_y", "test_x", "test_y"} - set(tensors)
    except Exception as e:  # torch raises RuntimeError, EOFError, pickle's errors... on a bad file
        files.raise_if_full(e, path)
        why = str(e).strip().split(". ")[0].splitlines()[0] if str(e).strip() else type(e).__name__
        raise BenchError(
            f"cannot read the preloaded data {path} ({why}): rerun the same snakemake command, "
            "which rebuilds it with the preload rule (outside Snakemake: delete it and run preload again)"
        ) from None
    if missing:
        raise BenchError(f"the preloaded data {path} lacks {', '.join(sorted(missing))}: delete it and rerun")
    return tensors


TRANSFER_COLUMNS = ["host", "device", "memory", "samples", "bytes", "seconds", "gb_per_s"]


def measure_transfer(x: torch.Tensor, device: str, rows=(1, 64, 4096, None), repeats: int = 7) -> list[dict]:
    """Host->device copy cost of the first `rows` samples of x, from pageable and (where the
    device has it) pinned memory, into a destination allocated beforehand, as a training loop
    reuses its buffers. On the cpu the copy is a host memcpy: the baseline an accelerator's copy
    is compared with. Each figure is the median of `repeats` copies after one warm-up copy,
    timed by the step clock (device events on cuda, a synchronisation before every clock read).
    """
    from mnistbench.timing import StepClock, timed_epoch

    results = []
    memories = ["pageable"] + (["pinned"] if devices.spec(device).pinned_memory else [])
    sizes = sorted({len(x) if n is None else min(n, len(x)) for n in rows})
    clock = StepClock(device)
    clock.reserve(repeats + 1)
    for n in sizes:
        src = x[:n].contiguous()
        dst = torch.empty_like(src, device=device)
        for memory in memories:
            host = src.pin_memory() if memory == "pinned" else src

            def copy(_, dst=dst, host=host, pinned=memory == "pinned"):
                dst.copy_(host, non_blocking=pinned)

            copy(None)  # warm-up: first touch of the destination's pages, lazy initialisation
            _, times = timed_epoch(copy, range(repeats), clock)
            seconds = statistics.median(times)
            nbytes = host.numel() * host.element_size()
            results.append(
                dict(
                    host=socket.gethostname(),
                    device=device,
                    memory=memory,
                    samples=src.shape[0],
                    bytes=nbytes,
                    seconds=seconds,
                    gb_per_s=nbytes / seconds / 1e9,
                )
            )
    return results
