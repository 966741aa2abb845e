"""The numbers of analysis.py in plain words: one sentence per fact, said once, used by both
results/summary.md and the report (its workflow page and the text beside each figure)."""

import re

import numpy as np
import pandas as pd
from matplotlib.ticker import EngFormatter

from mnistbench.collect.aggregate import kept_over_all, succeeded
from mnistbench.config import catalog
from mnistbench.config.devices import CPU, cpu_first, kind
from mnistbench.measure.machines import by_name, natural
from mnistbench.measure.slowed import SLOWED

# --- numbers as words ---------------------------------------------------------------------------
ENG = EngFormatter(sep=" ")  # 12.3 k, 3.57 M: SI prefixes, matplotlib's rule for choosing them


def us(x) -> str:
    """A duration given in µs, readable: '0.42 µs', '35 µs', '1.2 ms'."""
    if not np.isfinite(x):
        return "n/a"
    if x >= 1000:
        return f"{x / 1000:.3g} ms"
    return f"{x:.2g} µs" if x < 10 else f"{x:.0f} µs"


def pct(x, digits=0) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:.{digits}f} %"


def bs(x) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:,.0f}"


def rate(x) -> str:
    """Samples per second to 3 significant digits, SI prefix: '850', '12.3 k', '3.57 M'."""
    if not np.isfinite(x):
        return "n/a"
    x = float(f"{x:.3g}")  # rounded first, so that 999.6 reads '1 k', not '1e+03'
    return ENG(x) if x >= 1 else f"{x:g}"  # below 1: '0.5', not '500 m'


def times(x) -> str:
    """A factor: '18×', '2.8×', '0.31×'."""
    return "n/a" if not np.isfinite(x) else f"{x:.2g}×" if x < 10 else f"{x:.0f}×"


def _unit(text: str) -> str:
    """What follows the number: '218×' -> '×', '1.2 M' -> ' M', '35 µs' -> ' µs', '926' -> ''."""
    return re.sub(r"^[-0-9.,e+]+", "", text)


def ci(lo, hi, fmt) -> str:
    """The 95 % interval in words: ' (218–245×)'; where a number has none (one usable run),
    says so. fmt formats one number (times, rate, us, bs, pct)."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return " (no interval: one usable run)"
    low, high = fmt(lo), fmt(hi) if np.isfinite(hi) else "∞"
    if _unit(low) == _unit(high):  # '218–245×', '4.58–4.94 k': the unit once
        low = low.removesuffix(_unit(low))
    return f" ({low}–{high})"


def with_ci(x, lo, hi, fmt) -> str:
    """'231× (218–245×)': a number and its 95 % interval."""
    return fmt(x) + ci(lo, hi, fmt)


def yes(v) -> bool:
    """A True in a table column that may also hold NaN (no interval), or 'True' read from a CSV."""
    return v is True or isinstance(v, np.bool_) and bool(v) or v == "True"


def share(r) -> str:
    """The DataLoader's extra share of a step, in words; a negative difference is noise."""
    if not np.isfinite(r["extra_us"]):
        return "n/a"
    if r["extra_us"] < 0:
        return "nothing measurable (it timed faster than module)"
    return f"{pct(r['extra_share'])}{ci(r.get('extra_share_lo', np.nan), r.get('extra_share_hi', np.nan), pct)}, {us(r['extra_us'])}"


# --- the headline -------------------------------------------------------------------------------


def best(ladder: pd.DataFrame, host, device, model, point) -> pd.Series | None:
    g = ladder[
        (ladder["host"] == host)
        & (ladder["device"] == device)
        & (ladder["model"] == model)
        & (ladder["point"] == point)
    ]
    return None if g.empty else g.loc[g["samples_per_s"].idxmax()]


def mode_rate(r, lad) -> str:
    """'kernel, 1.04 M samples/s (0.98–1.1 M)', naming the modes it cannot be told apart from."""
    ties = tied(r, lad)
    also = f" ({', '.join(ties)} the same within noise)" if ties else ""
    return f"{r['mode']}{also}, {with_ci(r['samples_per_s'], r['samples_per_s_lo'], r['samples_per_s_hi'], rate)} samples/s"


def tied(r, lad) -> list[str]:
    """The other modes at r's host, device, network and batch size whose samples/s cannot be told
    apart from the fastest's (set by analysis.ladder)."""
    g = lad[
        (lad["host"] == r["host"])
        & (lad["device"] == r["device"])
        & (lad["model"] == r["model"])
        & (lad["point"] == r["point"])
    ]
    return [m for m, same in zip(g["mode"], g["same_as_best"]) if yes(same) and m != r["mode"]]


def over_seed(r) -> str:
    return with_ci(r["over_seed"], r["over_seed_lo"], r["over_seed_hi"], times)


def networks_of(lad: pd.DataFrame) -> list:
    """The networks of a table in the order the analysis gives them (smallest first)."""
    return list(dict.fromkeys(lad["model"]))


def own(df: pd.DataFrame, label: str = "") -> pd.DataFrame:
    """The rows of this run (or, with a label, of that reference machine) of a table that may hold
    reference machines' rows beside this run's (analysis.beside)."""
    return df[df["reference"].fillna("") == label] if "reference" in df.columns else df


def headline(tables: dict, label: str = "") -> list[str]:
    """The headline of this run (or, with a label, of that reference machine): with one machine
    (place) its own (place_headline); with several, the overview across them (overview), at
    most about MAX_HEADLINE bullets however many machines there are."""
    places = by_name(own(tables["ladder"], label)["host"])
    return overview(tables, label) if len(places) > 1 else place_headline(tables, label)


def intervals(lad: pd.DataFrame) -> pd.DataFrame:
    """A ladder with its interval columns, NaN where it has none (e.g. built by hand)."""
    if "same_as_best" in lad.columns:
        return lad
    lad = lad.assign(**{c: np.nan for c in ("samples_per_s_lo", "samples_per_s_hi", "over_seed_lo")})
    return lad.assign(over_seed_hi=np.nan, same_as_best=np.nan)


