"""The tables every comparison of the report rests on (pandas + numpy): numbers with their 95 %
intervals, no words (facts.py says which of them the report states); the copies and the DataLoader
are copies.py's.

Every table is per place (measure/machines.py: a machine, or an accelerator beside the cpu it is
compared with) and per network (the `model` column). Only usable runs count (status ok and a timing
verdict in `quality.use`). Each derived number is computed again on every replicate of the medians it
is made of (collect/uncertainty.py); a ratio whose interval contains 1 is `same_within_noise`.
"""

import math

import numpy as np
import pandas as pd

from mnistbench.collect import uncertainty
from mnistbench.collect.aggregate import summarise, usable
from mnistbench.config import networks
from mnistbench.config.catalog import MODES
from mnistbench.config.devices import CPU, cpu_first
from mnistbench.measure import machines

REFERENCE_MODES = ("seed", "module", "manual")  # the mode ladder is compared with the first present
PLACE_KEYS = ["place", "device", "model", "mode", "batch_size"]  # a combination as the analysis compares it
FIT_KEYS = ["place", "device", "model", "mode"]  # one line a + b·batch per combination of these
NAN = np.full(uncertainty.N_BOOT, math.nan)
# An accelerator against the cpu, as the crossover and the map judge it.
FASTER, SLOWER = "faster at every batch size", "slower at every batch size"
OVERTAKES, FALLS_BEHIND = "slower below, faster above", "faster below, slower above"


# --- the replicates -----------------------------------------------------------------------------


