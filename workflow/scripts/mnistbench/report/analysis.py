"""Why the timings look as they do: the numbers, computed from the summary tables (pandas + numpy).
The words that say them are in words.py.

Every table is per network (the `model` column) as well. Only usable runs count (status ok and a
timing verdict in `quality.use`):
- fits: step time = a + b * batch_size per host x device x network x mode. a is the fixed cost of
  a step (Python, dispatch, kernel launches, syncs), b the cost of one more sample (the
  arithmetic); beside b, the network's FLOP per sample and, on the cpu, its arithmetic limit.
- crossover: the batch size from which each accelerator beats the cpu, per mode, from the fits
  and checked against the measured points.
- speedup: each accelerator over the cpu (same mode), and each mode over a reference mode.
- map: per network and batch size, the best mode of each device and the best accelerator mode
  over the best cpu mode, and the batch size from which it wins (the crossover map).
- ladder: every mode's samples/s at the smallest and the largest batch size, over the beginner's.
- dataloader: what feeding batches through a DataLoader from host memory costs next to `module`.
- bandwidth: host->device copies, pinned vs pageable.
- excluded: the runs left out of all of these, and why; disagreeing repeats.
The tables are catalog.TABLES; `run` writes each of them.

Every number comes with its 95 % interval (`_lo`, `_hi` columns), computed on the bootstrap
replicates of uncertainty.py: each derived number is computed again on every replicate of the
medians it is made of. A ratio whose interval contains 1 is `same_within_noise`: its two sides
cannot be ranked.
"""

import math

import numpy as np
import pandas as pd

from mnistbench import files
from mnistbench.collect import reference, uncertainty
from mnistbench.collect.aggregate import check_settings, succeeded, summarise, usable
from mnistbench.config import catalog, networks
from mnistbench.config.catalog import MODES
from mnistbench.config.devices import CPU, cpu_first
from mnistbench.measure import machines
from mnistbench.report import words

BYTES_PER_SAMPLE = 784 * 4 + 8  # float32 image + int64 label: what a DataLoader batch copies
REFERENCE_MODES = ("seed", "module", "manual")  # the mode ladder is compared with the first present
# A combination as the analysis compares it. `host` in these tables is the place a comparison is
# made (machines.places): a host, or an accelerator's machine beside the cpu machine it is
# compared with.
PLACE_KEYS = ["host", "device", "model", "mode", "batch_size"]


# --- the replicates -----------------------------------------------------------------------------


def replicates(runs: pd.DataFrame, use=("ok",), stream: str = "") -> dict:
    """{(host, device, model, mode, batch_size): drawn runs} of every combination's usable runs
    (`stream`: uncertainty.replicates)."""
    return uncertainty.replicates(usable(runs, use), PLACE_KEYS, stream=stream)


def by_size(runs: pd.DataFrame) -> list:
    """The networks of these runs, smallest first (by FLOP per training sample, then name)."""
    if runs.empty:
        return []
    flop = pd.to_numeric(runs.get("flop_per_sample", pd.Series(np.nan, index=runs.index)), errors="coerce")
    size = flop.groupby(runs["model"]).max()
    return sorted(size.index, key=lambda m: (np.nan_to_num(size[m], nan=np.inf), m))


def flops(runs: pd.DataFrame) -> dict:
    """{network: FLOP per training sample} of these runs (NaN where none recorded it)."""
    flop = pd.to_numeric(runs.get("flop_per_sample", pd.Series(np.nan, index=runs.index)), errors="coerce")
    return flop.groupby(runs["model"]).max().to_dict() if len(runs) else {}


def _reps(reps: dict, host, device, model, mode, batch_size) -> np.ndarray:
    """Replicates of one combination's median step time (all NaN where it has none)."""
    drawn = reps.get((host, device, model, mode, int(batch_size)))
    return uncertainty.medians(drawn) if drawn is not None else np.full(uncertainty.N_BOOT, math.nan)


def _bounds(df: pd.DataFrame, column: str, values: list) -> None:
    """Add the interval columns `<column>_lo`, `<column>_hi` from one replicate array per row."""
    pairs = [uncertainty.interval(v) for v in values]
    df[f"{column}_lo"] = [p[0] for p in pairs] if pairs else []
    df[f"{column}_hi"] = [p[1] for p in pairs] if pairs else []


# --- the fit ------------------------------------------------------------------------------------


def _wls(x, y, w):
    """Weighted least squares of y = a + b*x with a, b >= 0: a negative overhead or a negative
    cost per sample can only be noise, so the fit falls back to the better one-parameter line."""
    W = w * w
    sw, sx, sy, sxx, sxy = W.sum(), (W * x).sum(), (W * y).sum(), (W * x * x).sum(), (W * x * y).sum()
    det = sw * sxx - sx * sx
    if det > 0:
        b = (sw * sxy - sx * sy) / det
        a = (sy - b * sx) / sw
        if a >= 0 and b >= 0:
            return a, b
    candidates = [(sy / sw, 0.0), (0.0, sxy / sxx if sxx > 0 else 0.0)]
    return min(candidates, key=lambda ab: (W * (y - ab[0] - ab[1] * x) ** 2).sum())


