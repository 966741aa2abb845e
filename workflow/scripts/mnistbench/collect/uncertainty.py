"""How sure each number is: 95 % intervals from replicates of every combination's median (numpy).

A run's step time is the median of the timed steps the machine left alone. On a VM the host
slows a process by 1.3-2.2x for seconds at a time with nothing inside the guest to show for it;
a run's timed steps are cut into BLOCKS contiguous blocks, and blocks more than SLOWED above the
second fastest one are left out of its median and counted (`slowed_share`, undisturbed()). A
median over all steps would mix the two speeds in whatever proportion the host chose during the
run, and that proportion is most of what makes two processes differ by up to 1.7x there.

The unit of variation is the process: what remains still differs more between processes than
between the steps of one, and the repeats of a combination are trained by different processes.
So a replicate of a combination's median step time has two parts:
1. within each run (process), the medians of its undisturbed blocks are drawn with replacement
   (blocks, not single steps: step times drift and come in bursts, and resampling single steps
   would treat 100 000 correlated steps as independent), and the run's median is scaled by how
   far the drawn blocks' median is from all those blocks' median;
2. between processes, the replicate of the median over runs is moved by s/sqrt(n) times a draw
   of Student's t with n-1 degrees of freedom, on a log scale (step times scatter by factors),
   where s is the standard deviation of the n runs' log medians.
Part 2 is the textbook interval of a mean whose spread is itself estimated from n values. A
bootstrap that draws n of the n runs instead cannot reach beyond the values it has: with the 3
runs of a default grid its 95 % interval held the true median in only about 79 % of synthetic
cases; the t quantile (4.3 for 3 runs, against 1.96 for many) pays for not knowing the spread
(tests/test_uncertainty.py measures the coverage on data of a known distribution). Neither
covers a change of the whole machine that every process of a run shares (bench/README.md).
Every derived number (a ratio, a fitted a and b, a crossover, a share) is computed on each
replicate from the same replicates, never from rounded results, and its interval is the 2.5th
and 97.5th percentile. Combinations are resampled independently (each with a seed of its own
key, so adding a combination changes no other interval); two modes timed by the same warm
worker may share a process effect, so a ratio's interval is, if anything, too wide. Two sets of
runs of the same keys (two runs of one grid, compared by bench/calibration.py) are drawn as
different `stream`s: with the key alone as the seed both would draw the same shifts, and the
ratio of their replicates would lose the spread between processes that each interval holds.

With one usable run a number has no interval (NaN), and neither has anything derived from it:
one process cannot show how much processes differ. bench/calibration.py checks the intervals
against a second, independent run of the same grid.
"""

import math
import zlib

import numpy as np
import pandas as pd

from mnistbench.measure.slowed import parse_blocks

N_BOOT = 1000
LEVEL = 0.95
MAX_LOG_SHIFT = 50.0  # the largest shift between processes a replicate takes, on the log scale


def rng_for(key, stream: str = "") -> np.random.Generator:
    """A generator seeded by the key itself (and the stream: one per independent set of runs of
    the same keys): the same runs give the same interval every time."""
    return np.random.default_rng(zlib.crc32((repr(tuple(key)) + stream).encode()))


def run_replicates(median: float, block_medians, rng, n_boot: int = N_BOOT) -> np.ndarray:
    """Part 1: n_boot replicates of one run's median step time from its blocks (those the median
    was taken over: the undisturbed ones)."""
    b = np.asarray(block_medians, dtype=float)
    if len(b) < 2 or not np.all(np.isfinite(b)) or np.median(b) <= 0:
        return np.full(n_boot, float(median))
    drawn = b[rng.integers(0, len(b), size=(n_boot, len(b)))]
    return float(median) * np.median(drawn, axis=1) / np.median(b)


def drawn_runs(medians, block_cells, key, n_boot: int = N_BOOT, stream: str = "") -> np.ndarray:
    """Both parts for one combination's runs: (n_boot, n_runs) replicates of the runs' median step
    times, whose median over runs is a replicate of the combination's median; all NaN with fewer
    than 2 runs."""
    medians = list(medians)
    n = len(medians)
    if n < 2:
        return np.full((n_boot, max(1, n)), math.nan)
    rng = rng_for(key, stream)
    reps = _runs_replicates(medians, [parse_blocks(c) for c in block_cells], rng, n_boot)
    # Between processes: every run of a replicate moves together by the same draw, so the median
    # over runs moves by it too.
    s = float(np.std(np.log(medians), ddof=1))
    shift = s / math.sqrt(n) * rng.standard_t(n - 1, size=n_boot)
    # t with one or two degrees of freedom (two or three runs) draws values in the thousands now
    # and then: exp() of such a shift is 0 or inf, and a ratio of two of them NaN. A shift beyond
    # a factor e^50 lies far outside any interval's percentiles, so capping it changes no interval.
    shift = np.clip(shift, -MAX_LOG_SHIFT, MAX_LOG_SHIFT)
    return reps.T * np.exp(shift)[:, None]


