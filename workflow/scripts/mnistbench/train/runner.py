"""One way to run a mode, shared by the train job, the profiler and the bench scripts: threads,
building the mode from the spec, its one-off setup, warm-up, the base of a result row, and the
one-line form of a failure. (What a run depends on, its settings and code: depends.py.)
"""

import os
import socket

import torch

from mnistbench.config import devices, networks
from mnistbench.measure.timing import wall
from mnistbench.train import environment, memory, nets
from mnistbench.train.ladder import implementation
from mnistbench.train.modes import Unsupported
from mnistbench.train.needs import why_not


def seed_of(cfg: dict, repeat: int, epoch: int = 0) -> int:
    """Random seed from the config and the repeat index only, never the mode or device, so every
    run with the same repeat starts from the same weights and sees the same data order."""
    return (int(cfg["seed"]) * 1_000_003 + repeat) * 1_009 + epoch


def use_threads(cfg: dict) -> int:
    """torch threads for a run: cpu_threads, or every core of the machine but one (0; a train job
    passes the threads its rule planned: devices.torch_threads)."""
    threads = devices.torch_threads(cfg["cpu_threads"], os.cpu_count() or 1)
    torch.set_num_threads(threads)
    return threads


def base_row(device: str, network: str, mode: str, batch_size: int, threads: int) -> dict:
    """What every result row (a train run, a profiled mode) starts with."""
    return dict(
        host=socket.gethostname(),
        machine=environment.machine(device, threads),
        device=device,
        device_name=devices.name(device),
        model=network,
        mode=mode,
        batch_size=batch_size,
        threads=threads,
        torch_version=torch.__version__,
    )


def build(cfg: dict, s: networks.Spec, mode: str, device: str, batch_size: int, repeat: int = 0, models_at_once=1):
    """The mode, training network and settings `s` (K = models_at_once copies of it) from the
    repeat's initial weights; Unsupported if the combination cannot exist here, nets.BadModel if a
    user's module cannot be trained."""
    reason = why_not(mode, device, s, models_at_once)
    if reason:
        raise Unsupported(reason)
    memory.check(cfg, s, mode, device, batch_size, models_at_once)
    state = nets.initial_state(s, seed_of(cfg, repeat), models_at_once)
    return implementation(mode)(s, state, device, batch_size, models_at_once)


def setup(trainer, batch, device: str) -> float:
    """The mode's one-off cost (compile, graph capture, kernel build) on one batch, timed apart
    from the steps, and what building its own form of the data took (Mode.prepared_s): seconds."""
    t0 = wall(device)
    trainer.setup(batch)
    return wall(device) - t0 + trainer.prepared_s


def warm_up(trainer, items, n: int) -> int:
    """Run the first n step calls of `items` (untimed); returns the training steps they did."""
    done = 0
    for _, batch in zip(range(n), items):
        k = trainer.step(batch)
        done += 1 if k is None else k
    devices.synchronize(trainer.device)
    return done


def recorded(s: networks.Spec) -> tuple:
    """The exceptions whose failure a run (or a profiled step) records as its status rather than
    ending its job, and with it the pipeline: ours, the runtime's (out of memory, ...) and, for a
    user's module, whatever its own code raises at some batch size (its forward or backward)."""
    return (Unsupported, nets.BadModel, RuntimeError) if s.network.family else (Exception,)


# Messages of torch's own checks that a user's network meets at a batch size, with their cause
# and fix in the user's words.
AT_BATCH = {
    "Expected more than 1 value per channel when training": (
        "batch size {b} gives no batch statistics for its BatchNorm; drop {b} from `batch_sizes` for this "
        "network (a separate run), or use another norm (nn.LayerNorm, nn.GroupNorm)"
    ),
}


def failure(e: Exception, batch_size: int, s: networks.Spec | None = None) -> tuple[str, str]:
    """(status, message) of a failure that belongs in the results rather than ending the job: a
    pair that cannot run here, out of memory, a user's module that cannot train at this batch
    size (`s`: its spec), or another runtime error (one line each)."""
    if isinstance(e, Unsupported):
        return "unsupported", str(e)
    if isinstance(e, nets.BadModel):
        return "bad_model", str(e)
    text = " ".join(str(e).split())
    if s is not None and not s.network.family and not isinstance(e, RuntimeError):
        where = f"{s.network.path} (models: {s.network.name}) at batch size {batch_size}"
        why = next((fix.format(b=batch_size) for msg, fix in AT_BATCH.items() if msg in text), None)
        return "bad_model", (
            f"{where}: {why} ({type(e).__name__}: {text[:120]})"
            if why
            else f"{where}: its forward or backward raised {type(e).__name__}: {text[:160]}; fix the "
            f"module, or drop {batch_size} from `batch_sizes` for this network"
        )
    if isinstance(e, torch.OutOfMemoryError):
        return "oom", f"out of memory at batch size {batch_size}: {text[:160]}"
    return ("oom" if "out of memory" in text.lower() else "error"), f"{type(e).__name__}: {text[:200]}"
