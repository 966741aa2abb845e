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
    """Marks at step boundaries; `intervals()` gives seconds per step.

    On cuda a mark is an event recorded in the stream (no sync). On mps a mark must synchronise,
    which would stall the queue every step, so there a mark is taken every `chunk` steps and each
    chunk's time is divided by its steps.
    """

    def __init__(self, device: str, chunk: int | None = None):
        self.device = device
        self.cuda = devices.kind(device) == "cuda"
        self.chunk = chunk or (16 if devices.kind(device) == "mps" else 1)
        self.events = []  # cuda events, created in the first epoch and reused after it
        self.reset()

    def reset(self):
        self.marks, self.steps = [], -1  # marks: (steps done, event or time)

    def mark(self):
        """Call before the first step and after every step."""
        self.steps += 1
        if self.steps % self.chunk == 0:
            self._record()

    def close(self):
        """After the last step: record the end of a last, partial chunk."""
        if self.marks and self.marks[-1][0] != self.steps:
            self._record()

    def _record(self):
        if self.cuda:
            if len(self.marks) == len(self.events):  # only the first epoch creates events
                self.events.append(torch.cuda.Event(enable_timing=True))
            e = self.events[len(self.marks)]
            e.record()
            self.marks.append((self.steps, e))
        else:
            devices.synchronize(self.device)  # no-op on cpu
            self.marks.append((self.steps, time.perf_counter()))

    def intervals(self) -> list[float]:
        """Seconds per step, one value per marked interval; synchronises once on cuda."""
        if self.cuda and self.marks:
            self.marks[-1][1].synchronize()
        out = []
        for (n0, a), (n1, b) in zip(self.marks, self.marks[1:]):
            dt = a.elapsed_time(b) / 1e3 if self.cuda else b - a
            out.append(dt / (n1 - n0))
        return out


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
    clock.close()
    epoch_s = wall(clock.device) - t0
    return epoch_s, clock.intervals()
