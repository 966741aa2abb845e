"""The one place that knows the kinds of device (cpu, cuda, mps): names, paths, availability,
synchronisation, and what each kind can do. Everything else asks this module.

To add a kind: an entry in KINDS (and its branches in `_count`, `synchronize`, `name`), its name
pattern in the config schema (tests/test_devices.py holds the two equal) and a test.

Torch is imported where a device is used, not with the module: the Snakefile reads the kinds,
names and paths here, and importing torch costs seconds in every Snakemake run.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnistbench import BenchError

if TYPE_CHECKING:  # annotations only: the Snakefile reads this module without torch
    import torch


@dataclass(frozen=True)
class Kind:
    pattern: str  # device names of this kind, as a regular expression
    names: str  # the same, in words
    cpu: bool  # the cpu itself: the baseline every accelerator is compared with
    pinned_memory: bool  # page-locked host memory speeds up copies to it
    events: bool  # the step clock records device events (no synchronisation per mark)
    mark_every: int  # steps between clock marks: a mark that synchronises stalls the queue
    profiler: str | None  # torch.profiler activity of its kernels, besides the cpu's
    nvml: bool  # NVML lists the processes on it (a timed run's GPU neighbours)
    needs_gpu: bool  # a cluster job on it asks Slurm for a GPU
    fixed_autocast: str | None  # amp's dtype where only one makes sense here, else the config's
    fix: str  # what to do when it is absent
    color: tuple  # its colour in every figure (RGB, 0-1), and its marker
    marker: str


KINDS = {
    "cpu": Kind(
        pattern="cpu",
        names="cpu",
        cpu=True,
        pinned_memory=False,
        events=False,
        mark_every=1,
        profiler=None,
        nvml=False,
        needs_gpu=False,
        fixed_autocast="bfloat16",
        fix="",
        color=(0.33, 0.42, 0.55),
        marker="o",
    ),
    "cuda": Kind(
        pattern="cuda(:[0-9]+)?",
        names="cuda, cuda:N",
        cpu=False,
        pinned_memory=True,
        events=True,
        mark_every=1,
        profiler="CUDA",
        nvml=True,
        needs_gpu=True,
        fixed_autocast=None,
        fix="run on a machine with an NVIDIA GPU and a CUDA build of torch, or remove it from `devices`",
        color=(0.30, 0.62, 0.05),
        marker="s",
    ),
    "mps": Kind(
        pattern="mps",
        names="mps",
        cpu=False,
        pinned_memory=False,
        events=False,
        mark_every=16,
        profiler=None,
        nvml=False,
        needs_gpu=False,
        fixed_autocast=None,
        fix="run on Apple silicon with macOS 12.3+, or remove it from `devices`",
        color=(0.55, 0.55, 0.60),
        marker="^",
    ),
}
CPU = "cpu"  # the device every accelerator is compared with
# A device name, as the config schema's pattern also says; and its file-name form (slug), as the
# Snakemake wildcard constraints use it.
PATTERN = "^(" + "|".join(k.pattern for k in KINDS.values()) + ")$"
SLUG_PATTERN = "|".join(k.pattern.replace("(:[0-9]+)?", r"\d*") for k in KINDS.values())


def kind(device: str) -> str:
    return device.split(":")[0]


def traits(device: str) -> Kind:
    return KINDS[kind(device)]


def is_cpu(device: str) -> bool:
    return traits(device).cpu


def index(device: str) -> int:
    """The device index ('cuda:1' -> 1; a bare name is device 0)."""
    return int(device.split(":")[1]) if ":" in device else 0


def slug(device: str) -> str:
    """File-name-safe form: 'cuda:1' -> 'cuda1' (colons are not portable in paths)."""
    return device.replace(":", "")


def unslug(s: str) -> str:
    m = re.fullmatch(r"([a-z]+)(\d+)", s)
    return f"{m.group(1)}:{m.group(2)}" if m and m.group(1) in KINDS else s


def cpu_first(devices) -> list:
    """Devices in the order the report names them: the cpu, then the accelerators."""
    return sorted(set(devices), key=lambda d: (d != CPU, d))


def _may_have(k: str) -> bool:
    """False where a kind certainly cannot be here, so that asking costs no torch import: CUDA
    (and ROCm, which torch also calls cuda) needs a GPU driver's device files, MPS needs macOS."""
    if k == "cuda":
        return bool(glob.glob("/dev/nvidia*") or os.path.exists("/dev/kfd") or os.path.exists("/dev/dxg"))
    if k == "mps":
        return sys.platform == "darwin"
    return True


