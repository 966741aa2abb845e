"""What the bench scripts share: random MNIST-shaped data and the project's own step timing."""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import torch  # noqa: E402

from mnistbench import model, timing  # noqa: E402
from mnistbench.modes import MODES, Unsupported  # noqa: E402

FLOP_PER_SAMPLE = 3 * 2 * sum(a * b for a, b in zip(model.SIZES[:-1], model.SIZES[1:]))  # fwd + 2x bwd


def data(n: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return {"x": torch.rand(n, 784, generator=g), "y": y, "t": torch.nn.functional.one_hot(y, 10).float()}


def step_time(mode: str, batch_size: int, d: dict, min_time: float = 1.0, device: str = "cpu", loss="cross_entropy"):
    """Median seconds per step of `mode` with the train jobs' own loop (timing.timed_epoch), after
    warm-up, over at least `min_time` seconds of steps; None if the mode cannot run here."""
    m = MODES[mode](model.init_params("default", 0), device, batch_size, loss=loss, lr=0.01)
    perm = torch.randperm(len(d["x"]))
    # A fresh epoch iterator each time, consumed inside the timed loop, as in a train job: for
    # `dataloader` the batch fetch and copy are part of the step.
    try:
        m.setup(next(iter(m.epoch(d, perm))))
    except Unsupported:
        return None
    for i, b in enumerate(m.epoch(d, perm)):
        if i >= 20:
            break
        m.step(b)
    clock, steps = timing.StepClock(device), []
    while sum(steps) < min_time:
        steps += timing.timed_epoch(m.step, m.epoch(d, perm), clock)[1]
    return statistics.median(steps)
