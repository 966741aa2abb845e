"""MNIST on disk and on the device: download with torchvision, preload as tensors, time the copies."""

import os
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from urllib.error import URLError
from urllib.parse import urlparse
from urllib.request import url2pathname

import torch

from mnistbench import BenchError, devices

FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def raw_files(root) -> list[Path]:
    """The four extracted files, where torchvision's MNIST(root) looks for them."""
    return [Path(root) / "MNIST" / "raw" / f.removesuffix(".gz") for f in FILES]


def download(root, mirrors: list[str], md5: dict[str, str], log=print) -> None:
    """Fetch, verify and extract the four files into root/MNIST/raw.

    Files are fetched into a private temporary folder and moved into place only once all four
    matched their md5 and extracted, so a failure never leaves a partial or corrupt file behind.
    """
    # torchvision is imported here, not at the top: train jobs import this module and should not
    # pay for it.
    from torchvision.datasets.utils import calculate_md5

    raw = Path(root) / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=raw, prefix=".download-") as tmp:
        for filename in FILES:
            tried = []
            for mirror in mirrors:
                url = mirror.rstrip("/") + "/" + filename
                try:
                    _fetch(url, Path(tmp), filename, md5[filename])
                except (URLError, OSError, RuntimeError, ValueError) as e:
                    got = Path(tmp) / filename
                    if got.exists():  # it arrived, so the checksum is what failed
                        reason = f"md5 {calculate_md5(got)} != expected {md5[filename]}"
                        got.unlink()
                    else:
                        reason = " ".join(str(getattr(e, "reason", e)).split()) or type(e).__name__
                    tried.append(f"{url} ({reason})")
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


def _fetch(url: str, folder: Path, filename: str, md5: str) -> None:
    """Download (torchvision) or copy (file://, which torchvision's downloader cannot read) one
    file, check its md5, extract it next to itself."""
    from torchvision.datasets.utils import check_integrity, download_url, extract_archive

    if url.startswith("file://"):
        shutil.copyfile(url2pathname(urlparse(url).path), folder / filename)
        if not check_integrity(folder / filename, md5):
            raise RuntimeError("File not found or corrupted.")
    else:
        download_url(url, folder, filename, md5)
    extract_archive(folder / filename, folder)


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


def save_tensors(tensors: dict, path) -> None:
    """torch.save to a temporary file, then rename: no half-written tensor file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(tensors, tmp)
    os.replace(tmp, path)


def load_tensors(path, device: str) -> dict[str, torch.Tensor]:
    """Memory-mapped, so a job that uses part of the data reads only that part from disk."""
    return torch.load(path, map_location=device, weights_only=True, mmap=True)


def measure_transfer(x: torch.Tensor, device: str, rows=(1, 64, 4096, None), repeats: int = 7) -> list[dict]:
    """Host->device copy cost of the first `rows` samples of x, from pageable and pinned memory.

    On cpu the 'copy' is a host memcpy (clone): the baseline an accelerator's copy is compared with.
    Each figure is the median of `repeats` timed copies after one untimed warm-up copy, with the
    device synchronised before every clock read.
    """
    results = []
    memories = ["pageable"] + (["pinned"] if devices.kind(device) == "cuda" else [])
    sizes = sorted({len(x) if n is None else min(n, len(x)) for n in rows})
    for n in sizes:
        src = x[:n].contiguous()
        for memory in memories:
            host = src.pin_memory() if memory == "pinned" else src
            copy = (lambda: host.clone()) if device == "cpu" else (lambda: host.to(device, non_blocking=memory == "pinned"))
            copy()
            devices.synchronize(device)
            times = []
            for _ in range(repeats):
                devices.synchronize(device)
                t0 = time.perf_counter()
                copy()
                devices.synchronize(device)
                times.append(time.perf_counter() - t0)
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
