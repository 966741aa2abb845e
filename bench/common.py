"""What the bench scripts share: the data and training settings the pipeline trains with, and the
train jobs' own way of running and timing a mode (mnistbench.runner, timing.timed_epoch).

The data matter for the rates: per-sample SGD at the pipeline's lr on MNIST saturates hidden
units and makes denormal numbers (README), which uniform random inputs at a small lr never do, so
a bench on those would not see what a run sees. Real MNIST where it is at hand, else stand-ins
that train as it does (synthetic.digits), and every bench says which.
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mnistbench.config import networks
from mnistbench.data import preload, synthetic
from mnistbench.measure import timing  # noqa: E402
from mnistbench.train import runner
from mnistbench.train.modes import Unsupported  # noqa: E402
from mnistbench.train.trainer import DEFAULTS  # noqa: E402

# The network the bench scripts time: the seed's (the default of `models`).
NETWORK = networks.network(DEFAULTS["models"][0])
# Arithmetic of one training sample as counted for the roofline: forward + 2x backward.
FLOP_PER_SAMPLE = 3 * 2 * sum(a * b for a, b in zip(NETWORK.sizes[:-1], NETWORK.sizes[1:]))


REPO = Path(__file__).resolve().parents[1]
# Where a pipeline run leaves MNIST: the preloaded tensors, else the downloaded files.
PRELOADED = REPO / "results" / "preload" / "mnist.pt"
DOWNLOADED = REPO / "results" / "data"


def mnist(path=None) -> tuple[dict | None, str]:
    """(MNIST's tensors, where from) from a preloaded mnist.pt (`path`, else the pipeline's), else
    from the downloaded files; (None, why not) where neither is at hand."""
    path = Path(path) if path else PRELOADED
    if path.is_file():
        return preload.load_tensors(path, "cpu"), str(path)
    if not (DOWNLOADED / "MNIST" / "raw").is_dir():
        return None, f"neither {path} nor {DOWNLOADED}/MNIST/raw (a pipeline run makes both)"
    try:
        return preload.load_raw(DOWNLOADED), f"{DOWNLOADED}/MNIST/raw"
    except Exception as e:  # torchvision's errors on a partial download
        return None, f"{DOWNLOADED}/MNIST/raw cannot be read ({e})"


def data(n: int, seed: int = 0, path=None) -> dict:
    """n training samples as the pipeline trains on them: the first n of real MNIST's training
    images (repeated in order where n is larger), else handwriting-like stand-ins; prints which."""
    tensors, where = mnist(path)
    if tensors is None:
        x, y = synthetic.digits(n, seed)
        print(f"data: {n} handwriting-like stand-ins (synthetic.digits), no MNIST at hand: {where}", flush=True)
    else:
        rows = torch.arange(n) % len(tensors["train_x"])
        x, y = tensors["train_x"][rows].contiguous(), tensors["train_y"][rows]
        print(f"data: the first {min(n, len(rows))} training images of real MNIST, from {where}", flush=True)
    return {"x": x, "y": y, "t": torch.nn.functional.one_hot(y, 10).float()}


def config(threads: int = 0, **training) -> dict:
    """The train jobs' defaults (the pipeline's loss, init and lr among them) with the bench's
    threads and any training setting it changes."""
    return dict(DEFAULTS, cpu_threads=threads, training=dict(DEFAULTS["training"], **training))


def prepared(mode: str, batch_size: int, d: dict, cfg: dict, device: str = "cpu", warmup: int = 20, models=1):
    """(mode, epoch order) built for `models` copies at once, set up and warmed up as a train job
    does; None if the mode cannot run here."""
    perm = torch.randperm(len(d["x"]))
    try:
        m = runner.build(cfg, networks.build(cfg, NETWORK.name), mode, device, batch_size, models_at_once=models)
        runner.setup(m, next(iter(m.epoch(d, perm))), device)
    except Unsupported:
        return None
    runner.warm_up(m, m.epoch(d, perm), warmup)
    return m, perm


def step_time(mode: str, batch_size: int, d: dict, min_time: float = 1.0, device: str = "cpu", models=1):
    """Median seconds per step of `mode` (training `models` copies at once) with the train jobs'
    own loop (timing.timed_epoch) and settings, after warm-up, over at least `min_time` seconds of
    steps; None if the mode cannot run here."""
    built = prepared(mode, batch_size, d, config(torch.get_num_threads()), device, models=models)
    if built is None:
        return None
    m, perm = built
    # A fresh epoch iterator each time, consumed inside the timed loop, as in a train job: for
    # `dataloader` the batch fetch and copy are part of the step.
    clock, steps = timing.StepClock(device), []
    while sum(steps) < min_time:
        steps += timing.timed_epoch(m.step, m.epoch(d, perm), clock)[1]
    return statistics.median(steps)


def one_pass(m, d: dict, perm) -> tuple[float, int]:
    """Seconds and samples of one pass of a prepared mode over the data, in the train jobs' order."""
    items = list(m.epoch(d, perm))
    t0 = time.perf_counter()
    steps = sum((k if k is not None else 1) for k in map(m.step, items))
    return time.perf_counter() - t0, steps * m.batch_size


def interval(ratios: list[float], n_boot: int = 2000) -> tuple[float, float, float]:
    """The median of per-round ratios and its 95 % interval (the rounds resampled)."""
    r = np.asarray(ratios)
    boot = np.median(np.random.default_rng(0).choice(r, (n_boot, len(r))), axis=1)
    return float(np.median(r)), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def fmt(r) -> str:
    return f"{r[0]:.3g}x ({r[1]:.3g}-{r[2]:.3g})"
