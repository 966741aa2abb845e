"""One way to run a mode, shared by the train job, the profiler and the bench scripts: threads,
building the mode from the config, its one-off setup, warm-up, the base of a result row, and the
one-line form of a failure. Also what a run depends on: its settings and the code fingerprint.
"""

import hashlib
import json
import os
import socket
from pathlib import Path

import torch

from mnistbench import devices, env, model
from mnistbench.modes import MODES, Unsupported, why_not
from mnistbench.timing import wall

PACKAGE = Path(__file__).resolve().parent
# Modules that only read finished runs: editing them must not retime anything (the figures and the
# analysis rerun on their own). Every other source file of the package trains or times a run.
READS_RESULTS = {
    "aggregate.py",
    "analysis.py",
    "words.py",
    "figures.py",
    "profiling.py",
    "synthetic.py",
    "jobs.py",
    "machines.py",
}
# Config keys a run's result depends on (nested keys with a dot). cpu_threads belongs to a host:
# it may differ between merged machines; the others may not differ within one summary.
SETTINGS = (
    "epochs",
    "train_samples",
    "test_samples",
    "warmup_steps",
    "min_timed_s",
    "seed",
    "target_accuracy",
    "retime",
    "model.loss",
    "model.init",
    "model.lr",
    "model.amp_dtype",
    "quality.max_other_cpu",
    "quality.max_busy_share",
    "quality.max_spread",
    "quality.min_timed_steps",
)
HOST_SETTINGS = ("cpu_threads",)


def settings(cfg: dict) -> dict:
    """The run's settings from the config, flat: {'epochs': 4, 'model.lr': 0.5, ...}."""
    out = {}
    for key in SETTINGS + HOST_SETTINGS:
        v = cfg
        for part in key.split("."):
            v = v[part]
        out[key] = v
    return out


def code_fingerprint() -> str:
    """Hash of the source that trains and times a run (the package minus READS_RESULTS, and the
    train job's script): it changes exactly when a run's code does."""
    h = hashlib.sha256()
    files = sorted(f for f in PACKAGE.iterdir() if f.suffix in (".py", ".c") and f.name not in READS_RESULTS)
    for f in [*files, PACKAGE.parent / "train.py"]:
        if f.exists():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def seed_of(cfg: dict, repeat: int, epoch: int = 0) -> int:
    """Random seed from the config and the repeat index only, never the mode or device, so every
    run with the same repeat starts from the same weights and sees the same data order."""
    return (int(cfg["seed"]) * 1_000_003 + repeat) * 1_009 + epoch


def use_threads(cfg: dict) -> int:
    """torch threads for a run: cpu_threads, or every core of the machine (0)."""
    threads = cfg["cpu_threads"] or os.cpu_count()
    torch.set_num_threads(threads)
    return threads


def base_row(device: str, mode: str, batch_size: int, threads: int) -> dict:
    """What every result row (a train run, a profiled mode) starts with."""
    return dict(
        host=socket.gethostname(),
        machine=env.machine(device, threads),
        device=device,
        device_name=devices.name(device),
        mode=mode,
        batch_size=batch_size,
        threads=threads,
        torch_version=torch.__version__,
    )


def build(cfg: dict, mode: str, device: str, batch_size: int, repeat: int = 0):
    """The mode, from the config's model settings and the repeat's initial weights; Unsupported if
    the pair cannot exist here."""
    reason = why_not(mode, device)
    if reason:
        raise Unsupported(reason)
    m = cfg["model"]
    params = model.init_params(m["init"], seed_of(cfg, repeat))
    return MODES[mode](params, device, batch_size, loss=m["loss"], lr=m["lr"], amp_dtype=m["amp_dtype"])


def setup(trainer, batch, device: str) -> float:
    """The mode's one-off cost (compile, graph capture, kernel build) on one batch, timed apart
    from the steps: seconds."""
    t0 = wall(device)
    trainer.setup(batch)
    return wall(device) - t0


def warm_up(trainer, items, n: int) -> int:
    """Run the first n step calls of `items` (untimed); returns the training steps they did."""
    done = 0
    for _, batch in zip(range(n), items):
        k = trainer.step(batch)
        done += 1 if k is None else k
    devices.synchronize(trainer.device)
    return done


def failure(e: Exception, batch_size: int) -> tuple[str, str]:
    """(status, message) of a failure that belongs in the results rather than ending the job: a
    pair that cannot run here, out of memory, or another runtime error (one line each)."""
    if isinstance(e, Unsupported):
        return "unsupported", str(e)
    text = " ".join(str(e).split())
    if isinstance(e, torch.OutOfMemoryError):
        return "oom", f"out of memory at batch size {batch_size}: {text[:160]}"
    return ("oom" if "out of memory" in text.lower() else "error"), f"{type(e).__name__}: {text[:200]}"


def settings_json(cfg: dict) -> str:
    return json.dumps(settings(cfg), sort_keys=True)