def place_headline(tables: dict, label: str = "", hosts=None) -> list[str]:
    """Per host (of `hosts`, else every one), device and network: the beginner's code at the
    smallest batch, the best mode there and at the largest batch, with the factors; where an
    accelerator ran, where it overtakes the cpu. Of this run, or with a label of that reference
    machine."""
    lad, cross = intervals(own(tables["ladder"], label)), own(tables["crossover"], label)
    out = []
    for host in by_name(lad["host"]) if hosts is None else hosts:
        h = lad[lad["host"] == host]
        for device in cpu_first(h["device"]):
            for model in networks_of(h[h["device"] == device]):
                small, large = best(lad, host, device, model, "smallest"), best(lad, host, device, model, "largest")
                g = h[(h["device"] == device) & (h["model"] == model) & (h["point"] == "smallest")]
                seed = g[g["mode"] == "seed"]
                words = [f"On {host}, {device}, {model}:"]
                if small is None:  # every run at the smallest batch was left out (e.g. all noisy)
                    words.append("no run at its smallest batch size is usable (see what was left out).")
                elif len(seed):
                    s = seed.iloc[0]
                    words.append(
                        f"the beginner's code trains {with_ci(s['samples_per_s'], s['samples_per_s_lo'], s['samples_per_s_hi'], rate)} "
                        f"samples/s at batch {small['batch_size']}; the best mode there, {mode_rate(small, lad)}: "
                        f"{over_seed(small)} the beginner's code."
                    )
                else:
                    words.append(
                        f"the best mode at batch {small['batch_size']} is {mode_rate(small, lad)} (the beginner's code did not run)."
                    )
                if large is not None:
                    factor = f": {over_seed(large)} the beginner's code at that batch" if len(seed) else ""
                    words.append(f"At batch {large['batch_size']} the best is {mode_rate(large, lad)}{factor}.")
                out.append(" ".join(words))
                if device == CPU and len(seed):
                    out += limit(tables, host, model, seed.iloc[0], small)
                if device == CPU:
                    out += sparse_limit(tables, lad, host, model)
        for device in [d for d in cpu_first(h["device"]) if d != CPU]:
            for model in networks_of(h[h["device"] == device]):
                out += accelerator_vs_host(tables["speedup"], cross, host, device, model)
    return out


MAX_HEADLINE = 10  # bullets of a headline across machines, however many machines


def ranked(lad: pd.DataFrame, device_kind: str, model, point: str) -> pd.DataFrame:
    """Each place's best mode at a ladder point (smallest or largest batch) on a device kind and
    network, fastest first (places of equal speed in their natural order). `who` names the place,
    and its device where a place has several of the kind (cuda:1)."""
    g = lad[(lad["device"].map(kind) == device_kind) & (lad["model"] == model) & (lad["point"] == point)]
    g = g[g["samples_per_s"].notna()]
    if g.empty:
        return g.assign(who=pd.Series(dtype=str))
    top = g.loc[g.groupby(["host", "device"])["samples_per_s"].idxmax()]
    top = top.assign(who=[h if d == device_kind else f"{h} ({d})" for h, d in zip(top["host"], top["device"])])
    top = top.assign(_name=top["who"].map(natural)).sort_values("_name")
    return top.sort_values("samples_per_s", ascending=False, kind="stable").drop(columns="_name")


def spread(fast, slow) -> str:
    """How far apart the fastest and the slowest place are: their ratio, with the bounds the two
    intervals allow (wider than a replicate's interval would be, never narrower)."""
    lo = fast.get("samples_per_s_lo", np.nan) / slow.get("samples_per_s_hi", np.nan)
    hi = fast.get("samples_per_s_hi", np.nan) / slow.get("samples_per_s_lo", np.nan)
    return with_ci(fast["samples_per_s"] / slow["samples_per_s"], lo, hi, times)


def at_point(lad, r) -> str:
    return f"{r['who']}, {mode_rate(r, lad)}"


def overview(tables: dict, label: str = "") -> list[str]:
    """The headline across machines: per device kind and network, the fastest and the slowest
    place at the smallest and the largest batch size (best mode, with intervals) and how far
    apart they are; per accelerator kind, the range of its best mode over its place's cpu.
    At most MAX_HEADLINE bullets; every place's own headline is in its section."""
    lad = intervals(own(tables["ladder"], label))
    places = by_name(lad["host"])
    kinds = list(dict.fromkeys(kind(d) for d in cpu_first(lad["device"])))
    counts = ", ".join(f"{k}: {lad.loc[lad['device'].map(kind) == k, 'host'].nunique()}" for k in kinds)
    out = [
        f"{len(places)} machines ({counts}): "
        "the fastest and the slowest here, every machine ranked under Machines ranked, each machine's "
        "own headline and findings in its section."
    ]
    for k in kinds:
        for model in networks_of(lad[lad["device"].map(kind) == k]):
            words = []
            for point in ("smallest", "largest"):
                r = ranked(lad, k, model, point)
                if r.empty:
                    continue
                fast, slow = r.iloc[0], r.iloc[-1]
                b = fast["batch_size"]
                if len(r) == 1:
                    words.append(f"{'At' if words else 'at'} batch {b} only {at_point(lad, fast)}.")
                    continue
                words.append(
                    f"{'At' if words else 'at'} batch {b} the fastest is {at_point(lad, fast)}; the slowest "
                    f"{at_point(lad, slow)}: {spread(fast, slow)} apart."
                )
            n = lad.loc[(lad["device"].map(kind) == k) & (lad["model"] == model), "host"].nunique()
            if words:
                out.append(f"{k}, {model}, {n} machines: " + " ".join(words))
    spd = own(tables["speedup"], label) if "reference" in tables["speedup"].columns else tables["speedup"]
    best_rows = spd[(spd["kind"] == "best") & spd["host"].isin(places)] if len(spd) else spd
    for k in [k for k in kinds if k != CPU]:
        for model in networks_of(best_rows[best_rows["device"].map(kind) == k]) if len(best_rows) else []:
            g = best_rows[(best_rows["device"].map(kind) == k) & (best_rows["model"] == model)]
            g = g[g["batch_size"] == g["batch_size"].max()].sort_values("speedup", ascending=False, kind="stable")
            if g.empty:
                continue
            hi, lo = g.iloc[0], g.iloc[-1]
            text = (
                f"{k}, {model}: at batch {hi['batch_size']} the best {k} mode trains {ratio(hi)} the samples/s "
                f"of its machine's best cpu mode on {hi['host']}"
            )
            if len(g) > 1:
                text += f", {ratio(lo)} on {lo['host']}"
            out.append(text + ".")
    if len(out) > MAX_HEADLINE:
        more = len(out) - (MAX_HEADLINE - 1)
        out = out[: MAX_HEADLINE - 1] + [
            f"{more} more comparisons of this kind: see Machines ranked and each machine's section."
        ]
    return out


