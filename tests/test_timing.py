"""The step clock: per-step times that add up to the epoch, with and without chunking."""

import time

import pytest
from mnistbench.measure import timing


@pytest.mark.parametrize("chunk", [1, 4])
def test_step_times_match_known_sleeps(chunk):
    sleeps = [0.002] * 10
    clock = timing.StepClock("cpu", chunk=chunk)
    epoch, steps = timing.timed_epoch(time.sleep, sleeps, clock)
    assert len(steps) == 10  # one value per step, also when marks are taken per chunk
    assert all(s >= 0.002 for s in steps)  # never less than the step really took
    # Marks every `chunk` steps, and the per-step values add up to the time from the first mark
    # to the last (no step lost or counted twice), which lies inside the epoch. Exact, not within
    # a tolerance: a loaded machine may pause this process anywhere, also outside the marks.
    sizes = [b[0] - a[0] for a, b in zip(clock.marks, clock.marks[1:])]
    assert sizes == [chunk] * (10 // chunk) + ([10 % chunk] if 10 % chunk else [])
    assert sum(steps) == pytest.approx(clock.marks[-1][1] - clock.marks[0][1], rel=1e-9) and sum(steps) <= epoch
    assert clock.marks[-1][0] == 10 and epoch >= 0.02


def test_a_call_that_does_several_steps_shares_its_time_among_them():
    def step(n):  # n training steps of 1 ms in one call, as `compiled` does at batch size 1
        time.sleep(0.001 * n)
        return n

    clock = timing.StepClock("cpu")
    epoch, steps = timing.timed_epoch(step, [4, 4, 2], clock)
    assert len(steps) == 10 and [b[0] for b in clock.marks] == [0, 4, 8, 10]
    assert steps[0] == steps[3] and steps[8] == steps[9]  # one value per step, equal within a call
    assert all(s >= 0.001 for s in steps) and sum(steps) <= epoch
    assert sum(steps) == pytest.approx(clock.marks[-1][1] - clock.marks[0][1], rel=1e-9)


def test_quantiles():
    assert timing.quantiles([3.0, 1.0, 2.0, 4.0, 5.0]) == (3.0, 2.0, 4.0)
    med, q1, q3 = timing.quantiles([])
    assert med != med  # NaN
