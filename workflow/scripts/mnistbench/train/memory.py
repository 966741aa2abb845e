"""What a run will hold in memory, estimated before it allocates anything, against what is free
where it runs: the machine's memory (or its cgroup's, where that is less) on the cpu, the device's
own on an accelerator. A run that cannot fit is refused with one line (an `unsupported` row) and
the rest of the grid goes on: allocated anyway, it would grow until the kernel's out-of-memory
killer ends the worker, or whatever else on the machine the kernel picks.

The estimate is an order of magnitude, not an account: the weights of every copy (K of them) in
the forms a run keeps at once, each layer's outputs for a batch with what backward keeps of them,
and the training and test data where the run puts them.
"""

import functools
import os
from pathlib import Path

import psutil
import torch

from mnistbench import BenchError
from mnistbench.config import devices, networks
from mnistbench.train import nets
from mnistbench.train.modes import Unsupported

# Float32 copies of the weights a run holds at once: the repeat's initial state, the one a mode is
# built from, the mode's own weights, their gradients, the cleanest attempt's weights kept.
WEIGHT_COPIES = 5
# Of each layer's outputs for a batch: the outputs, their gradients, a mode's scratch.
ACTIVATION_COPIES = 3
BYTES = 4  # float32
# What is free, in bytes (or with a unit: 500M, 2G), in place of what the machine says: a lower
# limit than the machine's, e.g. to leave memory to something else (and for the tests).
FREE_ENV = "MNISTBENCH_FREE_MEMORY"
CGROUP2 = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")  # where the v2 hierarchy is mounted


@functools.cache
def shape(network: networks.Network) -> tuple[int, int]:
    """(parameters, floats of every layer's outputs per sample) of one copy: by formula for the
    family; a user's module built on the meta device (no memory), its leaf modules' outputs for
    one sample counted, or, where its code cannot run there, built on the cpu."""
    if network.family:
        return network.parameters(), sum(network.sizes[1:])
    cls = nets.user_class(network)
    for device in ("meta", "cpu"):
        try:
            with torch.device(device), torch.no_grad():
                net = cls().eval()
                outs = []
                for m in net.modules():
                    if not list(m.children()):
                        m.register_forward_hook(
                            lambda _m, _i, o, outs=outs: outs.append(o.numel() if torch.is_tensor(o) else 0)
                        )
                net(torch.zeros(1, 784))
            return sum(p.numel() for p in net.parameters()), sum(outs)
        except Exception:  # its own code's failure is the run's to report, as it builds it
            continue
    return 0, 0


def estimate(s: networks.Spec, batch_size: int, k: int, n_train: int, n_test: int, device: str) -> dict:
    """{where: bytes} a run needs: on the host ("cpu") and, on an accelerator, on the device."""
    params, outs = shape(s.network)
    weights = params * k * BYTES
    acts = outs * batch_size * k * ACTIVATION_COPIES * BYTES
    data = (n_train + n_test) * (784 + 10) * BYTES  # images and one-hot targets, plus a test copy
    if devices.is_cpu(device):
        return {"cpu": WEIGHT_COPIES * weights + acts + data}
    # On an accelerator the host keeps the initial states; the rest lives on the device.
    return {"cpu": 2 * weights + data, device: (WEIGHT_COPIES - 2) * weights + acts + data}


def parse_bytes(text: str) -> int:
    """'2G', '500M', '1048576' as bytes; BenchError (the job's one line) naming the variable otherwise."""
    t = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMGT")) * scale)
    except ValueError:
        raise BenchError(f"{FREE_ENV}={text!r} is not an amount of memory: set it as 2G, 500M or bytes") from None


def _cgroup_free() -> int | None:
    """What this process's cgroup (or the tightest above it) lets it still allocate, or None where
    none limits it. Its usage counts the page cache, which the kernel reclaims before it kills for
    memory: the inactive part of it is left out (the working set, as the kernel's own tools read it)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    free = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2, mounted alone or beside v1 (unified/)
            kinds = [(Path(b), "memory.max", "memory.current", "inactive_file") for b in CGROUP2]
        elif "memory" in controllers.split(","):  # v1
            kinds = [
                (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
            ]
        else:
            continue
        for base, limit, usage, inactive in kinds:
            d = base / path.lstrip("/")
            while d == base or base in d.parents:
                try:
                    cap = (d / limit).read_text().strip()
                    if cap != "max" and int(cap) < 1 << 60:  # v1 writes a huge number for none
                        stat = dict(ln.split() for ln in (d / "memory.stat").read_text().splitlines())
                        used = int((d / usage).read_text()) - int(stat.get(inactive, 0))
                        free.append(int(cap) - used)
                except (OSError, ValueError):
                    pass
                if d == base:
                    break
                d = d.parent
    return min(free) if free else None


def free(device: str) -> tuple[int, str]:
    """(bytes free, where) on `device` ("cpu": the machine's memory)."""
    override = os.environ.get(FREE_ENV)
    if override:
        return parse_bytes(override), f"this machine ({FREE_ENV})"
    if devices.kind(device) == "cuda":
        return torch.cuda.mem_get_info(torch.device(device))[0], device
    host, where = psutil.virtual_memory().available, "this machine"
    cgroup = _cgroup_free()
    if cgroup is not None and cgroup < host:
        host, where = cgroup, "this machine's cgroup of the run"
    return host, where


def gb(n: int) -> str:
    """'0.22 GB', '21.8 GB', '1,668 GB'."""
    return f"{n / 1e9:,.0f} GB" if n >= 1e11 else f"{n / 1e9:.3g} GB"


def too_big(cfg: dict, s: networks.Spec, mode: str, device: str, batch_size: int, k: int) -> str | None:
    """Why the run cannot fit in memory here (one line: the estimate, what is free, the fix), or None."""
    need = estimate(s, batch_size, k, cfg.get("train_samples", 0), cfg.get("test_samples", 0), device)
    for where, n in need.items():
        have, name = free(where)
        if n > have:
            params, _ = shape(s.network)
            copies = f" x {k} copies" if k > 1 else ""
            return (
                f"{mode} at batch size {batch_size} needs about {gb(n)} of memory on {where} by its estimate "
                f"({params:,} parameters{copies}, {WEIGHT_COPIES} copies of the weights, the activations of "
                f"{batch_size} samples, the data), more than the {gb(have)} free on {name}: train fewer copies "
                "(models_at_once), a smaller batch size or a smaller network"
            )
    return None


def check(cfg: dict, s: networks.Spec, mode: str, device: str, batch_size: int, k: int) -> None:
    """Unsupported (the run's row says why) where the run cannot fit in memory here."""
    why = too_big(cfg, s, mode, device, batch_size, k)
    if why:
        raise Unsupported(why)


def summary(cfg: dict, network: str, device: str, batch_size: int, models_at_once: int = 1, **_) -> str:
    """A train request's estimate against what is free, in words ('about 22 GB on cpu, of 21.5 GB
    free'), for the line of a worker that died mid-run; '' where it cannot be said."""
    try:
        s = networks.build(cfg, network)
        need = estimate(s, batch_size, models_at_once, cfg["train_samples"], cfg["test_samples"], device)
        return "; ".join(f"about {gb(n)} on {where}, of {gb(free(where)[0])} free" for where, n in need.items())
    except Exception:  # the run itself says what is wrong with its network
        return ""