def ranking_md(tables: dict, label: str = "") -> list[str]:
    """The Machines ranked section: per device kind and network, a table of the places fastest
    first by the best mode at the smallest batch size, with the best at the largest beside it."""
    lad = intervals(own(tables["ladder"], label))
    lines = []
    for k in dict.fromkeys(kind(d) for d in cpu_first(lad["device"])):
        for model in networks_of(lad[lad["device"].map(kind) == k]):
            small, large = ranked(lad, k, model, "smallest"), ranked(lad, k, model, "largest")
            if small.empty and large.empty:
                continue
            order = list(small["who"]) + [w for w in large["who"] if w not in set(small["who"])]
            bs_small = small["batch_size"].iloc[0] if len(small) else "n/a"
            bs_large = large["batch_size"].iloc[0] if len(large) else "n/a"
            lines += [
                f"### {k}, {model}: fastest first at batch {bs_small}",
                "",
                f"| rank | machine | best at batch {bs_small} | best at batch {bs_large} |",
                "| ---: | --- | --- | --- |",
            ]
            at = lambda t, who: (  # noqa: E731
                mode_rate(t[t["who"] == who].iloc[0], lad) if who in set(t["who"]) else "no usable run"
            )
            lines += [f"| {i} | {who} | {at(small, who)} | {at(large, who)} |" for i, who in enumerate(order, 1)]
            lines.append("")
    return lines


def limit_of(tables: dict, host, model) -> float:
    """A network's arithmetic limit on one core of a place's cpu, µs per sample (analysis.fits)."""
    f = tables["fits"]
    if "limit_us" not in f.columns:
        return np.nan
    v = pd.to_numeric(
        f[(f["host"] == host) & (f["device"] == CPU) & (f["model"] == model)]["limit_us"], errors="coerce"
    )
    return float(v.dropna().iloc[0]) if v.notna().any() else np.nan


def limit(tables: dict, host, model, seed, top) -> list[str]:
    """How far the beginner's code is from this cpu's arithmetic limit for one sample of the network
    on one core (its FLOP at the core's measured peak rate), and where its time goes instead."""
    lim = limit_of(tables, host, model)
    if not np.isfinite(lim):
        return []
    b = seed["batch_size"]
    t_seed, t_top = 1e6 / seed["samples_per_s"], 1e6 / top["samples_per_s"]
    # µs per sample is 1e6 / samples/s, so its interval is the samples/s interval turned over.
    seed_lo, seed_hi = 1e6 / seed.get("samples_per_s_hi", np.nan), 1e6 / seed.get("samples_per_s_lo", np.nan)
    top_lo, top_hi = 1e6 / top.get("samples_per_s_hi", np.nan), 1e6 / top.get("samples_per_s_lo", np.nan)
    prof = tables["profile"]
    ops = ""
    if len(prof) and "ops_step" in prof.columns:
        p = prof[(prof["host"] == host) & (prof["device"] == CPU) & (prof["mode"] == "seed")]
        if "model" in p.columns:
            p = p[p["model"] == model]
        p = succeeded(p)[lambda q: q["batch_size"] == b]
        if len(p):
            ops = f", {p['ops_step'].iloc[0] + p['ops_batch'].iloc[0]:.0f} torch ops per step"
    return [
        f"At batch {b} the beginner's code takes {with_ci(t_seed, seed_lo, seed_hi, us)} per sample of {model} on "
        f"{host}'s cpu, {with_ci(t_seed / lim, seed_lo / lim, seed_hi / lim, times)} the arithmetic limit of one "
        f"of its cores ({us(lim)} per sample, measured): {pct(1 - lim / t_seed, 1)} of "
        f"its time is the fixed cost of a step (Python, dispatch, allocation{ops}), not arithmetic; "
        f"{top['mode']} takes {with_ci(t_top, top_lo, top_hi, us)}, {with_ci(t_top / lim, top_lo / lim, top_hi / lim, times)} the limit."
    ]


def sparse_limit(tables: dict, lad: pd.DataFrame, host, model) -> list[str]:
    """`sparse` at the smallest batch against the dense arithmetic limit, with what it skipped:
    the nonzero share of the training inputs and the FLOP per sample it does instead."""
    lim = limit_of(tables, host, model)
    g = lad[(lad["host"] == host) & (lad["device"] == CPU) & (lad["model"] == model) & (lad["mode"] == "sparse")]
    g = g[g["point"] == "smallest"]
    f = tables["fits"]
    if not np.isfinite(lim) or g.empty or "effective_flop_per_sample" not in f.columns:
        return []
    r = g.iloc[0]
    f = f[(f["host"] == host) & (f["device"] == CPU) & (f["model"] == model) & (f["mode"] == "sparse")]
    if f.empty or not np.isfinite(f["input_nonzero_share"].iloc[0]):
        return []
    share, eff, dense = (
        f["input_nonzero_share"].iloc[0],
        f["effective_flop_per_sample"].iloc[0],
        f["flop_per_sample"].iloc[0],
    )
    t = 1e6 / r["samples_per_s"]
    lo, hi = 1e6 / r.get("samples_per_s_hi", np.nan), 1e6 / r.get("samples_per_s_lo", np.nan)
    return [
        f"sparse takes {with_ci(t, lo, hi, us)} per sample at batch {r['batch_size']}, "
        f"{with_ci(t / lim, lo / lim, hi / lim, times)} the dense arithmetic limit ({us(lim)}): "
        f"it does {pct(eff / dense)} of the arithmetic ({flop(eff)} of {flop(dense)} per sample), "
        f"layer 1 over the {pct(share, 1)} of the training inputs that are nonzero."
    ]


def ratio(r) -> str:
    """A speedup row in words: '2.3× (2.1–2.5×)', or that the two are the same within noise."""
    text = with_ci(r["speedup"], r.get("speedup_lo", np.nan), r.get("speedup_hi", np.nan), times)
    return text + (", the same within noise" if yes(r.get("same_within_noise")) else "")