def fit_line(x, y) -> dict:
    """Robust fit of y = a + b*x (step time against batch size).

    Residuals are relative (y spans orders of magnitude across batch sizes, and a plain least
    squares fit would let the largest batch decide a alone), and points far from the line are
    down-weighted (Huber weights, iterated), so one noisy repeat cannot drag the fit. Quality is
    judged on the median step time of each batch size: the largest relative error of the line.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (y > 0)
    x, y = x[keep], y[keep]
    sizes = np.unique(x)
    out = dict(
        a=math.nan,
        b=math.nan,
        n_points=len(y),
        n_batch_sizes=len(sizes),
        batch_sizes=" ".join(str(int(s)) for s in sizes),
        rel_rmse=math.nan,
        max_rel_err=math.nan,
        quality="none",
        note="",
    )
    if len(y) == 0:
        out["note"] = "no successful run to fit"
        return out
    if len(sizes) == 1:
        out["note"] = (
            f"only batch size {int(sizes[0])} ran: the fixed cost per step and the cost per sample "
            "cannot be told apart (run two or more batch sizes)"
        )
        return out
    base = 1.0 / y
    huber = np.ones_like(y)
    for _ in range(50):
        a, b = _wls(x, y, base * huber)
        r = (y - a - b * x) / y
        scale = 1.4826 * np.median(np.abs(r - np.median(r)))
        if not scale > 1e-12:
            break
        u = np.abs(r) / (1.345 * scale)
        new = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-12))
        if np.allclose(new, huber, rtol=1e-6, atol=1e-9):
            break
        huber = new
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


FIT_KEYS = ["host", "device", "model", "mode"]  # one line a + b·batch per combination of these


def fit_replicates(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> dict:
    """{(host, device, model, mode): (a, b) replicates in seconds}: the fit of fit_line made again
    on every replicate's drawn runs (NaN where a batch size has fewer than two usable runs)."""
    reps = replicates(runs, use) if reps is None else reps
    out, same_x = {}, {}
    for (host, device, model, mode), g in usable(runs, use).groupby(FIT_KEYS, sort=True):
        sizes = sorted(set(g["batch_size"]))
        if len(sizes) < 2:
            continue
        parts = [reps[(host, device, model, mode, int(b))] for b in sizes]
        Y = np.concatenate(parts, axis=1)
        x = np.concatenate([np.full(p.shape[1], float(b)) for b, p in zip(sizes, parts)])
        if np.isnan(Y).any():
            nan = np.full(len(Y), math.nan)
            out[(host, device, model, mode)] = (nan, nan)
        else:
            same_x.setdefault(tuple(x), []).append(((host, device, model, mode), Y))
    # Each replicate is fitted on its own (fit_many works row by row): the fits of every
    # combination with the same batch sizes and runs go in one call, many machines at the cost of
    # a few calls instead of one per machine.
    for x, fits_ in same_x.items():
        a, b = uncertainty.fit_many(np.array(x), np.concatenate([Y for _, Y in fits_]))
        start = 0
        for key, Y in fits_:
            out[key] = (a[start : start + len(Y)], b[start : start + len(Y)])
            start += len(Y)
    return out


def fits(runs: pd.DataFrame, use=("ok",), fit_reps: dict | None = None, gflops: dict | None = None) -> pd.DataFrame:
    """Per host x device x network x mode: a (µs per step), b (µs per sample), their intervals and
    the fit's quality; `trusted` says whether a sentence may quote it. Beside b, the network's
    FLOP per sample and, on the cpu, its arithmetic limit on one core (`limit_us`, at the
    place's measured FMA rate, `gflops`: {host: GFLOP/s}). Combinations without a usable run get
    a row with a note, not a fit."""
    fit_reps = fit_replicates(runs, use) if fit_reps is None else fit_reps
    flop, gflops = flops(runs), gflops or {}
    rows = []
    for (host, device, model, mode), g in runs.groupby(FIT_KEYS, sort=True):
        ok = usable(g, use)
        f = fit_line(ok["batch_size"], ok["step_time_median_s"])
        if ok.empty:
            why = sorted(set(g["status"]) - {"ok"}) or sorted(set(g["quality"].astype(str)))
            f["note"] = f"no successful run with a usable timing (status or timing: {', '.join(why)})"
        a, b = f.pop("a"), f.pop("b")
        share = pd.to_numeric(g.get("input_nonzero_share", pd.Series(dtype=float)), errors="coerce").median()
        ra, rb = fit_reps.get((host, device, model, mode), (np.full(1, math.nan), np.full(1, math.nan)))
        (a_lo, a_hi), (b_lo, b_hi) = uncertainty.interval(ra * 1e6), uncertainty.interval(rb * 1e6)
        with np.errstate(divide="ignore", invalid="ignore"):  # a replicate with b <= 0 never ends
            bound_lo, bound_hi = uncertainty.interval(np.where(rb > 0, ra / rb, np.where(ra > 0, math.inf, math.nan)))
        rows.append(
            dict(
                host=host,
                device=device,
                device_name=g["device_name"].iloc[0],
                model=model,
                mode=mode,
                flop_per_sample=flop.get(model, math.nan),
                limit_us=limit_us(flop.get(model, math.nan), gflops.get(host)) if device == CPU else math.nan,
                input_nonzero_share=share,
                effective_flop_per_sample=effective_flop(model, flop.get(model, math.nan), share),
                a_us=a * 1e6,
                a_us_lo=a_lo,
                a_us_hi=a_hi,
                b_us=b * 1e6,
                b_us_lo=b_lo,
                b_us_hi=b_hi,
                # Below this batch size the fixed cost is more than half of a step.
                overhead_bound_below=a / b if b > 0 else math.inf if a > 0 else math.nan,
                overhead_bound_below_lo=bound_lo,
                overhead_bound_below_hi=bound_hi,
                **f,
            )
        )
    cols = [
        "host",
        "device",
        "device_name",
        "model",
        "mode",
        "flop_per_sample",
        "limit_us",
        "input_nonzero_share",
        "effective_flop_per_sample",
        "a_us",
        "a_us_lo",
        "a_us_hi",
        "b_us",
        "b_us_lo",
        "b_us_hi",
        "overhead_bound_below",
        "overhead_bound_below_lo",
        "overhead_bound_below_hi",
        "n_points",
        "n_batch_sizes",
        "batch_sizes",
        "rel_rmse",
        "max_rel_err",
        "quality",
        "note",
    ]
    out = pd.DataFrame(rows, columns=cols)
    out["trusted"] = out["a_us"].notna() & (out["quality"] != "poor")
    return out


