"""Device names, availability and synchronisation: the one place that knows cpu, cuda and mps."""

import re

import torch

from mnistbench import BenchError

PATTERN = r"^(cpu|mps|cuda(:[0-9]+)?)$"

# Why a device is missing, and what to do about it: the one line a user sees.
_FIX = {
    "cuda": "run on a machine with an NVIDIA GPU and a CUDA build of torch, or remove it from `devices`",
    "mps": "run on Apple silicon with macOS 12.3+, or remove it from `devices`",
}


def kind(device: str) -> str:
    return device.split(":")[0]


def slug(device: str) -> str:
    """File-name-safe form: 'cuda:1' -> 'cuda1' (colons are not portable in paths)."""
    return device.replace(":", "")


def unslug(s: str) -> str:
    m = re.fullmatch(r"cuda(\d+)", s)
    return f"cuda:{m.group(1)}" if m else s


def available() -> list[str]:
    """Devices this machine has, in the order the report shows them."""
    found = ["cpu"]
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        found += ["cuda"] if n == 1 else [f"cuda:{i}" for i in range(n)]
    if torch.backends.mps.is_available():
        found.append("mps")
    return found


def check(device: str) -> None:
    """Raise BenchError with one clear line if `device` is absent here."""
    if not re.match(PATTERN, device):
        raise BenchError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps in `devices`")
    k = kind(device)
    if k == "cuda":
        if not torch.cuda.is_available():
            raise BenchError(f"CUDA not available on this host for device {device!r}: {_FIX['cuda']}")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise BenchError(
                f"device {device!r} absent: this host has {torch.cuda.device_count()} CUDA device(s); "
                "use an index below that in `devices`"
            )
    elif k == "mps" and not torch.backends.mps.is_available():
        raise BenchError(f"MPS not available on this host for device {device!r}: {_FIX['mps']}")


def prepare(device: str) -> None:
    """Check `device`, make it the current one (cuda:N: streams, graphs and events use the current
    device) and pay the context's one-off costs (cuBLAS handle, autograd's device thread, lazy
    kernel loading) here, so they land in no run's timings, whichever run comes first."""
    check(device)
    if kind(device) == "cuda":
        torch.cuda.set_device(torch.device(device).index or 0)  # older torch refuses a bare "cuda"
    w = torch.zeros(16, 784, device=device, requires_grad=True)
    y = torch.zeros(2, dtype=torch.long, device=device)
    torch.nn.functional.cross_entropy(torch.zeros(2, 784, device=device) @ w.t(), y).backward()
    synchronize(device)


def resolve(devices) -> tuple[list[str], list[str]]:
    """(devices to run, notices). 'auto' keeps what this machine has; a list must all be here."""
    if devices == "auto":
        here = available()
        notices = [
            f"devices: auto skips {k}: not available on this host"
            for k in ("cuda", "mps")
            if not any(kind(d) == k for d in here)
        ]
        return here, notices
    for d in devices:
        check(d)
    return list(dict.fromkeys(devices)), []


def synchronize(device: str) -> None:
    """Wait for all queued work, so a clock read afterwards is honest."""
    k = kind(device)
    if k == "cuda":
        torch.cuda.synchronize(device)
    elif k == "mps":
        torch.mps.synchronize()


def name(device: str) -> str:
    """Human name of the device: GPU model, or 'Apple MPS', or the CPU model."""
    k = kind(device)
    if k == "cuda":
        return torch.cuda.get_device_name(device)
    if k == "mps":
        return "Apple MPS"
    return cpu_model()


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