def accelerator_vs_host(spd, cross, host, device, model) -> list[str]:
    words = []
    tops = spd[
        (spd["kind"] == "best") & (spd["host"] == host) & (spd["device"] == device) & (spd["model"] == model)
    ].sort_values("batch_size")
    for _, r in tops.iloc[[0, -1]].drop_duplicates("batch_size").iterrows() if len(tops) else []:
        words.append(
            f"At batch {r['batch_size']}, {device}'s best mode ({r['mode']}) trains {ratio(r)} the samples/s "
            f"of the cpu's best ({r['baseline_mode']})."
        )
    hc = cross[(cross["host"] == host) & (cross["device"] == device) & (cross["model"] == model)]
    flips = hc[hc["verdict"] == "slower below, faster above"]
    if len(flips):
        c = flips.sort_values("crossover_batch_size").iloc[0]
        words.append(
            f"{device} overtakes the cpu from batch size {crossing(c)} in mode {c['mode']} "
            f"(the earliest of {len(flips)} mode(s)): its fixed cost per step is {us(c['a_us'])} against "
            f"{us(c['cpu_a_us'])} on the cpu."
        )
    return [f"On {host}, {model}: " + " ".join(words)] if words else []


def flop(x) -> str:
    """FLOP in words: '52.7 kFLOP', '900 FLOP'."""
    if not np.isfinite(x):
        return "n/a FLOP"
    text = rate(x)
    return f"{text}FLOP" if text[-1].isalpha() else f"{text} FLOP"


def network_sentences(m: pd.DataFrame, host) -> list[str]:
    """One sentence per network of a place (the map, analysis.network_map): from which batch size
    each accelerator's best mode beats the cpu's best, with its interval; where only the cpu
    ran, the cpu's best mode at the smallest and the largest batch size."""
    lines = []
    h = m[m["host"] == host]
    for model in networks_of(h):
        g = h[h["model"] == model]
        size = flop(g["flop_per_sample"].iloc[0])
        accelerators = [d for d in cpu_first(g["device"]) if d != CPU]
        for device in accelerators:
            d = g[g["device"] == device].sort_values("batch_size")
            r, last = d.iloc[0], d[d["over_cpu_best"].notna()]
            if not isinstance(r.get("verdict"), str):  # NaN: no cpu run of this network here
                lines.append(f"{model} ({size} per sample): no cpu run of it on {host} to compare {device} with.")
                continue
            if r["verdict"] == "slower at every batch size":
                when = f"at no batch size of the grid (up to {bs(d['batch_size'].max())}{_wins_ci(r)})"
            else:
                when = f"from batch {bs(r['wins_from'])}" + (
                    ", the smallest of the grid" if r["verdict"] == "faster at every batch size" else ""
                )
                when += _wins_ci(r)
            top = last.iloc[-1] if len(last) else None
            at = (
                f"; at batch {top['batch_size']} its {top['best_mode']} trains "
                f"{with_ci(top['over_cpu_best'], top['over_cpu_best_lo'], top['over_cpu_best_hi'], times)} the samples/s "
                f"of the cpu's {top['cpu_best_mode']}"
                if top is not None
                else ""
            )
            lines.append(f"{model} ({size} per sample): {device}'s best mode beats the cpu's {when}{at}.")
        if not accelerators:
            c = g[g["device"] == CPU].sort_values("batch_size")
            if c.empty:
                continue
            lo, hi = c.iloc[0], c.iloc[-1]
            tail = (
                f", and at batch {hi['batch_size']} {hi['best_mode']}, "
                f"{with_ci(hi['samples_per_s'], hi['samples_per_s_lo'], hi['samples_per_s_hi'], rate)} samples/s"
                if len(c) > 1
                else ""
            )
            lines.append(
                f"{model} ({size} per sample): no accelerator ran on {host}; the cpu's best mode at batch "
                f"{lo['batch_size']} is {lo['best_mode']}, "
                f"{with_ci(lo['samples_per_s'], lo['samples_per_s_lo'], lo['samples_per_s_hi'], rate)} samples/s{tail}."
            )
    return lines


def _wins_ci(r) -> str:
    """The 95 % interval of a map row's first winning batch size, in brackets ('never' where
    some replicates win at no batch size of the grid)."""
    lo, hi = r.get("wins_from_lo"), r.get("wins_from_hi")
    if lo is None or pd.isna(lo):
        return " (no interval: one usable run)"
    never = lambda v: "never" if not np.isfinite(v) else bs(v)  # noqa: E731
    return f" ({never(lo)}–{never(hi)})"


# --- the facts ----------------------------------------------------------------------------------


def findings(tables: dict, cfg: dict | None = None) -> dict:
    """Plain-words findings from the numbers: {host: [sentence, ...]} plus, under the key None,
    notes on what could not be said (degenerate inputs, fits to read with care, merged code)."""
    fit, cross, spd, dl, bw, prof, runs = (
        tables[k] for k in ("fits", "crossover", "speedup", "dataloader", "bandwidth", "profile", "runs")
    )
    out = {None: list(tables.get("code_notes", []))}
    if succeeded(runs).empty:
        statuses = ", ".join(sorted(set(runs["status"]))) if len(runs) else "none"
        out[None].append(f"No run succeeded (statuses: {statuses}): there is nothing to fit or compare.")
        return out
    for host in by_name(runs["host"]):
        lines = out.setdefault(host, [])
        hf = fit[(fit["host"] == host) & fit["trusted"]]
        here = runs[runs["host"] == host]
        for model in list(dict.fromkeys(fit[fit["host"] == host]["model"])):
            for device in cpu_first(here[here["model"] == model]["device"]):
                lines += fixed_cost(hf[(hf["device"] == device) & (hf["model"] == model)], host, device, model)
        hc = cross[cross["host"] == host]
        for _, c in hc.iterrows():
            lines += crossover(c, host)
        if hc.empty and set(runs[runs["host"] == host]["device"]) == {CPU}:
            lines.append(f"Only the cpu ran on {host}, so there is no GPU crossover to report.")
        lines += slowed(succeeded(runs[runs["host"] == host]), host)
        lines += speedups(spd[spd["host"] == host])
        lines += [dataloader(r) for _, r in dl[dl["host"] == host].iterrows()]
        lines += copies(bw[bw["host"] == host], host)
        lines += ops(succeeded(prof[prof["host"] == host]) if not prof.empty else prof)
    for _, f in fit[fit["note"].astype(str).str.len() > 0].iterrows():
        out[None].append(f"{f['host']}, {f['device']}, {f['model']}, {f['mode']}: {f['note']}.")
    return out


