"""The step clock: per-step times that add up to the epoch, with and without chunking."""

import time

import pytest

from mnistbench import timing


@pytest.mark.parametrize("chunk", [1, 4])
def test_step_times_match_known_sleeps(chunk):
    sleeps = [0.002] * 10
    clock = timing.StepClock("cpu", chunk=chunk)
    epoch, steps = timing.timed_epoch(time.sleep, sleeps, clock)
    assert len(steps) == -(-10 // chunk)  # one value per (partial) chunk
    assert all(s >= 0.002 for s in steps)  # never less than the step really took
    # Per-step values times the steps of their chunk add up to the epoch (no step lost or
    # counted twice); loose on the upper side, as a loaded machine oversleeps.
    sizes = [b[0] - a[0] for a, b in zip(clock.marks, clock.marks[1:])]
    assert sizes == [chunk] * (10 // chunk) + ([10 % chunk] if 10 % chunk else [])
    assert sum(s * n for s, n in zip(steps, sizes)) == pytest.approx(epoch, rel=0.05)
    assert clock.marks[-1][0] == 10 and epoch >= 0.02


def test_quantiles():
    assert timing.quantiles([3.0, 1.0, 2.0, 4.0, 5.0]) == (3.0, 2.0, 4.0)
    med, q1, q3 = timing.quantiles([])
    assert med != med  # NaN