def _runs_replicates(medians, blocks, rng, n_boot) -> np.ndarray:
    """run_replicates of every run in order, as (n_runs, n_boot). Consecutive runs with as many
    blocks are drawn in one call: the same numbers (and the same state of rng after them) as run
    by run, at a fraction of the cost."""
    out = [None] * len(blocks)
    i = 0
    while i < len(blocks):
        b = blocks[i]
        if len(b) < 2 or not np.all(np.isfinite(b)) or np.median(b) <= 0:
            out[i] = run_replicates(medians[i], b, rng, n_boot)  # draws nothing
            i += 1
            continue
        j = i + 1
        while (
            j < len(blocks) and len(blocks[j]) == len(b) and np.all(np.isfinite(blocks[j])) and np.median(blocks[j]) > 0
        ):
            j += 1
        group = np.stack(blocks[i:j])
        k = group.shape[1]
        idx = rng.integers(0, k, size=(j - i, n_boot, k))
        drawn = np.take_along_axis(group[:, None, :], idx, axis=2)
        scale = np.asarray(medians[i:j], dtype=float) / np.median(group, axis=1)
        out[i:j] = list(row_median(drawn, axis=2) * scale[:, None])
        i = j
    return np.stack(out)


def median_replicates(medians, block_cells, key, n_boot: int = N_BOOT) -> np.ndarray:
    """Replicates of the median over runs of one combination; all NaN with fewer than 2 runs."""
    return np.median(drawn_runs(medians, block_cells, key, n_boot), axis=1)


def replicates(ok: pd.DataFrame, keys, n_boot: int = N_BOOT, stream: str = "") -> dict:
    """{key: (n_boot, n_runs) drawn runs} for every combination of the usable runs `ok`: what
    every interval of the analysis is computed from (all NaN for a combination of one run).
    `stream` names this set of runs where another set of the same keys is compared with it."""
    cells = ok["step_time_blocks_s"] if "step_time_blocks_s" in ok.columns else pd.Series("", index=ok.index)
    out = {}
    for key, g in ok.groupby(list(keys), sort=False):
        key = tuple(k.item() if hasattr(k, "item") else k for k in key)
        out[key] = drawn_runs(g["step_time_median_s"], cells.loc[g.index], key, n_boot, stream)
    return out


def median_over_runs(values, key, n_boot: int = N_BOOT, stream: str = "") -> tuple[float, float, float]:
    """(median, lo, hi) of a per-run number (e.g. a run's kept step time over its all-steps median)
    over a combination's runs: its interval from the spread between processes alone (part 2),
    NaN with fewer than 2 runs."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    lo, hi = interval(np.median(drawn_runs(v, [""] * len(v), key, n_boot, stream), axis=1))
    return float(np.median(v)), lo, hi


def medians(drawn: np.ndarray) -> np.ndarray:
    """Replicates of a combination's median step time from its drawn runs."""
    return np.median(drawn, axis=1)


def interval(reps) -> tuple[float, float]:
    """The central LEVEL interval of the replicates; (nan, nan) if any is NaN (no interval).
    Infinite replicates are allowed (a crossover that never happens)."""
    r = np.asarray(reps, dtype=float)
    if len(r) == 0 or np.isnan(r).any():
        return math.nan, math.nan
    tail = 100 * (1 - LEVEL) / 2
    with np.errstate(invalid="ignore"):  # inf replicates: numpy's interpolation step warns
        lo, hi = np.percentile(r, [tail, 100 - tail])
    return float(lo), float(hi)


def same_within_noise(ratio_reps) -> bool | float:
    """Whether an interval of a ratio contains 1 (the two cannot be ranked); NaN if no interval."""
    lo, hi = interval(ratio_reps)
    if math.isnan(lo):
        return math.nan
    return bool(lo <= 1 <= hi)


# --- the fit, on every replicate at once ----------------------------------------------------------