def slowed(ok: pd.DataFrame, host) -> list[str]:
    """How much of the timed steps the machine slowed (left out of every step time)."""
    share = pd.to_numeric(ok.get("slowed_share", pd.Series(dtype=float)), errors="coerce").dropna()
    if share.empty:
        return []
    return [
        f"On {host}, something outside the training process slowed {pct(share.median())} of a run's timed "
        f"steps (the median run; {pct(share.max())} at most) by more than {SLOWED:g}x for stretches of the "
        "run; no step time here includes them (runs.csv counts them in slowed_share)."
    ] + all_steps(ok, host)


def all_steps(ok: pd.DataFrame, host, most: int = 8) -> list[str]:
    """Where a step time and the median over all its runs' timed steps differ by more than the
    interval of their ratio (summary.csv: kept_over_all, all_steps_differ), or that none does."""
    effect = kept_over_all(ok)
    judged = effect[effect["all_steps_differ"] != ""]
    if judged.empty:
        return []
    differ = judged[judged["all_steps_differ"].astype(bool)]
    if differ.empty:
        return [
            f"On {host}, the step time of the kept steps and the median over all timed steps "
            f"(step_time_all_steps_s) agree within the interval of their ratio in all {len(judged)} combinations "
            "that have one."
        ]
    named = [
        f"{r['device']} {r['model']} {r['mode']} at batch {r['batch_size']} "
        f"(kept/all {with_ci(r['kept_over_all'], r['kept_over_all_lo'], r['kept_over_all_hi'], times)})"
        for _, r in differ.head(most).iterrows()
    ]
    more = f" and {len(differ) - most} more (summary.csv: all_steps_differ)" if len(differ) > most else ""
    return [
        f"On {host}, the step time of the kept steps and the median over all timed steps (step_time_all_steps_s) "
        f"differ by more than their interval in {len(differ)} of {len(judged)} combinations: "
        f"{'; '.join(named)}{more}."
    ]


def fixed_cost(f: pd.DataFrame, host, device, model) -> list[str]:
    where = f"On {host}, {device}, {model}"
    if f.empty:
        return [f"{where}: no fit is trustworthy (too few batch sizes or noisy timings); see fits.csv."]
    lo, hi = f.loc[f["a_us"].idxmin()], f.loc[f["a_us"].idxmax()]
    size = f" ({flop(f['flop_per_sample'].iloc[0])} per sample)" if "flop_per_sample" in f.columns else ""
    if len(f) == 1:
        lines = [
            f"{where}{size}: a step of {lo['mode']} (the one mode with a trustworthy fit) costs a fixed "
            f"{fitted(lo, 'a_us', us)} whatever the batch, plus {fitted(lo, 'b_us', us)} per sample."
        ]
    else:
        b_lo, b_hi = f.loc[f["b_us"].idxmin()], f.loc[f["b_us"].idxmax()]
        lines = [
            f"{where}{size}: a step costs a fixed {fitted(lo, 'a_us', us)} ({lo['mode']}) to "
            f"{fitted(hi, 'a_us', us)} ({hi['mode']}) whatever the batch, plus {fitted(b_lo, 'b_us', us)} "
            f"({b_lo['mode']}) to {fitted(b_hi, 'b_us', us)} ({b_hi['mode']}) per sample, so at small batches "
            "a step is paid in overhead, not arithmetic."
        ]
    lim = pd.to_numeric(f.get("limit_us", pd.Series(dtype=float)), errors="coerce").dropna()
    if len(lim):
        lines[-1] += f" The arithmetic of one sample takes {us(lim.iloc[0])} at one core's peak rate."
    ref = f[f["mode"] == "module"]
    if len(ref):
        r = ref.iloc[0]
        lines.append(
            f"For module on {device} ({model}), the fixed cost ({fitted(r, 'a_us', us)}) outweighs the per-sample "
            f"cost ({fitted(r, 'b_us', us)}) below batch size {fitted(r, 'overhead_bound_below', bs)}: "
            "there the step waits on overhead, not arithmetic."
        )
    return lines


def fitted(r, key: str, fmt) -> str:
    """A number of fits.csv with its interval (the `_lo`/`_hi` columns beside it)."""
    return with_ci(r[key], r.get(f"{key}_lo"), r.get(f"{key}_hi"), fmt)


def crossing(c) -> str:
    """The crossover batch size with its interval ('926 (640–1,300)'; '∞' where some replicates
    never cross)."""
    return with_ci(c["crossover_batch_size"], c.get("crossover_batch_size_lo"), c.get("crossover_batch_size_hi"), bs)


def crossover(c, host) -> list[str]:
    lines = []
    if c["verdict"] == "slower below, faster above":
        lines.append(
            f"On {host}, {c['device']} is slower than cpu below batch size {crossing(c)} "
            f"for {c['model']} in mode {c['mode']} (measured: last slower at {bs(c['measured_last_slower'])}, first faster "
            f"at {bs(c['measured_first_faster'])}); per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} "
            f"on cpu, per sample {us(c['b_us'])} vs {us(c['cpu_b_us'])}."
        )
    elif isinstance(c["verdict"], str):
        lines.append(
            f"On {host}, {c['device']} is {c['verdict']} than cpu for {c['model']} in mode {c['mode']} "
            f"(per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} on cpu)."
        )
    if isinstance(c["note"], str) and c["note"]:
        lines.append(f"Note ({c['device']}, {c['model']}, {c['mode']}): {c['note']}.")
    return lines