def _count(k: str) -> int:
    """How many devices of kind k this machine has."""
    if k == "cpu":
        return 1
    if not _may_have(k):
        return 0
    import torch

    if k == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if k == "mps":
        return int(torch.backends.mps.is_available())
    return 0


def available() -> list[str]:
    """Devices this machine has, in the order the report shows them."""
    found = []
    for k in KINDS:
        n = _count(k)
        found += [k] if n == 1 else [f"{k}:{i}" for i in range(n)]
    return found


def check(device: str) -> None:
    """Raise BenchError with one clear line if `device` is absent here."""
    if not re.match(PATTERN, device):
        raise BenchError(f"unknown device {device!r}: use {', '.join(k.names for k in KINDS.values())} in `devices`")
    k, n = kind(device), _count(kind(device))
    if n == 0:
        name = {"cuda": "CUDA", "mps": "MPS"}.get(k, k)
        raise BenchError(f"{name} not available on this host for device {device!r}: {KINDS[k].fix}")
    if index(device) >= n:
        raise BenchError(
            f"device {device!r} absent: this host has {n} {k} device(s); use an index below that in `devices`"
        )


def prepare(device: str) -> None:
    """Check `device`, make it the current one (cuda:N: streams, graphs and events use the current
    device) and pay the context's one-off costs (cuBLAS handle, autograd's device thread, lazy
    kernel loading) here, so they land in no run's timings, whichever run comes first."""
    import torch

    check(device)
    if kind(device) == "cuda":
        torch.cuda.set_device(index(device))  # older torch refuses a bare "cuda"
    w = torch.zeros(16, 784, device=device, requires_grad=True)
    y = torch.zeros(2, dtype=torch.long, device=device)
    torch.nn.functional.cross_entropy(torch.zeros(2, 784, device=device) @ w.t(), y).backward()
    synchronize(device)


def resolve(devices) -> tuple[list[str], list[str]]:
    """(devices to run, notices). 'auto' keeps what this machine has; a list must all be here."""
    if devices == "auto":
        here = available()
        notices = [
            f"devices: auto skips {k}: not available on this host" for k in KINDS if not any(kind(d) == k for d in here)
        ]
        return here, notices
    for d in devices:
        check(d)
    return list(dict.fromkeys(devices)), []


def synchronize(device: str) -> None:
    """Wait for all queued work, so a clock read afterwards is honest."""
    k = kind(device)
    if k == "cpu":
        return
    import torch

    if k == "cuda":
        torch.cuda.synchronize(device)
    elif k == "mps":
        torch.mps.synchronize()


def profiler_activities(device: str) -> list:
    from torch.profiler import ProfilerActivity

    extra = traits(device).profiler
    return [ProfilerActivity.CPU] + ([getattr(ProfilerActivity, extra)] if extra else [])


def autocast_dtype(device: str, configured: str) -> torch.dtype:
    import torch

    return getattr(torch, traits(device).fixed_autocast or configured)


def name(device: str) -> str:
    """Human name of the device: GPU model, or 'Apple MPS', or the CPU model."""
    k = kind(device)
    if k == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    if k == "mps":
        return "Apple MPS"
    return cpu_model()


def accelerator(device: str) -> str:
    """What identifies an accelerator's hardware and driver for a run's machine: name, memory,
    driver and CUDA version for cuda; empty on the cpu."""
    k = kind(device)
    if k == "cuda":
        import torch

        gib = torch.cuda.get_device_properties(device).total_memory / 2**30
        return f"{name(device)}, {gib:.0f} GiB, driver {_driver()}, CUDA {torch.version.cuda}"
    return "" if traits(device).cpu else name(device)


def _driver() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # no nvidia-ml-py or no NVML library: the CUDA version still identifies it
        return "unknown"


def runtime(device: str) -> dict:
    """Versions of the device's runtime libraries, for the environment record."""
    import torch

    cuda = kind(device) == "cuda"
    return {"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if cuda else None}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def torch_threads(cpu_threads: int, cores: int) -> int:
    """Threads a timed run gives torch, of the `cores` its job holds: `cpu_threads` where the config
    sets it, else every core but one. The core left over takes what else runs meanwhile (Snakemake,
    the OS, the run's own monitoring): a run whose threads keep every core busy also waits for
    every core: on the 2-core development VM, fresh processes timing the same steps spread with a
    median sigma of 0.125 on the log scale with two threads and 0.037 with one (bench/README.md,
    "Threads")."""
    return min(cpu_threads, cores) if cpu_threads else max(1, cores - 1)
