"""What the bench scripts share: random MNIST-shaped data and the train jobs' own way of running
and timing a mode (mnistbench.runner, timing.timed_epoch)."""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import torch  # noqa: E402
from mnistbench.config import networks
from mnistbench.measure import timing  # noqa: E402
from mnistbench.train import runner
from mnistbench.train.modes import Unsupported  # noqa: E402
from mnistbench.train.trainer import DEFAULTS  # noqa: E402

# The network the bench scripts time: the seed's (the default of `models`).
NETWORK = networks.network(DEFAULTS["models"][0])
# Arithmetic of one training sample as counted for the roofline: forward + 2x backward.
FLOP_PER_SAMPLE = 3 * 2 * sum(a * b for a, b in zip(NETWORK.sizes[:-1], NETWORK.sizes[1:]))


def data(n: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return {"x": torch.rand(n, 784, generator=g), "y": y, "t": torch.nn.functional.one_hot(y, 10).float()}


def config(threads: int = 0, loss: str = "cross_entropy", lr: float = 0.01) -> dict:
    """The train jobs' defaults with the bench's threads, loss and learning rate."""
    return dict(DEFAULTS, cpu_threads=threads, training=dict(DEFAULTS["training"], loss=loss, lr=lr))


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


def step_time(
    mode: str, batch_size: int, d: dict, min_time: float = 1.0, device: str = "cpu", loss="cross_entropy", models=1
):
    """Median seconds per step of `mode` (training `models` copies at once) with the train jobs'
    own loop (timing.timed_epoch), after warm-up, over at least `min_time` seconds of steps; None
    if the mode cannot run here."""
    built = prepared(mode, batch_size, d, config(torch.get_num_threads(), loss), device, models=models)
    if built is None:
        return None
    m, perm = built
    # A fresh epoch iterator each time, consumed inside the timed loop, as in a train job: for
    # `dataloader` the batch fetch and copy are part of the step.
    clock, steps = timing.StepClock(device), []
    while sum(steps) < min_time:
        steps += timing.timed_epoch(m.step, m.epoch(d, perm), clock)[1]
    return statistics.median(steps)