def speedups(spd: pd.DataFrame) -> list[str]:
    lines = []
    hs = spd[spd["kind"] == "device"]
    if len(hs):
        hi, lo = hs.loc[hs["speedup"].idxmax()], hs.loc[hs["speedup"].idxmin()]
        lines.append(
            f"Best accelerator speedup over cpu: {ratio(hi)} ({hi['device']}, {hi['model']}, {hi['mode']}, "
            f"batch {hi['batch_size']}); worst: {ratio(lo)} ({lo['device']}, {lo['model']}, {lo['mode']}, "
            f"batch {lo['batch_size']})."
        )
        same = hs[hs["same_within_noise"].map(yes)]
        if len(same):
            lines.append(
                f"{len(same)} of {len(hs)} accelerator-vs-cpu pairs are the same within noise (their interval "
                "contains 1×): "
                + ", ".join(
                    f"{r['device']} {r['model']} {r['mode']} batch {r['batch_size']}" for _, r in same.iterrows()
                )
                + "."
            )
    hm = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
    if len(hm):
        hi = hm.loc[hm["speedup"].idxmax()]
        lines.append(
            f"Best mode over {hi['baseline_mode']}: {hi['mode']} on {hi['device']} ({hi['model']}) at batch "
            f"{hi['batch_size']}, {ratio(hi)} faster per step."
        )
    return lines


def dataloader(r) -> str:
    copy = "a host memcpy of the batch (what collation copies)" if r["device"] == CPU else "the host→device copy itself"
    return (
        f"DataLoader on {r['device']} ({r['model']}) at batch {r['batch_size']}: {us(r['dataloader_step_us'])} per step vs "
        f"{us(r['module_step_us'])} for module, so feeding from host memory takes {share(r)} "
        f"of the step; {copy} takes {us(r['copy_us'])} ({pct(r['copy_share'])}) at the measured bandwidth."
    )


def copies(bw: pd.DataFrame, host) -> list[str]:
    lines = []
    for _, r in bw[bw["memory"] == "pinned"].iterrows():
        pg = bw[(bw["device"] == r["device"]) & (bw["memory"] == "pageable")]
        if len(pg):
            lines.append(
                f"Copies to {r['device']}: {r['largest_gb_per_s']:.3g} GB/s from pinned memory vs "
                f"{pg['largest_gb_per_s'].iloc[0]:.3g} GB/s pageable ({times(r['pinned_over_pageable'])}) for "
                f"{r['largest_bytes'] / 1e6:.3g} MB; a copy's fixed latency is {us(r['latency_us'])}."
            )
    for _, r in bw[bw["device"] == CPU].iterrows():
        lines.append(
            f"Host memcpy baseline on {host}: {r['largest_gb_per_s']:.3g} GB/s for {r['largest_bytes'] / 1e6:.3g} MB."
        )
    return lines


def ops(prof: pd.DataFrame) -> list[str]:
    lines = []
    for device in cpu_first(prof["device"]) if len(prof) else []:
        d = prof[prof["device"] == device]
        for model in dict.fromkeys(d["model"]):
            m = d[d["model"] == model]
            small = m["batch_size"].min()
            s = m[m["batch_size"] == small]
            counts = ", ".join(f"{k} {o + ob:.0f}" for k, o, ob in zip(s["mode"], s["ops_step"], s["ops_batch"]))
            lines.append(f"Torch ops dispatched per training step of {model} on {device} at batch {small}: {counts}.")
    return lines


def left_out(tables: dict, which=None) -> list[str]:
    """The runs the analysis did not use (those of `which`, a mask, where given)."""
    x = tables["excluded"] if which is None else tables["excluded"][which]
    lines = [
        f"{r['host']} {r['device']} {r['model']} {r['mode']} batch {r['batch_size']} repeat {r['repeat']}: {r['reason']}"
        for _, r in x.iterrows()
    ]
    return lines


def disagreements(tables: dict, which=None) -> list[str]:
    """The combinations whose repeats disagree (those of `which`, a mask, where given)."""
    d = tables["disagreeing"] if which is None else tables["disagreeing"][which]
    return [
        f"{r['host']} {r['device']} {r['model']} {r['mode']} batch {r['batch_size']}: the {r['n_ok']} repeats' median step "
        f"times differ by {times(r['repeat_spread'])} (more than quality.repeat_spread); read its median with care"
        for _, r in d.iterrows()
    ]


# --- results/summary.md -------------------------------------------------------------------------


def summary_md(found: dict, cfg: dict, env: pd.DataFrame, tables: dict | None = None) -> str:
    """results/summary.md. One machine: the headline, one sentence per network, then its findings.
    Several: the overview first (the headline across machines, every machine ranked per device
    kind), then each machine's own headline, networks and findings in its section."""
    places = by_name(own(tables["ladder"])["host"]) if tables is not None and len(tables["ladder"]) else []
    several = len(places) > 1
    lines = ["# mnist-device-bench: what this run found", ""]
    if tables is not None and len(tables["ladder"]):
        lines += ["## The headline", ""] + [f"- {s}" for s in headline(tables)] + [""]
    per_network = per_network_lines(tables) if tables is not None and not several else []
    if per_network:
        lines += ["## Per network", ""] + [f"- {s}" for s in per_network] + [""]
    if several:
        lines += ["## Machines ranked", ""] + ranking_md(tables)
    lines += [
        f"Config: devices {cfg.get('devices')}, modes {cfg.get('modes')}, batch sizes {cfg.get('batch_sizes')}, "
        f"{cfg.get('repeats')} repeats, {cfg.get('train_samples')} training samples x {cfg.get('epochs')} epochs. "
        "Step time is fitted as a + b x batch size: a is the fixed cost of every step, b the cost of each sample. "
        "Every number in brackets is its 95 % interval over the repeats' processes and the steps within them "
        "(not over changes of the whole machine between sessions: on a shared VM a run minutes later can "
        "differ by more); two numbers whose ratio's interval contains 1 are the same within noise.",
        "",
    ]
    disagree = tables["disagreeing"] if tables is not None else pd.DataFrame(columns=["host"])
    dropped = tables["excluded"] if tables is not None else pd.DataFrame(columns=["host"])
    sections = by_name(h for h in found if h is not None)
    for host in sections:
        lines += [f"## {host}", ""]
        e = env[env["host"] == host] if "host" in env.columns else env.iloc[0:0]
        for _, r in e.iterrows():
            lines.append(
                f"- Environment ({r['device']}): {r['device_name']}; {r['cores']} cores, torch on {r['threads']} of them; "
                f"torch {r['torch']}, python {r['python']}, cuda {r['cuda']}; {r['platform']}"
            )
        if several:
            m = own(tables["map"]) if tables.get("map") is not None else None
            nets = network_sentences(m, host) if m is not None and len(m) else []
            lines += [f"- {s}" for s in place_headline(tables, hosts=[host]) + nets]
        lines += [f"- {s}" for s in found[host]]
        if several:  # what of this machine disagreed or was left out, here rather than in one long list
            lines += [f"- Repeats that disagree: {s}" for s in disagreements(tables, disagree["host"] == host)]
            lines += [f"- Left out of the analysis: {s}" for s in left_out(tables, dropped["host"] == host)]
        lines.append("")
    for ref in tables.get("references", []) if tables is not None else []:
        lines += [f"## Reference machine: {ref.label}", "", reference_about(ref), ""]
        lines += [f"- {s}" for s in headline(tables, ref.label) + per_network_lines(tables, ref.label)] + [""]
    if tables is not None:
        shown = set(sections) if several else set()
        rest_d, rest_x = ~disagree["host"].isin(shown), ~dropped["host"].isin(shown)
        if rest_d.any():
            lines += ["## Repeats that disagree", ""] + [f"- {s}" for s in disagreements(tables, rest_d)] + [""]
        if rest_x.any():
            lines += ["## Left out of the analysis", ""] + [f"- {s}" for s in left_out(tables, rest_x)] + [""]
    if found[None]:
        lines += ["## Notes", ""] + [f"- {s}" for s in found[None]] + [""]
    return "\n".join(lines)


