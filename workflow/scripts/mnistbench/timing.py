"""Honest clocks for training steps.

Every clock read happens after the device has finished the work it measures: on cuda through
CUDA events (recorded in the stream, read after one synchronisation at the end), on mps and cpu
by synchronising and reading perf_counter. Marks are cheap, so a timed loop stays free of host
copies and syncs on cuda; on mps each mark synchronises, so there marks are taken every `chunk`
steps.
"""

import statistics
import time

import torch

from mnistbench import devices


class StepClock:
    """Collects marks at step boundaries; `intervals()` gives the seconds between marks."""

    def __init__(self, device: str):
        self.device = device
        self.cuda = devices.kind(device) == "cuda"
        self.marks = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            devices.synchronize(self.device)  # no-op on cpu
            self.marks.append(time.perf_counter())

    def intervals(self) -> list[float]:
        """Seconds between consecutive marks; synchronises once on cuda."""
        if self.cuda:
            if self.marks:
                self.marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]

    def reset(self):
        self.marks = []


def wall(device: str) -> float:
    """perf_counter after the device is idle: for epoch and one-off timings."""
    devices.synchronize(device)
    return time.perf_counter()


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    """(median, q1, q3); NaN for an empty list."""
    if not xs:
        return float("nan"), float("nan"), float("nan")
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return med, q1, q3


def timed_epoch(step, batches, clock: StepClock) -> tuple[float, list[float]]:
    """Run step(batch) over an epoch: (wall seconds, per-step seconds). The only timed loop of the
    project: nothing in it but the step and a clock mark (an event record on cuda)."""
    clock.reset()
    t0 = wall(clock.device)
    clock.mark()
    for batch in batches:
        step(batch)
        clock.mark()
    epoch_s = wall(clock.device) - t0
    return epoch_s, clock.intervals()
