"""Slowed stretches: the part of a run's timed steps that something outside the process slowed.

On a VM the host slows a process by 1.3-2.2x for seconds at a time with nothing inside the guest
to show for it. A run's timed steps are cut into BLOCKS contiguous blocks; blocks more than SLOWED
above the second fastest are left out of its step time and counted (`slowed_share`). The train job
applies the rule to every run (its step time), and the intervals of collect/uncertainty.py draw
from the blocks each run records (`step_time_blocks_s`).
"""

import numpy as np

BLOCKS = 16
# A block of a run's timed steps whose median is more than this factor above the run's second
# fastest block's was slowed by something outside the process (undisturbed()): a run in one
# steady state keeps its blocks within a few per cent of each other, a slowed stretch is 1.3x or
# more. The second fastest, so that one block fast by chance does not set the level; and only
# where each block has SLOWED_STEPS steps or more: the median of fewer scatters by more than that.
SLOWED = 1.1
SLOWED_STEPS = 20


def split(step_times, n: int = BLOCKS) -> list[np.ndarray]:
    """n contiguous blocks of a run's timed steps (fewer when it has fewer steps)."""
    x = np.asarray(step_times, dtype=float)
    return np.array_split(x, min(n, len(x))) if len(x) else []


def undisturbed(block_medians, steps_per_block: int = SLOWED_STEPS) -> np.ndarray:
    """Which blocks the machine left alone: those within SLOWED of the run's second fastest block
    (all of them where a block has fewer than SLOWED_STEPS steps, or there are fewer than 3).

    On a VM the host slows a process by 1.3-2.2x for seconds at a time with nothing in the guest
    to show for it (no steal, no other process in /proc/stat): a run's blocks then sit at two
    levels, and how many sit at the slow one is what made two processes' medians differ by up to
    1.7x. The steps of the other blocks time the code itself; the slowed share is reported."""
    b = np.asarray(block_medians, dtype=float)
    if len(b) < 3 or steps_per_block < SLOWED_STEPS or not np.all(np.isfinite(b)) or b.min() <= 0:
        return np.ones(len(b), dtype=bool)
    return b <= SLOWED * np.sort(b)[1]


def kept_blocks(step_times, rule: bool = True) -> tuple[list[np.ndarray], float]:
    """(the undisturbed blocks of a run's timed steps, the share of timed steps left out); every
    block, and none left out, without the rule (`slowed_rule: false`)."""
    parts = split(step_times)
    if not parts or not rule:
        return parts, 0.0
    keep = undisturbed([np.median(p) for p in parts], min(len(p) for p in parts))
    kept = [p for p, k in zip(parts, keep) if k]
    return kept, 1.0 - sum(map(len, kept)) / sum(map(len, parts))


def steps_of(parts) -> list[float]:
    """The steps of blocks, in order."""
    return [float(v) for p in parts for v in p]


def kept_steps(step_times) -> tuple[list[float], float]:
    """(the timed steps of the undisturbed blocks, the share of timed steps left out)."""
    kept, share = kept_blocks(step_times)
    return steps_of(kept), share


def blocks_cell(parts) -> str:
    """The runs.csv cell `step_time_blocks_s` of blocks of steps: their medians, space-separated."""
    return " ".join(f"{float(np.median(p)):.6g}" for p in parts)


def parse_blocks(cell) -> np.ndarray:
    """The runs.csv cell `step_time_blocks_s` ("v v v ..."); empty where a row has none."""
    if not isinstance(cell, str) or not cell.strip():
        return np.empty(0)
    return np.array([float(v) for v in cell.split()])