def row_median(a: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """np.median along an axis of finite values, the same numbers: sorting a short axis (a run's
    16 blocks, a fit's points) costs a sixth of np.median's partition there."""
    s = np.sort(a, axis=axis)
    n = s.shape[axis]
    mid = np.take(s, [(n - 1) // 2, n // 2], axis=axis)
    out = np.mean(mid, axis=axis, keepdims=keepdims)
    return out


FIT_ITERATIONS = 50  # reweightings of the robust fit at most (it stops where no weight moves)


def fit_line(x, y) -> dict:
    """Robust fit of y = a + b*x (step time against batch size; copy time against bytes): the
    point estimate, by the same estimator as every replicate's (fit_many), with how well the line
    describes the points.

    Residuals are relative (y spans orders of magnitude across batch sizes, and a plain least
    squares fit would let the largest batch decide a alone), and points far from the line are
    down-weighted (Huber weights, iterated), so one noisy repeat cannot drag the fit. Quality is
    judged on the median y of each x: the largest relative error of the line.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (y > 0)
    x, y = x[keep], y[keep]
    sizes = np.unique(x)
    out = dict(a=math.nan, b=math.nan, n_points=len(y), n_batch_sizes=len(sizes))
    out.update(batch_sizes=" ".join(str(int(s)) for s in sizes), rel_rmse=math.nan, max_rel_err=math.nan)
    out.update(quality="none", note="")
    if len(y) == 0:
        out["note"] = "no successful run to fit"
        return out
    if len(sizes) == 1:
        out["note"] = (
            f"only batch size {int(sizes[0])} ran: the fixed cost per step and the cost per sample "
            "cannot be told apart (run two or more batch sizes)"
        )
        return out
    (a,), (b,) = fit_many(x, y[None, :])
    a, b = float(a), float(b)
    med = np.array([np.median(y[x == s]) for s in sizes])
    err = (a + b * sizes) / med - 1
    out.update(a=a, b=b, rel_rmse=float(np.sqrt(np.mean(err**2))), max_rel_err=float(np.max(np.abs(err))))
    worst = out["max_rel_err"]
    out["quality"] = "good" if worst <= 0.10 else "fair" if worst <= 0.30 else "poor"
    notes = []
    if b == 0:
        notes.append("the step did not get slower with the batch (noise, or a cost that does not grow): b = 0")
    elif a == 0:
        notes.append("the smallest batch costs no more per sample than the largest (noise?): a = 0")
    if out["quality"] == "poor":
        notes.append(f"a straight line misses one batch size by {worst:.0%}: read a and b as rough")
    elif len(sizes) == 2:
        out["quality"] = "exact (2 sizes)"
        notes.append("two batch sizes: the line passes through both, so its quality cannot be checked")
    out["note"] = "; ".join(notes)
    return out


def fit_many(x, Y, iterations: int = FIT_ITERATIONS) -> tuple[np.ndarray, np.ndarray]:
    """y = a + b*x fitted to every row of Y (replicates x points) at once, with a, b >= 0 (a
    negative overhead or cost per sample can only be noise: the better one-parameter line then):
    relative residuals, Huber weights reweighted until none moves, vectorised so that 1000
    replicates cost what one fit costs in a loop. fit_line's point estimate is its one row."""
    x = np.asarray(x, dtype=float)[None, :]
    Y = np.asarray(Y, dtype=float)
    base = 1.0 / Y
    huber = np.ones_like(Y)
    active = np.arange(len(Y))  # the replicates whose weights still change: only they are refitted
    for _ in range(iterations):
        if not len(active):
            break
        y, w = Y[active], base[active] * huber[active]
        a, b = _wls_many(x, y, w)
        r = (y - a[:, None] - b[:, None] * x) / y
        mad = row_median(np.abs(r - row_median(r, axis=1, keepdims=True)), axis=1, keepdims=True)
        scale = 1.4826 * mad
        u = np.abs(r) / (1.345 * np.maximum(scale, 1e-300))
        new = np.where((u <= 1) | (scale <= 1e-12), 1.0, 1.0 / np.maximum(u, 1e-12))
        old = huber[active]
        moved = (np.abs(new - old) > 1e-9 + 1e-6 * np.abs(old)).any(axis=1)  # np.isclose's test, row by row
        huber[active[moved]] = new[moved]
        active = active[moved]
    return _wls_many(x, Y, base * huber)


def _wls_many(x, Y, w):
    W = w * w
    sw, sx, sy = W.sum(1), (W * x).sum(1), (W * Y).sum(1)
    sxx, sxy = (W * x * x).sum(1), (W * x * Y).sum(1)
    det = sw * sxx - sx * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (sw * sxy - sx * sy) / det
        a = (sy - b * sx) / sw
        # A negative overhead or cost per sample is noise: the better one-parameter line instead.
        a0, b1 = sy / sw, np.where(sxx > 0, sxy / sxx, 0.0)
    err0 = (W * (Y - a0[:, None]) ** 2).sum(1)
    err1 = (W * (Y - b1[:, None] * x) ** 2).sum(1)
    fallback_a = np.where(err0 <= err1, a0, 0.0)
    fallback_b = np.where(err0 <= err1, 0.0, b1)
    good = (det > 0) & (a >= 0) & (b >= 0)
    return np.where(good, a, fallback_a), np.where(good, b, fallback_b)