def effective_flop(model: str, flop_per_sample, nonzero_share) -> float:
    """The FLOP per sample a mode does that computes layer 1 over the nonzero inputs only
    (`sparse`): layer 1's forward product and weight gradient (2 x 2 x 784 x w1 of the dense
    count) at the nonzero share, the rest as dense. The dense count where no share was recorded
    (every other mode), NaN for a network outside the family."""
    share = float(nonzero_share)
    if not math.isfinite(share):
        return float(flop_per_sample)
    try:
        net = networks.network(str(model))
    except networks.BadNetwork:
        return math.nan
    if not net.family:
        return math.nan
    return float(flop_per_sample) - (1.0 - share) * 4 * net.sizes[0] * net.sizes[1]


def limit_us(flop_per_sample, gflops) -> float:
    """A network's arithmetic limit on one core: µs per training sample at the core's measured
    peak rate (NaN where either is unknown)."""
    try:
        return float(flop_per_sample) / (float(gflops) * 1e3)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def place_gflops(runs: pd.DataFrame, env: pd.DataFrame) -> dict:
    """{place: its cpu's measured peak GFLOP/s per core} (environment.csv, by the hosts its cpu
    runs ran on)."""
    if "fma_gflops" not in env.columns or runs.empty:
        return {}
    rate = pd.to_numeric(env[env["device"] == CPU].set_index("host")["fma_gflops"], errors="coerce").dropna()
    out = {}
    for place, g in runs[runs["device"] == CPU].groupby("host"):
        hosts = [h for h in g.get("run_host", g["host"]).unique() if h in rate.index]
        if hosts:
            out[place] = float(rate[hosts[0]])
    return out


# --- accelerators against the cpu ---------------------------------------------------------------