# --- reStructuredText for the report ------------------------------------------------------------


def rst_table(df: pd.DataFrame, header: list[str]) -> str:
    if df.empty:
        return ""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header] + df.astype(str).replace({"": "–", "nan": "–", "<NA>": "–"}).values.tolist():
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {c}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def bullets(lines) -> str:
    return "".join(f"- {s}\n" for s in lines)


def reference_about(ref) -> str:
    """What a reference machine is, and that its numbers are not this run's."""
    return (
        f"Measured on another machine with its own config and code, not merged into this run's numbers "
        f"(bench/reference/{ref.name}; `reference: false` hides it): {ref.about}."
    )


def reference_lines(tables: dict, per_network: bool = False) -> list[str]:
    """Each reference machine's headline (or its sentences per network), every line naming it."""
    out = []
    for ref in tables.get("references", []):
        lines = per_network_lines(tables, ref.label) if per_network else headline(tables, ref.label)
        out += [f"{ref.label}: {s}" for s in lines]
    return out


def per_network_lines(tables: dict, label: str = "") -> list[str]:
    """One sentence per network and place (network_sentences), the place named where there are
    several; of this run, or with a label of that reference machine."""
    m = tables.get("map")
    if m is None or m.empty:
        return []
    m = own(m, label)
    hosts = by_name(m["host"])
    return [f"{host}: {s}" if len(hosts) > 1 else s for host in hosts for s in network_sentences(m, host)]


def fit_table(fit: pd.DataFrame) -> str:
    f = fit.copy()
    for c in ("a_us", "b_us"):
        lo, hi = (f.get(f"{c}_{e}", pd.Series(np.nan, index=f.index)) for e in ("lo", "hi"))
        f[c] = [with_ci(x, a, b, us) for x, a, b in zip(f[c], lo, hi)]
    f["overhead_bound_below"] = f["overhead_bound_below"].map(bs)
    f["max_rel_err"] = f["max_rel_err"].map(pct)
    columns = {
        "host": "host",
        "device": "device",
        "model": "network",
        "mode": "mode",
        "a_us": "fixed cost a per step",
        "b_us": "cost b per sample",
        "overhead_bound_below": "overhead-bound below batch",
        "batch_sizes": "batch sizes",
        "max_rel_err": "worst fit error",
        "quality": "fit",
    }
    return rst_table(f[list(columns)], list(columns.values()))


def dataloader_table(dl: pd.DataFrame) -> str:
    d = dl.copy()
    for c in ("module_step_us", "dataloader_step_us", "extra_us", "copy_us"):
        d[c] = d[c].map(us)
    d["extra_share"] = [share(r) for _, r in dl.iterrows()]
    for c in ("copy_share", "profiled_dataloader_share", "profiled_module_share"):
        d[c] = d[c].map(pct)
    columns = {
        "host": "host",
        "device": "device",
        "model": "network",
        "batch_size": "batch",
        "module_step_us": "module step",
        "dataloader_step_us": "dataloader step",
        "extra_share": "DataLoader transfer share",
        "copy_us": "copy alone",
        "copy_share": "copy share",
        "profiled_dataloader_share": "profiled fetch share (dataloader)",
        "profiled_module_share": "profiled fetch share (module)",
    }
    return rst_table(d[list(columns)], list(columns.values()))


def environment_table(env: pd.DataFrame) -> str:
    cols = ["host", "device", "device_name", "cpu_model", "cores", "threads", "python", "torch", "cuda", "platform"]
    cols += ["git_commit", "config_hash"]
    return rst_table(env.reindex(columns=cols).astype(object).fillna(""), cols) if len(env) else ""


def answer(found: dict, tables: dict) -> str:
    """The workflow page: the headline first, then every finding, the fits, the DataLoader share,
    what was left out and why, and the environment."""
    head = headline(tables) if len(tables["ladder"]) else []
    facts = [s for host in by_name(h for h in found if h is not None) for s in found[host]]
    text = bullets(head) + ("\n**What else this run found**\n\n" + bullets(facts) if facts else "")
    if not head and not facts:
        text = " ".join(found[None]) + "\n" if found[None] else "No run succeeded.\n"
    fits_ = fit_table(tables["fits"])
    dl = dataloader_table(tables["dataloader"])
    text += (
        "\n**Fixed cost per step (a) and cost per sample (b)**, fitted as step time = a + b × batch size:\n\n"
        + (fits_ or "No fit: no successful run.\n")
        + "\n**DataLoader transfer share**: the share of a `dataloader` step spent beyond a `module` step "
        "(same model, data already on the device), i.e. batch collation and the host→device copy:\n\n"
        + (dl or "Not measured: the run needs both the `module` and the `dataloader` mode.\n")
    )
    if len(tables["disagreeing"]):
        text += "\n**Repeats that disagree**\n\n" + bullets(disagreements(tables))
    use = ", ".join(tables.get("use", ("ok",)))
    text += (
        f"\n**Left out of the analysis** (it uses runs with status ok and a timing verdict of {use}; "
        "figures draw the others hollow)\n\n" + (bullets(left_out(tables)) or "Nothing: every run was used.\n")
    )
    if found[None]:
        text += "\n**Notes**\n\n" + bullets(found[None])
    return (
        text + "\n**Environment of every host**\n\n" + (environment_table(tables["environment"]) or "None recorded.\n")
    )


