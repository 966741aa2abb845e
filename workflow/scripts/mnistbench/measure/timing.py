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

from mnistbench.config import devices


class StepClock:
    """Marks at step boundaries; `intervals()` gives seconds per training step.

    On cuda a mark is an event recorded in the stream (no sync). On mps a mark must synchronise,
    which would stall the queue every step, so there a mark is taken every `chunk` steps. A step
    function may also do several training steps per call (`compiled` at batch size 1 fuses a few
    into one compiled call): it says how many, and the call's time is shared among them.
    """

    def __init__(self, device: str, chunk: int | None = None):
        self.device = device
        self.use_events = devices.traits(device).events  # marks are device events, read after one sync
        self.chunk = chunk or devices.traits(device).mark_every
        self.events = []  # cuda events, made by reserve() (or the first epoch), reused by every epoch
        self.reset()

    def reserve(self, marks: int):
        """On cuda: create (and record once) the events of an epoch's marks before any timed loop,
        so the first epoch's steps do not pay for creating them."""
        if self.use_events:
            while len(self.events) < marks:
                self.events.append(torch.cuda.Event(enable_timing=True))
                self.events[-1].record()
            devices.synchronize(self.device)

    def reset(self):
        self.marks, self.steps = [], 0  # marks: (steps done, event or time)

    def start(self):
        """Call before the first step."""
        self._record()

    def mark(self, steps: int = 1):
        """Call after every call of the step function, with the training steps it did."""
        self.steps += steps
        if self.steps - self.marks[-1][0] >= self.chunk:
            self._record()

    def close(self):
        """After the last step: record the end of a last, partial chunk."""
        if self.marks and self.marks[-1][0] != self.steps:
            self._record()

    def _record(self):
        if self.use_events:
            if len(self.marks) == len(self.events):  # only if reserve() was not told enough
                self.events.append(torch.cuda.Event(enable_timing=True))
            e = self.events[len(self.marks)]
            e.record()
            self.marks.append((self.steps, e))
        else:
            devices.synchronize(self.device)  # no-op on cpu
            self.marks.append((self.steps, time.perf_counter()))

    def intervals(self) -> list[float]:
        """Seconds per step, one value per training step (a chunk's steps share its time equally),
        so warm-up steps are dropped by index and medians weigh every step once. Synchronises
        once on cuda."""
        if self.use_events and self.marks:
            self.marks[-1][1].synchronize()
        out = []
        for (n0, a), (n1, b) in zip(self.marks, self.marks[1:]):
            dt = a.elapsed_time(b) / 1e3 if self.use_events else b - a
            out += [dt / (n1 - n0)] * (n1 - n0)
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
    project: nothing in it but the step and a clock mark (an event record on cuda). `step` returns
    how many training steps it did, or None for one."""
    clock.reset()
    t0 = wall(clock.device)
    clock.start()
    for batch in batches:
        n = step(batch)
        clock.mark(1 if n is None else n)
    clock.close()
    epoch_s = wall(clock.device) - t0
    return epoch_s, clock.intervals()