def medians(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """Median step time (s) per host x device x network x mode x batch size over the usable repeats."""
    ok = usable(runs, use)
    return ok.groupby(PLACE_KEYS, as_index=False)["step_time_median_s"].median()


def crossover(fit: pd.DataFrame, runs: pd.DataFrame, use=("ok",), fit_reps: dict | None = None) -> pd.DataFrame:
    """For every accelerator x network x mode with a cpu run of the same network and mode on the
    same host: where the fitted lines cross with its interval (over the fits' replicates;
    `verdict_share` is the share of replicates with the same verdict), and what the measured
    points say."""
    fit_reps = fit_replicates(runs, use) if fit_reps is None else fit_reps
    med = medians(runs, use)
    rows = []
    for _, acc in fit[fit["device"] != CPU].iterrows():
        host, model, mode = acc["host"], acc["model"], acc["mode"]
        cpu = fit[(fit["host"] == host) & (fit["device"] == CPU) & (fit["model"] == model) & (fit["mode"] == mode)]
        row = dict(host=host, device=acc["device"], model=model, mode=mode, a_us=acc["a_us"], b_us=acc["b_us"])
        if cpu.empty:
            row["note"] = f"no cpu run of {model} {mode} on {host} to compare with"
            rows.append(row)
            continue
        cpu = cpu.iloc[0]
        row.update(cpu_a_us=cpu["a_us"], cpu_b_us=cpu["b_us"])
        row.update(_fit_crossover(acc["a_us"], acc["b_us"], cpu["a_us"], cpu["b_us"]))
        acc_ab, cpu_ab = (
            fit_reps.get((host, acc["device"], model, mode)),
            fit_reps.get((host, CPU, model, mode)),
        )
        if acc_ab is not None and cpu_ab is not None:
            row.update(_crossover_interval(*acc_ab, *cpu_ab, row["verdict"]))
        row.update(_measured_crossover(med, host, acc["device"], model, mode, row))
        rows.append(row)
    cols = [
        "host",
        "device",
        "model",
        "mode",
        "verdict",
        "crossover_batch_size",
        "crossover_batch_size_lo",
        "crossover_batch_size_hi",
        "verdict_share",
        "measured_last_slower",
        "measured_first_faster",
        "fit_agrees",
        "a_us",
        "b_us",
        "cpu_a_us",
        "cpu_b_us",
        "note",
    ]
    return pd.DataFrame(rows, columns=cols)


def _fit_crossover(a, b, ca, cb) -> dict:
    if not all(np.isfinite([a, b, ca, cb])):
        return dict(verdict="no fit", crossover_batch_size=math.nan)
    da, db = a - ca, cb - b  # accelerator's extra fixed cost; its saving per sample
    if da <= 0 and db >= 0:
        return dict(verdict="faster at every batch size", crossover_batch_size=math.nan)
    if da >= 0 and db <= 0:
        return dict(verdict="slower at every batch size", crossover_batch_size=math.nan)
    cross = da / db
    return dict(
        verdict="slower below, faster above" if da > 0 else "faster below, slower above", crossover_batch_size=cross
    )


def _crossover_interval(a, b, ca, cb, verdict) -> dict:
    """The crossover on every replicate of the two fits: a replicate where the accelerator is
    faster at every batch size crosses at 0, one where it is slower at every size never (inf)."""
    da, db = a - ca, cb - b
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where((da > 0) & (db > 0), da / db, np.where(da >= 0, math.inf, 0.0))
    cross[np.isnan(da) | np.isnan(db)] = math.nan
    kinds = np.where(
        (da <= 0) & (db >= 0),
        "faster at every batch size",
        np.where(
            (da >= 0) & (db <= 0),
            "slower at every batch size",
            np.where(da > 0, "slower below, faster above", "faster below, slower above"),
        ),
    )
    lo, hi = uncertainty.interval(cross)
    share = float(np.mean(kinds == verdict)) if not np.isnan(cross).any() else math.nan
    return dict(crossover_batch_size_lo=lo, crossover_batch_size_hi=hi, verdict_share=share)


def _measured_crossover(med, host, device, model, mode, row) -> dict:
    sel = lambda d: med[  # noqa: E731
        (med["host"] == host) & (med["device"] == d) & (med["model"] == model) & (med["mode"] == mode)
    ]
    both = sel(device).merge(sel(CPU), on="batch_size", suffixes=("", "_cpu")).sort_values("batch_size")
    if both.empty:
        return dict(note="no batch size ran on both devices", fit_agrees=math.nan)
    faster = both["step_time_median_s"] < both["step_time_median_s_cpu"]
    sizes = both["batch_size"].to_numpy()
    out = dict(
        measured_last_slower=sizes[~faster.to_numpy()].max() if (~faster).any() else math.nan,
        measured_first_faster=sizes[faster.to_numpy()].min() if faster.any() else math.nan,
    )
    # The fit agrees when it predicts the faster device at every batch size that ran.
    a, b, ca, cb = (row.get(k, math.nan) for k in ("a_us", "b_us", "cpu_a_us", "cpu_b_us"))
    predicted = (a + b * sizes) < (ca + cb * sizes)
    out["fit_agrees"] = bool((predicted == faster.to_numpy()).all()) if np.isfinite([a, b, ca, cb]).all() else math.nan
    if out["fit_agrees"] is False:
        out["note"] = "the fit and the measured points disagree on which device is faster at some batch size"
    return out


def reference_mode(modes) -> str:
    present = set(modes)
    return next((m for m in REFERENCE_MODES if m in present), sorted(present)[0])


def speedup(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> pd.DataFrame:
    """speedup = baseline step time / step time, at the same host, network and batch size, with
    its interval and whether that contains 1 (`same_within_noise`: the two cannot be ranked).

    kind 'device': each accelerator over the cpu, same mode. kind 'mode': each mode over the
    network's reference mode (seed, the beginner's code, where it ran), same device. kind 'best':
    each accelerator's fastest mode over the cpu's fastest mode.
    """
    reps = replicates(runs, use) if reps is None else reps
    med = medians(runs, use)
    cols = [
        "kind",
        "host",
        "device",
        "model",
        "mode",
        "batch_size",
        "baseline_device",
        "baseline_mode",
        "step_time_s",
        "baseline_step_time_s",
        "speedup",
        "speedup_lo",
        "speedup_hi",
        "same_within_noise",
    ]
    if med.empty:
        return pd.DataFrame(columns=cols)
    cpu = med[med["device"] == CPU].rename(columns={"step_time_median_s": "baseline_step_time_s"})
    dev = med[med["device"] != CPU].merge(cpu.drop(columns="device"), on=["host", "model", "mode", "batch_size"])
    dev = dev.assign(kind="device", baseline_device=CPU, baseline_mode=dev["mode"])
    refs = med.groupby("model")["mode"].agg(reference_mode).rename("baseline_mode").reset_index()
    base = med.merge(refs, left_on=["model", "mode"], right_on=["model", "baseline_mode"])
    base = base.drop(columns=["mode"]).rename(columns={"step_time_median_s": "baseline_step_time_s"})
    lad = med.merge(base, on=["host", "device", "model", "batch_size"])
    lad = lad.assign(kind="mode", baseline_device=lad["device"])
    fastest = med.loc[med.groupby(["host", "device", "model", "batch_size"])["step_time_median_s"].idxmin()]
    top_cpu = fastest[fastest["device"] == CPU].rename(
        columns={"step_time_median_s": "baseline_step_time_s", "mode": "baseline_mode"}
    )
    top = fastest[fastest["device"] != CPU].merge(top_cpu.drop(columns="device"), on=["host", "model", "batch_size"])
    top = top.assign(kind="best", baseline_device=CPU)
    out = pd.concat([dev, lad, top], ignore_index=True).rename(columns={"step_time_median_s": "step_time_s"})
    out["speedup"] = out["baseline_step_time_s"] / out["step_time_s"]
    ratios = [
        _reps(reps, r["host"], r["baseline_device"], r["model"], r["baseline_mode"], r["batch_size"])
        / _reps(reps, r["host"], r["device"], r["model"], r["mode"], r["batch_size"])
        for _, r in out.iterrows()
    ]
    _bounds(out, "speedup", ratios)
    out["same_within_noise"] = [uncertainty.same_within_noise(r) for r in ratios]
    return out[cols].sort_values(["kind", "host", "device", "model", "mode", "batch_size"], ignore_index=True)


# --- the crossover map: where the accelerator wins, per network -----------------------------------


def _best(reps: dict, host, device, model, modes, b) -> np.ndarray:
    """Replicates of the fastest mode's step time among `modes` (per replicate the fastest)."""
    return np.nanmin(np.stack([_reps(reps, host, device, model, m, b) for m in modes]), axis=0)


def _first_winning(faster: np.ndarray, sizes) -> float:
    """The smallest batch size from which the accelerator is faster at every larger size of the
    grid (rows of `faster`: batch sizes, ascending); inf where it is not faster at the largest.
    Works on one row of booleans per replicate (faster: sizes x replicates)."""
    wins_from = np.full(faster.shape[1:], math.inf)
    still = np.ones(faster.shape[1:], dtype=bool)
    for i in range(len(sizes) - 1, -1, -1):
        still &= faster[i]
        wins_from = np.where(still, float(sizes[i]), wins_from)
    return wins_from


def network_map(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> pd.DataFrame:
    """Per host x device x network x batch size: the device's fastest mode and its samples/s;
    on an accelerator also the cpu's fastest, its factor over it (`over_cpu_best`) and, per host x
    accelerator x network, the batch size from which the accelerator's best mode beats the cpu's
    best at every larger batch size of the grid (`wins_from`, with its interval over the
    replicates, each of which picks its own fastest modes; inf: at no batch size of the grid)."""
    reps = replicates(runs, use) if reps is None else reps
    med = medians(runs, use)
    flop = flops(runs)
    params = pd.to_numeric(runs.get("parameters", pd.Series(np.nan, index=runs.index)), errors="coerce")
    params = params.groupby(runs["model"]).max().to_dict() if len(runs) else {}
    cols = ["host", "device", "model", "flop_per_sample", "parameters", "batch_size", "best_mode"]
    cols += ["samples_per_s", "samples_per_s_lo", "samples_per_s_hi", "cpu_best_mode", "over_cpu_best"]
    cols += ["over_cpu_best_lo", "over_cpu_best_hi", "wins_from", "wins_from_lo", "wins_from_hi", "verdict"]
    rows = []
    for host, model in [(h, m) for h in machines.by_name(med["host"]) for m in by_size(runs[runs["host"] == h])]:
        g = med[(med["host"] == host) & (med["model"] == model)]
        if g.empty:
            continue
        cpu = g[g["device"] == CPU]
        for device in cpu_first(g["device"]):
            d = g[g["device"] == device]
            sizes = sorted(set(d["batch_size"]))
            both = [b for b in sizes if b in set(cpu["batch_size"])] if device != CPU else []
            measured, ratio, mine = {}, {}, []
            for b in sizes:
                here = d[d["batch_size"] == b]
                top = here.loc[here["step_time_median_s"].idxmin()]
                best = _best(reps, host, device, model, here["mode"], b)
                lo, hi = uncertainty.interval(b / best)
                row = dict(host=host, device=device, model=model, flop_per_sample=flop.get(model, math.nan))
                row.update(parameters=params.get(model, math.nan), batch_size=b, best_mode=top["mode"])
                row.update(samples_per_s=b / top["step_time_median_s"], samples_per_s_lo=lo, samples_per_s_hi=hi)
                if b in both:
                    c = cpu[cpu["batch_size"] == b]
                    c_top = c.loc[c["step_time_median_s"].idxmin()]
                    measured[b] = c_top["step_time_median_s"] / top["step_time_median_s"]
                    ratio[b] = _best(reps, host, CPU, model, c["mode"], b) / best
                    row.update(cpu_best_mode=c_top["mode"], over_cpu_best=measured[b])
                    row["over_cpu_best_lo"], row["over_cpu_best_hi"] = uncertainty.interval(ratio[b])
                mine.append(row)
            if both:
                point = _first_winning(np.array([[measured[b] > 1] for b in both]), both)[0]
                drawn = np.stack([ratio[b] for b in both])
                lo, hi = (
                    (math.nan, math.nan) if np.isnan(drawn).any() else _grid_interval(_first_winning(drawn > 1, both))
                )
                if point == both[0]:
                    verdict = "faster at every batch size"
                elif math.isinf(point):
                    verdict = "slower at every batch size"
                else:
                    verdict = "slower below, faster above"
                for r in mine:
                    r.update(wins_from=point, wins_from_lo=lo, wins_from_hi=hi, verdict=verdict)
            rows += mine
    return pd.DataFrame(rows, columns=cols)


def _grid_interval(values: np.ndarray) -> tuple[float, float]:
    """The central 95 % of replicates that take grid values (batch sizes, or inf): values that
    occur, not interpolated between them."""
    v = np.asarray(values, dtype=float)
    tail = 100 * (1 - uncertainty.LEVEL) / 2
    lo, hi = np.percentile(v, [tail, 100 - tail], method="inverted_cdf")
    return float(lo), float(hi)


# --- data movement ------------------------------------------------------------------------------


def bandwidth(transfer: pd.DataFrame) -> pd.DataFrame:
    """Per host x device x memory: copy time = latency + bytes / bandwidth (the same robust fit),
    and the bandwidth measured on the largest copy."""
    rows = []
    cols = [
        "host",
        "device",
        "memory",
        "latency_us",
        "fit_gb_per_s",
        "largest_bytes",
        "largest_gb_per_s",
        "pinned_over_pageable",
        "note",
    ]
    if transfer.empty:
        return pd.DataFrame(columns=cols)
    for (host, device, memory), g in transfer.groupby(["host", "device", "memory"], sort=True):
        f = fit_line(g["bytes"], g["seconds"])
        big = g.loc[g["bytes"].idxmax()]
        rows.append(
            dict(
                host=host,
                device=device,
                memory=memory,
                latency_us=f["a"] * 1e6,
                fit_gb_per_s=1e-9 / f["b"] if f["b"] > 0 else math.nan,
                largest_bytes=int(big["bytes"]),
                largest_gb_per_s=big["gb_per_s"],
                note=f["note"],
            )
        )
    out = pd.DataFrame(rows, columns=cols)
    for _, g in out.groupby(["host", "device"]):
        pinned, pageable = g[g["memory"] == "pinned"], g[g["memory"] == "pageable"]
        if len(pinned) and len(pageable):
            ratio = pinned["largest_gb_per_s"].iloc[0] / pageable["largest_gb_per_s"].iloc[0]
            out.loc[g.index, "pinned_over_pageable"] = ratio
    return out


def copy_seconds(bw: pd.DataFrame, host, device, nbytes) -> float:
    """Predicted time of one host->device copy of nbytes, from the fitted line of the memory kind
    the DataLoader uses (pinned where the device has it, pageable elsewhere; on the cpu a host
    memcpy, which is what the DataLoader's collation does)."""
    g = bw[(bw["host"] == host) & (bw["device"] == device)]
    if g.empty:
        return math.nan
    pinned = g[g["memory"] == "pinned"]
    want = "pinned" if len(pinned) else "pageable"
    r = g[g["memory"] == want]
    r = (r if len(r) else g).iloc[0]
    if not (np.isfinite(r["latency_us"]) and np.isfinite(r["fit_gb_per_s"])):
        return math.nan
    return r["latency_us"] * 1e-6 + nbytes / (r["fit_gb_per_s"] * 1e9)


def dataloader(runs: pd.DataFrame, bw: pd.DataFrame, prof: pd.DataFrame, use=("ok",), reps=None) -> pd.DataFrame:
    """What the DataLoader path costs per step next to `module` (the same network fed from tensors
    already on the device), per host x device x network x batch size.

    extra_share: (dataloader step - module step) / dataloader step, from the timed runs.
    copy_share: the host->device copy alone (predicted from the preload's copy timings) over the
    dataloader step. profiled_*_share: the batch fetch's share of a profiled step, for both modes.
    extra_share_lo/hi: its interval over the replicates of both medians.
    """
    reps = replicates(runs, use) if reps is None else reps
    med = medians(runs, use)
    cols = [
        "host",
        "device",
        "model",
        "batch_size",
        "module_step_us",
        "dataloader_step_us",
        "extra_us",
        "extra_share",
        "extra_share_lo",
        "extra_share_hi",
        "copy_us",
        "copy_share",
        "profiled_dataloader_share",
        "profiled_module_share",
        "note",
    ]
    keys = ["host", "device", "model", "batch_size"]
    mod = med[med["mode"] == "module"].drop(columns="mode")
    dl = med[med["mode"] == "dataloader"].drop(columns="mode")
    both = dl.merge(mod, on=keys, suffixes=("_dl", "_mod"))
    if both.empty:
        return pd.DataFrame(columns=cols)
    both["module_step_us"] = both["step_time_median_s_mod"] * 1e6
    both["dataloader_step_us"] = both["step_time_median_s_dl"] * 1e6
    both["extra_us"] = both["dataloader_step_us"] - both["module_step_us"]
    both["extra_share"] = both["extra_us"] / both["dataloader_step_us"]
    _bounds(
        both,
        "extra_share",
        [
            1 - _reps(reps, h, d, m, "module", b) / _reps(reps, h, d, m, "dataloader", b)
            for h, d, m, b in zip(*(both[k] for k in keys))
        ],
    )
    both["copy_us"] = [
        copy_seconds(bw, h, d, b * BYTES_PER_SAMPLE) * 1e6
        for h, d, b in zip(both["host"], both["device"], both["batch_size"])
    ]
    both["copy_share"] = both["copy_us"] / both["dataloader_step_us"]
    both["note"] = np.where(both["extra_us"] < 0, "dataloader measured faster than module: within the noise", "")
    for mode in ("dataloader", "module"):
        share = {}
        if not prof.empty:
            p = succeeded(prof[prof["mode"] == mode])
            share = {
                (h, d, m, b): t / s
                for h, d, m, b, t, s in zip(*(p[k] for k in keys), p["transfer_us"], p["step_us_profiled"])
            }
        both[f"profiled_{mode}_share"] = [share.get(k, math.nan) for k in zip(*(both[k] for k in keys))]
    return both[cols].sort_values(keys, ignore_index=True)


# --- the ladder ---------------------------------------------------------------------------------


def ladder(runs: pd.DataFrame, use=("ok",), reps: dict | None = None, gflops: dict | None = None) -> pd.DataFrame:
    """Every mode's median samples/s on each host x device x network at the smallest and the
    largest batch size of that device's grid, in the ladder's order (`order`: its place in
    catalog.MODES), and its factor over the beginner's code (`seed`) at the same batch size (NaN
    where seed did not run), each with its interval; `same_as_best`: the interval of the fastest
    mode's samples/s over this one's contains 1. An accelerator's fastest mode also carries its
    factor over the cpu's fastest (`over_cpu_best`). On the cpu, `limit_samples_per_s`: the
    network's dense arithmetic limit on one core (fits' limit_us as samples/s; `gflops`: {host:
    GFLOP/s}), which a mode that skips arithmetic (`sparse`) can pass."""
    reps = replicates(runs, use) if reps is None else reps
    flop, gflops = flops(runs), gflops or {}
    cols = ["host", "device", "model", "point", "batch_size", "order", "mode", "samples_per_s", "samples_per_s_lo"]
    cols += ["samples_per_s_hi", "over_seed", "over_seed_lo", "over_seed_hi", "same_as_best"]
    cols += ["over_cpu_best", "over_cpu_best_lo", "over_cpu_best_hi", "limit_samples_per_s"]
    med = usable(runs, use).groupby(PLACE_KEYS, as_index=False)["samples_per_s"].median()
    rows = []
    for host in machines.by_name(runs["host"]):
        h = runs[runs["host"] == host]
        for device in cpu_first(h["device"]):
            sizes = sorted(set(h[h["device"] == device]["batch_size"]))
            for model in by_size(h[h["device"] == device]):
                for point, b in dict.fromkeys([("smallest", sizes[0]), ("largest", sizes[-1])]):
                    if point == "largest" and b == sizes[0]:
                        break  # one batch size: one point
                    here = med[
                        (med["host"] == host)
                        & (med["device"] == device)
                        & (med["model"] == model)
                        & (med["batch_size"] == b)
                    ]
                    rate = dict(zip(here["mode"], here["samples_per_s"]))
                    step = {m: _reps(reps, host, device, model, m, b) for m in rate}
                    top = max(rate, key=rate.get) if rate else None
                    for order, mode in enumerate(MODES):
                        if mode not in rate:
                            continue
                        over = rate[mode] / rate["seed"] if "seed" in rate else math.nan
                        nan = np.full(uncertainty.N_BOOT, math.nan)
                        sps_lo, sps_hi = uncertainty.interval(b / step[mode])
                        over_lo, over_hi = uncertainty.interval(step["seed"] / step[mode] if "seed" in rate else nan)
                        rows.append(
                            dict(
                                host=host,
                                device=device,
                                model=model,
                                point=point,
                                batch_size=b,
                                order=order,
                                mode=mode,
                                samples_per_s=rate[mode],
                                samples_per_s_lo=sps_lo,
                                samples_per_s_hi=sps_hi,
                                over_seed=over,
                                over_seed_lo=over_lo,
                                over_seed_hi=over_hi,
                                same_as_best=uncertainty.same_within_noise(step[mode] / step[top]),
                                limit_samples_per_s=1e6 / limit_us(flop.get(model, math.nan), gflops.get(host))
                                if device == CPU
                                else math.nan,
                            )
                        )
    out = pd.DataFrame(rows, columns=cols)
    _over_cpu_best(out, reps)
    return out


def _over_cpu_best(lad: pd.DataFrame, reps: dict) -> None:
    """On each accelerator's fastest mode: its samples/s over the cpu's fastest mode at the same
    host, network and batch size (`over_cpu_best`, with its interval)."""
    for c in ("over_cpu_best", "over_cpu_best_lo", "over_cpu_best_hi"):
        lad[c] = math.nan
    for (host, model, b), g in lad.groupby(["host", "model", "batch_size"]):
        cpu = g[g["device"] == CPU]
        if cpu.empty:
            continue
        c = cpu.loc[cpu["samples_per_s"].idxmax()]
        for device, d in g[g["device"] != CPU].groupby("device"):
            a = d.loc[d["samples_per_s"].idxmax()]
            ratio = _reps(reps, host, CPU, model, c["mode"], b) / _reps(reps, host, device, model, a["mode"], b)
            lad.loc[a.name, ["over_cpu_best", "over_cpu_best_lo", "over_cpu_best_hi"]] = [
                a["samples_per_s"] / c["samples_per_s"],
                *uncertainty.interval(ratio),
            ]


# --- what the analysis left out -----------------------------------------------------------------


def excluded(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """Runs left out of the medians, fits, speedups and sentences, and why."""
    cols = ["host", "device", "model", "mode", "batch_size", "repeat", "status", "quality", "reason"]
    out = runs[~runs.index.isin(usable(runs, use).index)]
    out = out.reindex(columns=list(dict.fromkeys([*out.columns, "message", "quality", "quality_note"])))
    out["reason"] = [
        f"{s}: {m}" if s != "ok" else f"timing {q}: {n}"
        for s, m, q, n in zip(
            out["status"], out["message"], out["quality"], out["quality_note"].astype(object).fillna("")
        )
    ]
    return out.reindex(columns=cols).reset_index(drop=True)


def disagreeing(runs: pd.DataFrame, use=("ok",), limit=1.25) -> pd.DataFrame:
    """Combinations whose usable repeats' median step times differ by more than `limit`."""
    s = summarise(runs, use, limit, intervals=False)  # the spread only: no replicates drawn
    return s[s["repeats_agree"].astype(str) == "False"][PLACE_KEYS + ["n_ok", "repeat_spread"]].reset_index(drop=True)


# --- the rule -----------------------------------------------------------------------------------


def beside(own: pd.DataFrame, name: str, refs: list, computed: dict) -> pd.DataFrame:
    """A table of this run's (`reference` empty) with the same table of every reference machine
    below it (`reference`: its label), each computed from its own runs alone."""
    parts = [own.assign(reference="")] + [computed[r.label][name].assign(reference=r.label) for r in refs]
    return pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else parts[0]


def reference_tables(ref, use) -> dict:
    """The tables a reference machine shows beside this run's: its ladder, map and crossovers."""
    reps = replicates(ref.runs, use)
    fit_reps = fit_replicates(ref.runs, use, reps)
    fit = fits(ref.runs, use, fit_reps)
    return dict(
        ladder=ladder(ref.runs, use, reps),
        map=network_map(ref.runs, use, reps),
        crossover=crossover(fit, ref.runs, use, fit_reps),
    )


def analyse(runs, transfer, prof, env, cfg, references=()) -> tuple[dict, dict]:
    """All tables and the findings, from data frames (no files): what the tests call.
    `references`: reference.Reference machines, whose ladder, map and crossovers stand beside
    this run's (their `reference` column names them)."""
    q = cfg.get("quality") or {}
    use = tuple(q.get("use", ["ok"]))
    raw, runs = runs, machines.places(runs)
    bw = bandwidth(transfer)
    reps = replicates(runs, use)
    fit_reps = fit_replicates(runs, use, reps)
    gflops = place_gflops(runs, env)
    fit = fits(runs, use, fit_reps, gflops)
    refs = list(references)
    computed = {r.label: reference_tables(r, use) for r in refs}
    tables = dict(
        runs=runs,
        fits=fit,
        crossover=beside(crossover(fit, runs, use, fit_reps), "crossover", refs, computed),
        speedup=speedup(runs, use, reps),
        map=beside(network_map(runs, use, reps), "map", refs, computed),
        ladder=beside(ladder(runs, use, reps, gflops), "ladder", refs, computed),
        references=refs,
        bandwidth=bw,
        dataloader=dataloader(runs, bw, prof, use, reps),
        profile=prof,
        environment=env,
        excluded=excluded(raw, use),
        disagreeing=disagreeing(raw, use, q.get("repeat_spread", 1.25)),
        code_notes=check_settings(raw) if "settings" in raw.columns else [],
        use=use,
    )
    return tables, words.findings(tables, cfg)


def run(inp, out, cfg, log=print) -> None:
    runs, prof = pd.read_csv(inp.runs), pd.read_csv(inp.profile)
    refs, notes = reference.load_all(inp.get("references", []))
    tables, found = analyse(runs, pd.read_csv(inp.transfer), prof, pd.read_csv(inp.environment), cfg, refs)
    found[None] += notes
    for name in catalog.TABLES:  # every table of the registry (workflow/rules/report.smk)
        files.write_csv(out[name], tables[name])
    files.write_text(out.summary_md, words.summary_md(found, cfg, tables["environment"], tables))
    pages = words.rst_pages(tables, found, cfg)
    for key in out.keys():  # the workflow page and one page per figure of the registry
        if key.startswith("rst_"):
            files.write_text(out[key], pages[key.removeprefix("rst_")])
    for host, sentences in found.items():
        for s in sentences:
            log(f"{host or 'note'}: {s}")