def rst_pages(tables: dict, found: dict, cfg: dict | None = None) -> dict:
    """The run-specific text of the report: {name: rst}: `answer` for the workflow page, and the
    words beside each figure of the registry (catalog.FIGURES); a figure without its page is an
    error here, not an empty page in the report."""
    pages = {"answer": answer(found, tables)}
    pages["ladder"] = bullets(headline(tables) + reference_lines(tables)) or "No mode ran successfully.\n"
    pages["throughput"] = "Fits on this run (a = fixed cost per step, b = cost per sample):\n\n" + (
        fit_table(tables["fits"]) or "none.\n"
    )
    pages["speedup"] = speedup_page(tables["speedup"])
    pages["map"] = bullets(per_network_lines(tables) + reference_lines(tables, per_network=True)) or (
        "No network ran successfully.\n"
    )
    pages["cost"] = cost_page(tables["fits"])
    prof = tables["profile"]
    ok = succeeded(prof)
    pages["breakdown"] = breakdown_page(ok)
    pages["ops"] = ops_page(ok)
    bw = tables["bandwidth"]
    pages["bandwidth"] = (
        "".join(
            f"- {r['host']} {r['device']} {r['memory']}: {r['largest_gb_per_s']:.3g} GB/s for "
            f"{r['largest_bytes'] / 1e6:.3g} MB, fixed latency {us(r['latency_us'])}\n"
            for _, r in bw.iterrows()
        )
        or "No copy timings.\n"
    )
    pages["accuracy"] = accuracy_text(tables["runs"], (cfg or {}).get("target_accuracy"))
    missing = [name for name in catalog.FIGURES if name not in pages]
    if missing:
        raise KeyError(f"words.rst_pages writes no page for the figure(s) {', '.join(missing)}: add one")
    return pages


def cost_page(fit: pd.DataFrame) -> str:
    """Per device and mode, the per-sample cost b of the smallest and the largest network against
    their arithmetic: where b grows with the FLOP, arithmetic has taken over from overhead."""
    f = fit[fit["b_us"].notna() & fit["flop_per_sample"].notna()] if "flop_per_sample" in fit.columns else fit.iloc[:0]
    lines = []
    for (host, device, mode), g in f.groupby(["host", "device", "mode"], sort=False):
        g = g.sort_values("flop_per_sample")
        if len(g) < 2:
            continue
        lo, hi = g.iloc[0], g.iloc[-1]
        grew = hi["b_us"] / lo["b_us"] if lo["b_us"] > 0 else np.nan
        lines.append(
            f"{host} {device} {mode}: {fitted(lo, 'b_us', us)} per sample for {lo['model']} ({flop(lo['flop_per_sample'])}), "
            f"{fitted(hi, 'b_us', us)} for {hi['model']} ({flop(hi['flop_per_sample'])}): "
            f"{times(grew)} the cost for {times(hi['flop_per_sample'] / lo['flop_per_sample'])} the arithmetic"
        )
    return bullets(lines) or "One network per device and mode: nothing to compare across sizes.\n"


def speedup_page(spd: pd.DataFrame) -> str:
    dev = spd[spd["kind"] == "device"]
    if len(dev):
        hi, lo = dev.loc[dev["speedup"].idxmax()], dev.loc[dev["speedup"].idxmin()]
        return (
            f"Accelerator over cpu on this run: from {ratio(lo)} ({lo['device']}, {lo['model']}, {lo['mode']}, "
            f"batch {lo['batch_size']}) to {ratio(hi)} ({hi['device']}, {hi['model']}, {hi['mode']}, "
            f"batch {hi['batch_size']}).\n"
        )
    lad = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
    if len(lad):
        hi = lad.loc[lad["speedup"].idxmax()]
        return (
            f"No accelerator ran, so the heatmap shows each mode over {hi['baseline_mode']} on the cpu instead: "
            f"best {ratio(hi)} ({hi['model']}, {hi['mode']}, batch {hi['batch_size']}).\n"
        )
    return "Not enough successful runs for a speedup.\n"


def breakdown_page(ok: pd.DataFrame) -> str:
    if ok.empty:
        return "No profile succeeded on this run.\n"
    lines = [
        f"- {r['host']} {r['device']} {r['model']} {r['mode']} batch {r['batch_size']}: transfer {us(r['transfer_us'])}, "
        f"forward {us(r['forward_us'])}, backward {us(r['backward_us'])}, optimizer {us(r['optimizer_us'])}"
        + ("" if r["device"] == CPU else f", device wait {us(r['wait_us'])}")
        + f"; profiled {us(r['step_us_profiled'])} per step vs {us(r['step_us_plain'])} without the profiler."
        for _, r in ok[ok["mode"].isin(["module", "dataloader"])].iterrows()
    ]
    return "On this run:\n\n" + ("\n".join(lines) + "\n" if lines else "(module and dataloader were not profiled)\n")


def ops_page(ok: pd.DataFrame) -> str:
    if ok.empty:
        return "No profile succeeded on this run.\n"
    o = ok.assign(total=ok["ops_step"] + ok["ops_batch"])
    top = o.loc[o["total"].idxmax()]
    return (
        f"Most ops per step on this run: {top['mode']} ({top['model']}) at batch {top['batch_size']} on {top['device']}, "
        f"{top['total']:.0f} ({top['ops_batch']:.0f} of them fetching the batch).\n"
    )


def accuracy_text(runs: pd.DataFrame, target) -> str:
    ok = succeeded(runs)
    if ok.empty:
        return "No successful run.\n"
    reached = ok[pd.to_numeric(ok["time_to_target_s"], errors="coerce").notna()]
    text = f"{len(reached)} of {len(ok)} successful runs reached test accuracy {target}."
    if len(reached):
        r = reached.loc[pd.to_numeric(reached["time_to_target_s"]).idxmin()]
        text += (
            f" Fastest: {r['device']} · {r['model']} · {r['mode']} at batch {r['batch_size']}, in "
            f"{float(r['time_to_target_s']):.3g} s of training ({r['host']})."
        )
    return text + "\n"
