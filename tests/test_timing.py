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
    assert all(0.002 <= s < 0.004 for s in steps)
    assert clock.marks[-1][0] == 10 and epoch >= 0.02


def test_quantiles():
    assert timing.quantiles([3.0, 1.0, 2.0, 4.0, 5.0]) == (3.0, 2.0, 4.0)
    med, q1, q3 = timing.quantiles([])
    assert med != med  # NaN
