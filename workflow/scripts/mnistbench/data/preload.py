"""MNIST as tensors: the four IDX files read into normalised float32 tensors (torchvision), saved
with their checksum beside them, loaded memory-mapped by every run; and what copying them to a
device costs (pageable and pinned), timed as a run's steps are.
"""

import socket
import statistics

import torch

from mnistbench import BenchError, files
from mnistbench.config import devices


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
    with files.atomic(path) as tmp, open(tmp, "wb") as f:
        # Through a file object: torch names the archive's folder after a path it is given (here
        # a temporary name), so the same tensors would give other bytes, and another checksum.
        torch.save(tensors, f)
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
    from mnistbench.measure.timing import StepClock, timed_epoch

    results = []
    memories = ["pageable"] + (["pinned"] if devices.traits(device).pinned_memory else [])
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