def placed(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with the place each is compared at (machines.places; without machines, its host)."""
    if "place" in runs.columns:
        return runs
    return machines.places(runs) if "machine" in runs.columns else runs.assign(place=runs.get("host"))


def of_place(df: pd.DataFrame, runs: pd.DataFrame, place) -> pd.DataFrame:
    """The rows of a table kept per host (the profile, the environment, the copy bandwidth) that
    are `place`'s: those of the hosts and devices its runs ran on; where it pools identical hosts,
    the first one's (natural order) that has rows on each device, as identical hardware answers
    once. A place is no host: a pooled one is named for its machine, so its rows are never found
    by comparing a host with its name."""
    if df.empty or "host" not in df.columns:
        return df.iloc[0:0]
    here = runs.loc[runs["place"] == place, ["host", "device"]].drop_duplicates()
    rows = df.merge(here, on=["host", "device"])
    if rows.empty:
        return rows
    first = rows.groupby("device")["host"].transform(lambda hosts: machines.by_name(hosts)[0])
    return rows[rows["host"] == first].reset_index(drop=True)


def replicates(runs: pd.DataFrame, use=("ok",), stream: str = "") -> dict:
    """{(place, device, model, mode, batch_size): drawn runs} of every combination's usable runs."""
    return uncertainty.replicates(usable(placed(runs), use), PLACE_KEYS, stream=stream)


def reps_of(reps: dict, place, device, model, mode, batch_size) -> np.ndarray:
    """Replicates of one combination's median step time (all NaN where it has none)."""
    drawn = reps.get((place, device, model, mode, int(batch_size)))
    return uncertainty.medians(drawn) if drawn is not None else NAN


def with_interval(name: str, point, reps) -> dict:
    """{name: point, name_lo, name_hi}: a number and the interval of its replicates."""
    lo, hi = uncertainty.interval(reps)
    return {name: point, f"{name}_lo": lo, f"{name}_hi": hi}


def add_interval_columns(df: pd.DataFrame, column: str, values: list) -> None:
    """Add the interval columns `<column>_lo`, `<column>_hi` from one replicate array per row."""
    pairs = [uncertainty.interval(v) for v in values]
    df[f"{column}_lo"] = [p[0] for p in pairs]
    df[f"{column}_hi"] = [p[1] for p in pairs]


def by_size(runs: pd.DataFrame) -> list:
    """The networks of these runs, smallest first (by FLOP per training sample, then name)."""
    size = pd.Series(network_size(runs))
    return sorted(size.index, key=lambda m: (np.nan_to_num(size[m], nan=np.inf), m))


def network_size(runs: pd.DataFrame, column: str = "flop_per_sample") -> dict:
    """{network: its FLOP per training sample (or `column`: its parameters), NaN where no run recorded it}."""
    size = pd.to_numeric(runs.get(column, pd.Series(np.nan, index=runs.index)), errors="coerce")
    return size.groupby(runs["model"]).max().to_dict() if len(runs) else {}


def medians(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """Median step time (s) per place x device x network x mode x batch size over the usable repeats."""
    return usable(placed(runs), use).groupby(PLACE_KEYS, as_index=False)["step_time_median_s"].median()


def rates(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """medians() with each combination's samples/s: its batch size over its median step time, the
    one definition every table, sentence and figure uses (a median of per-run rates would differ
    from it, and from its interval, wherever the repeats are even in number)."""
    med = medians(runs, use)
    return med.assign(samples_per_s=med["batch_size"] / med["step_time_median_s"])


def own(df: pd.DataFrame, label: str = "") -> pd.DataFrame:
    """This run's rows (or, with a label, that reference machine's) of a table that may hold both."""
    return df[df["reference"].fillna("") == label] if "reference" in df.columns else df


def yes(v) -> bool:
    """A True in a table column that may also hold NaN (no interval), or 'True' read from a CSV."""
    return v is True or isinstance(v, np.bool_) and bool(v) or v == "True"


# --- the fit ------------------------------------------------------------------------------------


def fit_replicates(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> dict:
    """{(place, device, model, mode): (a, b) replicates in seconds}: the fit made again on every
    replicate's drawn runs (NaN where a batch size has fewer than two usable runs)."""
    runs = placed(runs)
    reps = replicates(runs, use) if reps is None else reps
    out, same_x = {}, {}
    for key, g in usable(runs, use).groupby(FIT_KEYS, sort=True):
        sizes = sorted(set(g["batch_size"]))
        if len(sizes) < 2:
            continue
        parts = [reps[(*key, int(b))] for b in sizes]
        Y = np.concatenate(parts, axis=1)
        x = np.concatenate([np.full(p.shape[1], float(b)) for b, p in zip(sizes, parts)])
        if np.isnan(Y).any():
            out[key] = (NAN, NAN)
        else:
            same_x.setdefault(tuple(x), []).append((key, Y))
    # The fits of every combination with the same batch sizes and runs go in one call (fit_many
    # works row by row): many machines at the cost of a few calls instead of one per machine.
    for x, fits_ in same_x.items():
        a, b = uncertainty.fit_many(np.array(x), np.concatenate([Y for _, Y in fits_]))
        start = 0
        for key, Y in fits_:
            out[key] = (a[start : start + len(Y)], b[start : start + len(Y)])
            start += len(Y)
    return out


def fits(runs: pd.DataFrame, use=("ok",), fit_reps: dict | None = None, gflops: dict | None = None) -> pd.DataFrame:
    """Per place x device x network x mode, step time = a + b · batch size (uncertainty.fit_line): a
    (µs, the fixed cost of a step: Python, dispatch, kernel launches, syncs), b (µs, the cost of one
    more sample), their intervals and the fit's quality; `trusted`: whether a sentence may quote it.
    Beside b, the network's FLOP per sample and, on the cpu, its arithmetic limit on one core
    (`limit_us`, at the place's measured FMA rate, `gflops`: {place: GFLOP/s}). Combinations without
    a usable run get a row with a note, not a fit."""
    runs = placed(runs)
    fit_reps = fit_replicates(runs, use) if fit_reps is None else fit_reps
    flop, gflops = network_size(runs), gflops or {}
    rows = []
    for key, g in runs.groupby(FIT_KEYS, sort=True):
        place, device, model, mode = key
        ok = usable(g, use)
        f = uncertainty.fit_line(ok["batch_size"], ok["step_time_median_s"])
        if ok.empty:
            why = sorted(set(g["status"]) - {"ok"}) or sorted(set(g["quality"].astype(str)))
            f["note"] = f"no successful run with a usable timing (status or timing: {', '.join(why)})"
        a, b = f.pop("a"), f.pop("b")
        share = pd.to_numeric(g.get("input_nonzero_share", pd.Series(dtype=float)), errors="coerce").median()
        ra, rb = fit_reps.get(key, (NAN, NAN))
        with np.errstate(divide="ignore", invalid="ignore"):  # a replicate with b <= 0 never ends
            bound = np.where(rb > 0, ra / rb, np.where(ra > 0, math.inf, math.nan))
        row = dict(zip(FIT_KEYS, key), device_name=g["device_name"].iloc[0], flop_per_sample=flop.get(model, math.nan))
        row.update(limit_us=limit_us(flop.get(model, math.nan), gflops.get(place)) if device == CPU else math.nan)
        row.update(
            input_nonzero_share=share, effective_flop_per_sample=effective_flop(model, row["flop_per_sample"], share)
        )
        row.update(with_interval("a_us", a * 1e6, ra * 1e6), **with_interval("b_us", b * 1e6, rb * 1e6))
        # Below this batch size the fixed cost is more than half of a step.
        row.update(with_interval("overhead_bound_below", a / b if b > 0 else math.inf if a > 0 else math.nan, bound))
        rows.append(dict(row, **f))
    cols = [*FIT_KEYS[:2], "device_name", "model", "mode", "flop_per_sample", "limit_us", "input_nonzero_share"]
    cols += ["effective_flop_per_sample", "a_us", "a_us_lo", "a_us_hi", "b_us", "b_us_lo", "b_us_hi"]
    cols += ["overhead_bound_below", "overhead_bound_below_lo", "overhead_bound_below_hi", "n_points"]
    cols += ["n_batch_sizes", "batch_sizes", "rel_rmse", "max_rel_err", "quality", "note"]
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
    """A network's arithmetic limit on one core at its peak `gflops`, µs per sample (NaN if either is unknown)."""
    try:
        return float(flop_per_sample) / (float(gflops) * 1e3)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def place_gflops(runs: pd.DataFrame, env: pd.DataFrame) -> dict:
    """{place: its cpu's measured peak GFLOP/s per core}, from the hosts its cpu runs ran on."""
    if "fma_gflops" not in env.columns or runs.empty:
        return {}
    rate = pd.to_numeric(env[env["device"] == CPU].set_index("host")["fma_gflops"], errors="coerce").dropna()
    out = {}
    for place, g in runs[runs["device"] == CPU].groupby("place"):
        hosts = [h for h in g["host"].unique() if h in rate.index]
        if hosts:
            out[place] = float(rate[hosts[0]])
    return out


# --- accelerators against the cpu ---------------------------------------------------------------


def crossover(fit: pd.DataFrame, runs: pd.DataFrame, use=("ok",), fit_reps: dict | None = None) -> pd.DataFrame:
    """Per accelerator x network x mode with a cpu run of the same network and mode at its place:
    where the fitted lines cross, with its interval over the fits' replicates (`verdict_share`: the
    share of replicates with the same verdict), and what the measured points say."""
    runs = placed(runs)
    fit_reps = fit_replicates(runs, use) if fit_reps is None else fit_reps
    med = medians(runs, use)
    cpu = fit[fit["device"] == CPU].set_index(["place", "model", "mode"])
    rows = []
    for acc in fit[fit["device"] != CPU].to_dict("records"):
        place, model, mode = acc["place"], acc["model"], acc["mode"]
        row = dict(place=place, device=acc["device"], model=model, mode=mode, a_us=acc["a_us"], b_us=acc["b_us"])
        if (place, model, mode) not in cpu.index:
            rows.append(dict(row, note=f"no cpu run of {model} {mode} on {place} to compare with"))
            continue
        c = cpu.loc[(place, model, mode)]
        row.update(cpu_a_us=c["a_us"], cpu_b_us=c["b_us"])
        row.update(fit_crossover(acc["a_us"], acc["b_us"], c["a_us"], c["b_us"]))
        acc_ab, cpu_ab = fit_reps.get((place, acc["device"], model, mode)), fit_reps.get((place, CPU, model, mode))
        if acc_ab is not None and cpu_ab is not None:
            row.update(crossover_interval(*acc_ab, *cpu_ab, row["verdict"]))
        row.update(measured_crossover(med, row))
        rows.append(row)
    cols = ["place", "device", "model", "mode", "verdict", "crossover_batch_size", "crossover_batch_size_lo"]
    cols += ["crossover_batch_size_hi", "verdict_share", "measured_last_slower", "measured_first_faster"]
    cols += ["fit_agrees", "a_us", "b_us", "cpu_a_us", "cpu_b_us", "note"]
    return pd.DataFrame(rows, columns=cols)


def verdicts(da, db):
    """An accelerator's verdict over the cpu from its extra fixed cost `da` and saving per sample `db`."""
    crossing = np.where(da > 0, OVERTAKES, FALLS_BEHIND)
    return np.where((da <= 0) & (db >= 0), FASTER, np.where((da >= 0) & (db <= 0), SLOWER, crossing))


def fit_crossover(a, b, ca, cb) -> dict:
    if not all(np.isfinite([a, b, ca, cb])):
        return dict(verdict="no fit", crossover_batch_size=math.nan)
    da, db = a - ca, cb - b  # accelerator's extra fixed cost; its saving per sample
    verdict = str(verdicts(da, db))
    return dict(verdict=verdict, crossover_batch_size=da / db if verdict in (OVERTAKES, FALLS_BEHIND) else math.nan)


def crossover_interval(a, b, ca, cb, verdict) -> dict:
    """The crossover on every replicate of the two fits: a replicate where the accelerator is
    faster at every batch size crosses at 0, one where it is slower at every size never (inf)."""
    da, db = a - ca, cb - b
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where((da > 0) & (db > 0), da / db, np.where(da >= 0, math.inf, 0.0))
    cross[np.isnan(da) | np.isnan(db)] = math.nan
    share = float(np.mean(verdicts(da, db) == verdict)) if not np.isnan(cross).any() else math.nan
    lo, hi = uncertainty.interval(cross)
    return dict(crossover_batch_size_lo=lo, crossover_batch_size_hi=hi, verdict_share=share)


def measured_crossover(med, row) -> dict:
    """What the measured points say: the last batch size at which the accelerator was slower, the
    first at which it was faster, and whether the fit predicts the faster device at every one."""
    key = (med["place"] == row["place"]) & (med["model"] == row["model"]) & (med["mode"] == row["mode"])
    acc, cpu = med[key & (med["device"] == row["device"])], med[key & (med["device"] == CPU)]
    both = acc.merge(cpu, on="batch_size", suffixes=("", "_cpu")).sort_values("batch_size")
    if both.empty:
        return dict(note="no batch size ran on both devices", fit_agrees=math.nan)
    faster = (both["step_time_median_s"] < both["step_time_median_s_cpu"]).to_numpy()
    sizes = both["batch_size"].to_numpy()
    out = dict(
        measured_last_slower=sizes[~faster].max() if (~faster).any() else math.nan,
        measured_first_faster=sizes[faster].min() if faster.any() else math.nan,
    )
    a, b, ca, cb = (row.get(k, math.nan) for k in ("a_us", "b_us", "cpu_a_us", "cpu_b_us"))
    fitted = np.isfinite([a, b, ca, cb]).all()
    out["fit_agrees"] = bool((((a + b * sizes) < (ca + cb * sizes)) == faster).all()) if fitted else math.nan
    if out["fit_agrees"] is False:
        out["note"] = "the fit and the measured points disagree on which device is faster at some batch size"
    return out


def reference_mode(modes) -> str:
    present = set(modes)
    return next((m for m in REFERENCE_MODES if m in present), sorted(present)[0])


def best_modes(med: pd.DataFrame) -> pd.DataFrame:
    """The fastest mode of each place x device x network x batch size."""
    return med.loc[med.groupby(["place", "device", "model", "batch_size"])["step_time_median_s"].idxmin()]


def speedup(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> pd.DataFrame:
    """speedup = baseline step time / step time, at the same place, network and batch size, with
    its interval and whether that contains 1 (`same_within_noise`: the two cannot be ranked).

    kind 'device': each accelerator over the cpu, same mode. kind 'mode': each mode over the
    network's reference mode (seed, the beginner's code, where it ran), same device. kind 'best':
    each accelerator's fastest mode over the cpu's fastest mode.
    """
    runs = placed(runs)
    reps = replicates(runs, use) if reps is None else reps
    med = medians(runs, use)
    cols = ["kind", "place", "device", "model", "mode", "batch_size", "baseline_device", "baseline_mode"]
    cols += ["step_time_s", "baseline_step_time_s", "speedup", "speedup_lo", "speedup_hi", "same_within_noise"]
    if med.empty:
        return pd.DataFrame(columns=cols)
    base = {"step_time_median_s": "baseline_step_time_s"}
    cpu = med[med["device"] == CPU].rename(columns=base)
    dev = med[med["device"] != CPU].merge(cpu.drop(columns="device"), on=["place", "model", "mode", "batch_size"])
    dev = dev.assign(kind="device", baseline_device=CPU, baseline_mode=dev["mode"])
    refs = med.groupby("model")["mode"].agg(reference_mode).rename("baseline_mode").reset_index()
    ref = med.merge(refs, left_on=["model", "mode"], right_on=["model", "baseline_mode"]).drop(columns="mode")
    lad = med.merge(ref.rename(columns=base), on=["place", "device", "model", "batch_size"])
    lad = lad.assign(kind="mode", baseline_device=lad["device"])
    fastest = best_modes(med)
    top_cpu = fastest[fastest["device"] == CPU].rename(columns=dict(base, mode="baseline_mode"))
    top = fastest[fastest["device"] != CPU].merge(top_cpu.drop(columns="device"), on=["place", "model", "batch_size"])
    top = top.assign(kind="best", baseline_device=CPU)
    out = pd.concat([dev, lad, top], ignore_index=True).rename(columns={"step_time_median_s": "step_time_s"})
    out["speedup"] = out["baseline_step_time_s"] / out["step_time_s"]
    ratios = [
        reps_of(reps, r["place"], r["baseline_device"], r["model"], r["baseline_mode"], r["batch_size"])
        / reps_of(reps, r["place"], r["device"], r["model"], r["mode"], r["batch_size"])
        for r in out.to_dict("records")
    ]
    add_interval_columns(out, "speedup", ratios)
    out["same_within_noise"] = [uncertainty.same_within_noise(r) for r in ratios]
    return out[cols].sort_values(["kind", "place", "device", "model", "mode", "batch_size"], ignore_index=True)


# --- the crossover map: where the accelerator wins, per network -----------------------------------


def first_winning(faster: np.ndarray, sizes) -> np.ndarray:
    """The smallest batch size from which the accelerator is faster at every larger size of the
    grid (rows of `faster`: batch sizes, ascending; columns: replicates); inf where it is not
    faster at the largest."""
    wins_from = np.full(faster.shape[1:], math.inf)
    still = np.ones(faster.shape[1:], dtype=bool)
    for i in range(len(sizes) - 1, -1, -1):
        still &= faster[i]
        wins_from = np.where(still, float(sizes[i]), wins_from)
    return wins_from


def grid_interval(values: np.ndarray) -> tuple[float, float]:
    """The central 95 % of replicates that take grid values (batch sizes, or inf): values that
    occur, not interpolated between them."""
    tail = 100 * (1 - uncertainty.LEVEL) / 2
    with np.errstate(invalid="ignore"):  # inf (never) is a value here; numpy's interpolation step warns
        lo, hi = np.percentile(np.asarray(values, dtype=float), [tail, 100 - tail], method="inverted_cdf")
    return float(lo), float(hi)


def network_map(runs: pd.DataFrame, use=("ok",), reps: dict | None = None) -> pd.DataFrame:
    """Per place x device x network x batch size: the device's fastest mode and its samples/s; on
    an accelerator also the cpu's fastest, its factor over it (`over_cpu_best`) and, per place x
    accelerator x network, the batch size from which the accelerator's best mode beats the cpu's
    best at every larger batch size of the grid (`wins_from`; inf: at no batch size of the grid).
    The intervals are those of the two fastest modes' own replicates, as in the ladder."""
    runs = placed(runs)
    reps = replicates(runs, use) if reps is None else reps
    top = best_modes(medians(runs, use))
    flop, params = network_size(runs), network_size(runs, "parameters")
    cols = ["place", "device", "model", "flop_per_sample", "parameters", "batch_size", "best_mode"]
    cols += ["samples_per_s", "samples_per_s_lo", "samples_per_s_hi", "cpu_best_mode", "over_cpu_best"]
    cols += ["over_cpu_best_lo", "over_cpu_best_hi", "wins_from", "wins_from_lo", "wins_from_hi", "verdict"]
    rows = []
    for place in machines.by_name(top["place"]):
        for model in by_size(runs[runs["place"] == place]):
            g = top[(top["place"] == place) & (top["model"] == model)]
            cpu = g[g["device"] == CPU].set_index("batch_size")
            for device in cpu_first(g["device"]):
                mine, ratio = [], {}
                for r in g[g["device"] == device].sort_values("batch_size").to_dict("records"):
                    b, step = r["batch_size"], reps_of(reps, place, device, model, r["mode"], r["batch_size"])
                    row = dict(place=place, device=device, model=model, flop_per_sample=flop.get(model, math.nan))
                    row.update(parameters=params.get(model, math.nan), batch_size=b, best_mode=r["mode"])
                    row.update(with_interval("samples_per_s", b / r["step_time_median_s"], b / step))
                    if device != CPU and b in cpu.index:
                        c = cpu.loc[b]
                        ratio[b] = reps_of(reps, place, CPU, model, c["mode"], b) / step
                        over = c["step_time_median_s"] / r["step_time_median_s"]
                        row.update(cpu_best_mode=c["mode"], **with_interval("over_cpu_best", over, ratio[b]))
                    mine.append(row)
                if ratio:
                    both = sorted(ratio)
                    point = first_winning(
                        np.array([[r["over_cpu_best"] > 1] for r in mine if r["batch_size"] in ratio]), both
                    )[0]
                    drawn = np.stack([ratio[b] for b in both])
                    lo, hi = (
                        (math.nan, math.nan) if np.isnan(drawn).any() else grid_interval(first_winning(drawn > 1, both))
                    )
                    verdict = FASTER if point == both[0] else SLOWER if math.isinf(point) else OVERTAKES
                    for r in mine:
                        r.update(wins_from=point, wins_from_lo=lo, wins_from_hi=hi, verdict=verdict)
                rows += mine
    return pd.DataFrame(rows, columns=cols)


# --- the ladder ---------------------------------------------------------------------------------


def ladder(runs: pd.DataFrame, use=("ok",), reps: dict | None = None, gflops: dict | None = None) -> pd.DataFrame:
    """Every mode's samples/s (rates()) per place x device x network at both ends of that device's
    grid, in the ladder's order (`order`: its index in catalog.MODES), and its factor over the beginner's
    code (`seed`) at the same batch size (NaN where seed did not run), each with its interval;
    `same_as_best`: the interval of the fastest mode's samples/s over this one's contains 1. An
    accelerator's fastest mode also carries its factor over the cpu's fastest (`over_cpu_best`). On the
    cpu, `limit_samples_per_s`: the network's dense arithmetic limit on one core (fits' limit_us as
    samples/s; `gflops`: {place: GFLOP/s}), which a mode that skips arithmetic (`sparse`) can pass."""
    runs = placed(runs)
    reps = replicates(runs, use) if reps is None else reps
    flop, gflops = network_size(runs), gflops or {}
    cols = ["place", "device", "model", "point", "batch_size", "order", "mode", "samples_per_s", "samples_per_s_lo"]
    cols += ["samples_per_s_hi", "over_seed", "over_seed_lo", "over_seed_hi", "same_as_best"]
    cols += ["over_cpu_best", "over_cpu_best_lo", "over_cpu_best_hi", "limit_samples_per_s"]
    rated = dict(list(rates(runs, use).groupby(["place", "device", "model", "batch_size"])))
    rows = []
    for place in machines.by_name(runs["place"]):
        h = runs[runs["place"] == place]
        for device in cpu_first(h["device"]):
            sizes = sorted(set(h[h["device"] == device]["batch_size"]))
            for model in by_size(h[h["device"] == device]):
                for point, b in [("smallest", sizes[0]), ("largest", sizes[-1])][: len(sizes)]:  # one size, one point
                    here = rated.get((place, device, model, b), pd.DataFrame(columns=["mode", "samples_per_s"]))
                    rate = dict(zip(here["mode"], here["samples_per_s"]))
                    step = {m: reps_of(reps, place, device, model, m, b) for m in rate}
                    top = max(rate, key=rate.get) if rate else None
                    limit = 1e6 / limit_us(flop.get(model, math.nan), gflops.get(place)) if device == CPU else math.nan
                    seed_rate, seed = rate.get("seed", math.nan), step.get("seed", NAN)
                    for mode in (m for m in MODES if m in rate):
                        row = dict(place=place, device=device, model=model, point=point, batch_size=b)
                        row.update(order=list(MODES).index(mode), mode=mode)
                        row.update(with_interval("samples_per_s", rate[mode], b / step[mode]))
                        row.update(with_interval("over_seed", rate[mode] / seed_rate, seed / step[mode]))
                        row["same_as_best"] = uncertainty.same_within_noise(step[mode] / step[top])
                        rows.append(dict(row, limit_samples_per_s=limit))
    out = pd.DataFrame(rows, columns=cols)
    over_cpu_best(out, reps)
    return out


def over_cpu_best(lad: pd.DataFrame, reps: dict) -> None:
    """On each accelerator's fastest mode, `over_cpu_best`: its samples/s over the cpu's fastest there."""
    for c in ("over_cpu_best", "over_cpu_best_lo", "over_cpu_best_hi"):
        lad[c] = math.nan
    top = lad.loc[lad.groupby(["place", "device", "model", "batch_size"])["samples_per_s"].idxmax()].reset_index()
    cpu = top[top["device"] == CPU][["place", "model", "batch_size", "mode", "samples_per_s"]]
    pairs = top[top["device"] != CPU].merge(cpu, on=["place", "model", "batch_size"], suffixes=("", "_cpu"))
    for a in pairs.to_dict("records"):
        cpu_step = reps_of(reps, a["place"], CPU, a["model"], a["mode_cpu"], a["batch_size"])
        step = reps_of(reps, a["place"], a["device"], a["model"], a["mode"], a["batch_size"])
        over = with_interval("over_cpu_best", a["samples_per_s"] / a["samples_per_s_cpu"], cpu_step / step)
        lad.loc[a["index"], list(over)] = list(over.values())


# --- what the analysis set aside ----------------------------------------------------------------


def set_aside(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """Runs kept out of the analysis (a failed status, or a timing verdict not in `use`), and why."""
    cols = ["host", "machine", "device", "model", "mode", "batch_size", "repeat", "status", "quality", "reason"]
    out = runs[~runs.index.isin(usable(runs, use).index)]
    out = out.reindex(columns=list(dict.fromkeys([*out.columns, "message", "quality", "quality_note"])))
    notes = out["quality_note"].astype(object).fillna("")
    out["reason"] = [
        f"{s}: {m}" if s != "ok" else f"timing {q}: {n}"
        for s, m, q, n in zip(out["status"], out["message"], out["quality"], notes)
    ]
    return out.reindex(columns=cols).reset_index(drop=True)


def disagreeing(runs: pd.DataFrame, use=("ok",), limit=1.25) -> pd.DataFrame:
    """Combinations whose usable repeats' median step times differ by more than `limit`."""
    s = summarise(runs, use, limit, intervals=False)  # the spread only: no replicates drawn
    keys = ["host", "machine", "device", "model", "mode", "batch_size", "n_ok", "repeat_spread"]
    return s[s["repeats_agree"].astype(str) == "False"][keys].reset_index(drop=True)
