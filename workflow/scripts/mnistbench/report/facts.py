"""Every fact the report states, computed once from the tables and handed on as data: plain dicts
(JSON, so the figures rule reads the same facts as the words), each with a `kind` that names the
one template macro that phrases it (templates/facts.j2) and its numbers with their intervals
(numbers.num). summary.md, the report's pages and the figures' titles all say these, nothing else.
"""

import math

import numpy as np
import pandas as pd

from mnistbench.collect.aggregate import kept_over_all, succeeded
from mnistbench.config.catalog import FIGURES, MODES
from mnistbench.config.devices import CPU, cpu_first, kind
from mnistbench.measure.machines import by_name, natural
from mnistbench.measure.slowed import SLOWED
from mnistbench.report import many, pages
from mnistbench.report.numbers import at, num, ratio
from mnistbench.report.pages import combination
from mnistbench.report.tables import of_place, own, yes

MAX_HEADLINE = 10  # bullets of a headline across machines, however many machines
MAX_NAMED = 8  # combinations a sentence names one by one


def per_sample(r) -> dict:
    """µs per sample from a ladder row's samples/s: its interval turned over."""
    return num(
        1e6 / r["samples_per_s"], 1e6 / r.get("samples_per_s_hi", np.nan), 1e6 / r.get("samples_per_s_lo", np.nan)
    )


def scaled(n: dict, by: float) -> dict:
    return {k: v / by for k, v in n.items()}


def networks_of(df: pd.DataFrame) -> list:
    """The networks of a table in the order the tables give them (smallest first)."""
    return list(dict.fromkeys(df["model"]))


# --- the ladder: the headline of a place ---------------------------------------------------------


def best(lad: pd.DataFrame, place, device, model, point) -> dict | None:
    """The fastest mode at a ladder point, with the modes the same within noise as it."""
    g = lad[(lad["place"] == place) & (lad["device"] == device) & (lad["model"] == model) & (lad["point"] == point)]
    if g.empty:
        return None
    r = g.loc[g["samples_per_s"].idxmax()]
    ties = [m for m, same in zip(g["mode"], g["same_as_best"]) if yes(same) and m != r["mode"]]
    return dict(mode=r["mode"], rate=at(r, "samples_per_s"), ties=ties, batch=int(r["batch_size"]), row=r)


def place_headline(tables: dict, place, label: str = "") -> list[list[dict]]:
    """A place's headline: a bullet (a list of facts) per device and network on its ladder; on the
    cpu, the arithmetic limit; per accelerator, where it overtakes the cpu."""
    lad = own(tables["ladder"], label)
    h = lad[lad["place"] == place]
    out = []
    for device in cpu_first(h["device"]):
        for model in networks_of(h[h["device"] == device]):
            small, large = (best(lad, place, device, model, p) for p in ("smallest", "largest"))
            g = h[(h["device"] == device) & (h["model"] == model) & (h["point"] == "smallest")]
            seed = g[g["mode"] == "seed"]
            where = dict(place=place, device=device, network=model)
            first = dict(kind="ladder_small", **where, best=_plain(small))
            if len(seed) and small is not None:
                first.update(seed=at(seed.iloc[0], "samples_per_s"), over_seed=at(small["row"], "over_seed"))
            bullet = [first]
            if large is not None:
                over = at(large["row"], "over_seed") if len(seed) else None
                bullet.append(dict(kind="ladder_large", best=_plain(large), over_seed=over))
            out.append(bullet)
            if device == CPU and len(seed) and small is not None:
                out += [[f] for f in limit(tables, place, model, seed.iloc[0], small["row"])]
            if device == CPU:
                out += [[f] for f in sparse_limit(tables, lad, place, model)]
    for device in [d for d in cpu_first(h["device"]) if d != CPU]:
        for model in networks_of(h[h["device"] == device]):
            f = accelerator_vs_cpu(own(tables["speedup"], label), own(tables["crossover"], label), place, device, model)
            out += [[f]] if f else []
    return out


def _plain(b: dict | None) -> dict | None:
    return None if b is None else {k: v for k, v in b.items() if k != "row"}


def limit_of(tables: dict, place, model) -> float:
    """A network's arithmetic limit on one core of a place's cpu, µs per sample (fits)."""
    f = tables["fits"]
    if "limit_us" not in f.columns:
        return math.nan
    v = pd.to_numeric(f[(f["place"] == place) & (f["device"] == CPU) & (f["model"] == model)]["limit_us"], "coerce")
    return float(v.dropna().iloc[0]) if v.notna().any() else math.nan


def limit(tables: dict, place, model, seed, top) -> list[dict]:
    """How far the beginner's code (its ops: where its time goes instead) and the best mode are from
    one cpu core's arithmetic limit per sample."""
    lim = limit_of(tables, place, model)
    if not math.isfinite(lim):
        return []
    b = int(seed["batch_size"])
    prof, ops = of_place(tables["profile"], tables["runs"], place), None
    if len(prof) and "ops_step" in prof.columns:
        p = prof[(prof["device"] == CPU) & (prof["mode"] == "seed")]
        p = succeeded(p[p["model"] == model] if "model" in p.columns else p)
        p = p[p["batch_size"] == b]
        ops = float(p["ops_step"].iloc[0] + p["ops_batch"].iloc[0]) if len(p) else None
    t_seed, t_top = per_sample(seed), per_sample(top)
    return [
        dict(kind="limit", place=place, network=model, batch=b, seed_us=t_seed, seed_over=scaled(t_seed, lim))
        | dict(limit_us=lim, overhead=1 - lim / t_seed["v"], ops=ops, mode=top["mode"], top_us=t_top)
        | dict(top_over=scaled(t_top, lim))
    ]


def sparse_limit(tables: dict, lad: pd.DataFrame, place, model) -> list[dict]:
    """`sparse` at the smallest batch against the dense arithmetic limit, with what it skipped."""
    lim = limit_of(tables, place, model)
    g = lad[(lad["place"] == place) & (lad["device"] == CPU) & (lad["model"] == model) & (lad["mode"] == "sparse")]
    g, f = g[g["point"] == "smallest"], tables["fits"]
    if not math.isfinite(lim) or g.empty or "effective_flop_per_sample" not in f.columns:
        return []
    f = f[(f["place"] == place) & (f["device"] == CPU) & (f["model"] == model) & (f["mode"] == "sparse")]
    if f.empty or not np.isfinite(f["input_nonzero_share"].iloc[0]):
        return []
    r, f = g.iloc[0], f.iloc[0]
    t = per_sample(r)
    return [
        dict(kind="sparse_limit", batch=int(r["batch_size"]), us=t, over=scaled(t, lim), limit_us=lim)
        | dict(done=f["effective_flop_per_sample"] / f["flop_per_sample"], effective=f["effective_flop_per_sample"])
        | dict(dense=f["flop_per_sample"], nonzero=f["input_nonzero_share"])
    ]


def accelerator_vs_cpu(spd, cross, place, device, model) -> dict | None:
    """An accelerator's best mode over the cpu's best at both ends of the grid, and its earliest crossover."""
    tops = spd[(spd["kind"] == "best") & (spd["place"] == place) & (spd["device"] == device) & (spd["model"] == model)]
    tops = tops.sort_values("batch_size")
    points = [
        dict(batch=int(r["batch_size"]), mode=r["mode"], baseline=r["baseline_mode"], **ratio(r))
        for r in (tops.iloc[[0, -1]].drop_duplicates("batch_size").to_dict("records") if len(tops) else [])
    ]
    hc = cross[(cross["place"] == place) & (cross["device"] == device) & (cross["model"] == model)]
    flips = hc[hc["verdict"] == "slower below, faster above"]
    flip = None
    if len(flips):
        c = flips.sort_values("crossover_batch_size").iloc[0]
        flip = dict(
            batch=at(c, "crossover_batch_size"), mode=c["mode"], n=len(flips), a_us=c["a_us"], cpu_a_us=c["cpu_a_us"]
        )
    if not points and flip is None:
        return None
    return dict(kind="accelerator_vs_cpu", place=place, network=model, device=device, points=points, flip=flip)


# --- many machines: the headline across them -------------------------------------------------------


def ranked(lad: pd.DataFrame, device_kind: str, model, point: str) -> pd.DataFrame:
    """Each place's best mode at a ladder point on a device kind and network, fastest first (places
    of equal speed in their natural order). `who` names the place, and its device where a place has
    several of the kind (cuda:1)."""
    g = lad[(lad["device"].map(kind) == device_kind) & (lad["model"] == model) & (lad["point"] == point)]
    g = g[g["samples_per_s"].notna()]
    if g.empty:
        return g.assign(who=pd.Series(dtype=str))
    top = g.loc[g.groupby(["place", "device"])["samples_per_s"].idxmax()]
    top = top.assign(who=[p if d == device_kind else f"{p} ({d})" for p, d in zip(top["place"], top["device"])])
    top = top.assign(_name=top["who"].map(natural)).sort_values("_name")
    return top.sort_values("samples_per_s", ascending=False, kind="stable").drop(columns="_name")


def ranked_best(lad: pd.DataFrame, r) -> dict:
    b = best(lad, r["place"], r["device"], r["model"], r["point"])
    return dict(who=r["who"], **_plain(b))


def overview(tables: dict, label: str = "") -> list[list[dict]]:
    """The headline across machines: per device kind and network, the fastest and the slowest place
    at the smallest and the largest batch size and how far apart they are; per accelerator kind,
    the range of its best mode over its place's cpu. At most MAX_HEADLINE bullets."""
    lad = own(tables["ladder"], label)
    places = by_name(lad["place"])
    kinds = list(dict.fromkeys(kind(d) for d in cpu_first(lad["device"])))
    counts = {k: int(lad.loc[lad["device"].map(kind) == k, "place"].nunique()) for k in kinds}
    out = [[dict(kind="overview_count", n=len(places), counts=counts)]]
    for k in kinds:
        for model in networks_of(lad[lad["device"].map(kind) == k]):
            points = []
            for point in ("smallest", "largest"):
                r = ranked(lad, k, model, point)
                if r.empty:
                    continue
                fast, slow = r.iloc[0], r.iloc[-1]
                item = dict(batch=int(fast["batch_size"]), fast=ranked_best(lad, fast), slow=None)
                if len(r) > 1:
                    lo = fast.get("samples_per_s_lo", np.nan) / slow.get("samples_per_s_hi", np.nan)
                    hi = fast.get("samples_per_s_hi", np.nan) / slow.get("samples_per_s_lo", np.nan)
                    item.update(
                        slow=ranked_best(lad, slow), apart=num(fast["samples_per_s"] / slow["samples_per_s"], lo, hi)
                    )
                points.append(item)
            n = int(lad.loc[(lad["device"].map(kind) == k) & (lad["model"] == model), "place"].nunique())
            if points:
                out.append([dict(kind="overview_kind", device_kind=k, network=model, n=n, points=points)])
    spd = own(tables["speedup"], label)
    tops = spd[(spd["kind"] == "best") & spd["place"].isin(places)] if len(spd) else spd
    for k in [k for k in kinds if k != CPU]:
        for model in networks_of(tops[tops["device"].map(kind) == k]) if len(tops) else []:
            g = tops[(tops["device"].map(kind) == k) & (tops["model"] == model)]
            g = g[g["batch_size"] == g["batch_size"].max()].sort_values("speedup", ascending=False, kind="stable")
            if g.empty:
                continue
            hi, lo = g.iloc[0], g.iloc[-1]
            fact = dict(kind="overview_best", device_kind=k, network=model, batch=int(hi["batch_size"]))
            fact.update(
                hi=dict(place=hi["place"], **ratio(hi)), lo=dict(place=lo["place"], **ratio(lo)) if len(g) > 1 else None
            )
            out.append([fact])
    if len(out) > MAX_HEADLINE:
        out = out[: MAX_HEADLINE - 1] + [[dict(kind="overview_more", n=len(out) - (MAX_HEADLINE - 1))]]
    return out


def ranking(tables: dict, label: str = "") -> list[dict]:
    """The Machines ranked tables: per device kind and network, the places fastest first by the
    best mode at the smallest batch size, with the best at the largest beside it."""
    lad = own(tables["ladder"], label)
    out = []
    for k in dict.fromkeys(kind(d) for d in cpu_first(lad["device"])):
        for model in networks_of(lad[lad["device"].map(kind) == k]):
            small, large = ranked(lad, k, model, "smallest"), ranked(lad, k, model, "largest")
            if small.empty and large.empty:
                continue
            order = list(small["who"]) + [w for w in large["who"] if w not in set(small["who"])]
            cell = lambda t, who: ranked_best(lad, t[t["who"] == who].iloc[0]) if who in set(t["who"]) else None  # noqa: E731
            rows = [
                dict(rank=i, who=who, small=cell(small, who), large=cell(large, who)) for i, who in enumerate(order, 1)
            ]
            out.append(dict(device_kind=k, network=model, rows=rows))
            out[-1].update(small_batch=int(small["batch_size"].iloc[0]) if len(small) else None)
            out[-1].update(large_batch=int(large["batch_size"].iloc[0]) if len(large) else None)
    return out


# --- per network: the map ---------------------------------------------------------------------------


def per_network(m: pd.DataFrame, place) -> list[dict]:
    """One fact per network of a place: from which batch size each accelerator's best mode beats
    the cpu's best, or, where only the cpu ran, its best mode at both ends of the grid."""
    out = []
    h = m[m["place"] == place]
    for model in networks_of(h):
        g = h[h["model"] == model]
        where = dict(place=place, network=model, flop=g["flop_per_sample"].iloc[0])
        accelerators = [d for d in cpu_first(g["device"]) if d != CPU]
        for device in accelerators:
            d = g[g["device"] == device].sort_values("batch_size")
            r, last = d.iloc[0], d[d["over_cpu_best"].notna()]
            if not isinstance(r.get("verdict"), str):  # NaN: no cpu run of this network here
                out.append(dict(kind="network_no_cpu", device=device, **where))
                continue
            top = last.iloc[-1] if len(last) else None
            fact = dict(kind="network_accelerator", device=device, verdict=r["verdict"], wins_from=at(r, "wins_from"))
            fact.update(largest=int(d["batch_size"].max()))
            if top is not None:
                fact["top"] = dict(batch=int(top["batch_size"]), mode=top["best_mode"], cpu_mode=top["cpu_best_mode"])
                fact["top"]["over"] = at(top, "over_cpu_best")
            out.append(dict(fact, **where))
        c = g[g["device"] == CPU].sort_values("batch_size")
        if not accelerators and len(c):
            end = lambda r: dict(batch=int(r["batch_size"]), mode=r["best_mode"], rate=at(r, "samples_per_s"))  # noqa: E731
            ends = [end(c.iloc[0]), end(c.iloc[-1])]
            out.append(dict(kind="network_cpu_only", small=ends[0], large=ends[1] if len(c) > 1 else None, **where))
    return out


# --- what else a place's runs say -----------------------------------------------------------------


def findings(tables: dict, place) -> list[dict]:
    """A place's findings beyond its headline."""
    fit, cross, spd, runs = (tables[k] for k in ("fits", "crossover", "speedup", "runs"))
    here = runs[runs["place"] == place]
    out = denormals(of_place(tables["environment"], runs, place))
    trusted = fit[(fit["place"] == place) & fit["trusted"]]
    for model in networks_of(fit[fit["place"] == place]):
        for device in cpu_first(here[here["model"] == model]["device"]):
            f = trusted[(trusted["device"] == device) & (trusted["model"] == model)]
            out += fixed_cost(f, place, device, model)
    hc = cross[cross["place"] == place]
    for c in hc.to_dict("records"):
        if isinstance(c["verdict"], str):
            keep = ("device", "model", "mode", "verdict")
            out.append(
                dict(kind="crossover", place=place, **{k: c[k] for k in keep}, batch=at(c, "crossover_batch_size"))
            )
            out[-1].update({k: c[k] for k in ("a_us", "cpu_a_us", "b_us", "cpu_b_us")})
            out[-1].update(last_slower=c["measured_last_slower"], first_faster=c["measured_first_faster"])
        if isinstance(c["note"], str) and c["note"]:
            out.append(dict(kind="crossover_note", **{k: c[k] for k in ("device", "model", "mode", "note")}))
    if hc.empty and set(here["device"]) == {CPU}:
        out.append(dict(kind="only_cpu", place=place))
    out += slowed(succeeded(here), place)
    out += speedups(spd[spd["place"] == place])
    out += [dict(kind="dataloader", **r) for r in tables["dataloader"].query("place == @place").to_dict("records")]
    out += copies(of_place(tables["bandwidth"], runs, place))
    out += ops(succeeded(of_place(tables["profile"], runs, place)))
    return out


def denormals(env: pd.DataFrame) -> list[dict]:
    """What an operation on a denormal number costs the cpu of a place (`env`: its environment
    rows, of_place; a cpu run's record first), and which modes flush them."""
    if "denormal_cost" not in env.columns:
        return []
    e = env[pd.to_numeric(env["denormal_cost"], errors="coerce").notna()]
    if e.empty:
        return []
    r = e.sort_values("device", key=lambda d: d != CPU, kind="stable").iloc[0]
    modes = [m for m, info in MODES.items() if info.flushes]
    return [dict(kind="denormals", cost=at(r, "denormal_cost"), flush=yes(r.get("c_modes_flush")), modes=modes)]


def fixed_cost(f: pd.DataFrame, place, device, model) -> list[dict]:
    """The fixed cost per step and the cost per sample across the modes of one place, device and
    network (their fits), and below which batch `module`'s step waits on overhead."""
    where = dict(place=place, device=device, network=model)
    if f.empty:
        return [dict(kind="no_fit", **where)]
    lo, hi = f.loc[f["a_us"].idxmin()], f.loc[f["a_us"].idxmax()]
    b_lo, b_hi = f.loc[f["b_us"].idxmin()], f.loc[f["b_us"].idxmax()]
    lim = pd.to_numeric(f.get("limit_us", pd.Series(dtype=float)), errors="coerce").dropna()
    fact = dict(kind="fixed_cost", flop=f["flop_per_sample"].iloc[0], n=len(f))
    fact["limit_us"] = lim.iloc[0] if len(lim) else None
    ends = dict(a_lo=at(lo, "a_us"), a_hi=at(hi, "a_us"), b_lo=at(b_lo, "b_us"), b_hi=at(b_hi, "b_us"))
    modes = dict(a_lo=lo["mode"], a_hi=hi["mode"], b_lo=b_lo["mode"], b_hi=b_hi["mode"])
    out = [dict(fact, **where, **ends, modes=modes)]
    ref = f[f["mode"] == "module"]
    if len(ref):
        r = ref.iloc[0]
        out.append(dict(kind="overhead_bound", device=device, network=model, a=at(r, "a_us"), b=at(r, "b_us")))
        out[-1]["below"] = at(r, "overhead_bound_below")
    return out


def slowed(ok: pd.DataFrame, place) -> list[dict]:
    """How much of the timed steps the machine slowed, and where the step time of the kept steps
    and the median over all timed steps differ by more than their interval."""
    share = pd.to_numeric(ok.get("slowed_share", pd.Series(dtype=float)), errors="coerce").dropna()
    if share.empty:
        return []
    out = [dict(kind="slowed", place=place, median=share.median(), most=share.max(), factor=SLOWED)]
    effect = kept_over_all(ok)
    judged = effect[effect["all_steps_differ"] != ""]
    if judged.empty:
        return out
    differ = judged[judged["all_steps_differ"].astype(bool)]
    named = [combination(r, ratio=at(r, "kept_over_all")) for r in differ.head(MAX_NAMED).to_dict("records")]
    return out + [dict(kind="all_steps", place=place, judged=len(judged), n=len(differ), named=named)]


def speedups(spd: pd.DataFrame) -> list[dict]:
    """The extreme accelerator-over-cpu speedups, those within noise, the best mode over the reference."""
    out = []
    hs = spd[spd["kind"] == "device"]
    if len(hs):
        hi, lo = hs.loc[hs["speedup"].idxmax()], hs.loc[hs["speedup"].idxmin()]
        out.append(dict(kind="speedup_extremes", hi=combination(hi, **ratio(hi)), lo=combination(lo, **ratio(lo))))
        same = [combination(r, **ratio(r)) for r in hs[hs["same_within_noise"].map(yes)].to_dict("records")]
        if same:
            out.append(dict(kind="same_within_noise", n=len(same), total=len(hs), pairs=same))
    hm = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
    if len(hm):
        hi = hm.loc[hm["speedup"].idxmax()]
        out.append(dict(kind="best_mode", baseline=hi["baseline_mode"], **combination(hi, **ratio(hi))))
    return out


def speedup_range(spd: pd.DataFrame) -> list[dict]:
    """The speedup figure's first fact: the range of this run's accelerator-over-cpu speedups;
    without an accelerator, the best mode over the reference mode (what the figure then shows)."""
    said = {f["kind"]: f for f in speedups(own(spd))}
    if "speedup_extremes" in said:
        return [dict(kind="speedup_range", lo=said["speedup_extremes"]["lo"], hi=said["speedup_extremes"]["hi"])]
    return [dict(said["best_mode"], kind="speedup_cpu_only")] if "best_mode" in said else []


def copies(bw: pd.DataFrame) -> list[dict]:
    """Pinned against pageable copies to each accelerator, and the host memcpy baseline, of a
    place (`bw`: its rows, of_place)."""
    out = []
    for r in bw[bw["memory"] == "pinned"].to_dict("records"):
        pg = bw[(bw["device"] == r["device"]) & (bw["memory"] == "pageable")]
        if len(pg):
            out.append(dict(kind="copies_pinned", pageable_gb_per_s=pg["largest_gb_per_s"].iloc[0], **r))
    out += [dict(kind="memcpy", **r) for r in bw[bw["device"] == CPU].to_dict("records")]
    return out


def ops(prof: pd.DataFrame) -> list[dict]:
    """Torch ops dispatched per training step of each network and device, at the smallest batch."""
    out = []
    for device in cpu_first(prof["device"]) if len(prof) else []:
        d = prof[prof["device"] == device]
        for model in dict.fromkeys(d["model"]):
            m = d[d["model"] == model]
            s = m[m["batch_size"] == m["batch_size"].min()]
            counts = [(k, o + ob) for k, o, ob in zip(s["mode"], s["ops_step"], s["ops_batch"])]
            batch = int(s["batch_size"].iloc[0])
            out.append(dict(kind="ops_count", network=model, device=device, batch=batch, counts=counts))
    return out


# --- everything the report says ----------------------------------------------------------------------


def collect(tables: dict, cfg: dict) -> dict:
    """Every fact of a run, its reference machines' beside it; a figure's title is the first fact
    of its page (`pages`)."""
    runs, lad = tables["runs"], own(tables["ladder"])
    places = by_name(lad["place"]) if len(lad) else []
    several = len(places) > 1
    m = own(tables["map"])
    fit = tables["fits"]
    notes = [dict(kind="text", text=t) for t in tables.get("code_notes", [])]
    out = dict(several=several, config=config(cfg), notes=notes, use=list(tables.get("use", ("ok",))))
    out.update(headline=[], per_network=[], ranking=[], places=[], references=[], pages={f: [] for f in FIGURES})
    out["many"] = many.facts(tables["many"]) if "many" in tables else []
    out.update(set_aside=tables["set_aside"].to_dict("records"), disagreeing=tables["disagreeing"].to_dict("records"))
    out["unplaced"] = {k: out[k] for k in ("disagreeing", "set_aside")}  # until the places take theirs
    if succeeded(runs).empty:
        statuses = ", ".join(sorted(set(runs["status"]))) if len(runs) else "none"
        out["notes"].append(dict(kind="no_success", statuses=statuses))
        return out
    notes += [dict(kind="at_chance", **g) for g in pages.at_chance(succeeded(runs))]
    notes += [
        dict(kind="fit_note", place=f["place"], device=f["device"], network=f["model"], mode=f["mode"], note=f["note"])
        for f in fit[fit["note"].astype(str).str.len() > 0].to_dict("records")
    ]
    out["references"] = [
        dict(label=r.label, name=r.name, about=r.about, headline=headline(tables, r.label))
        | dict(per_network=per_network_all(tables, r.label))
        for r in tables.get("references", [])
    ]
    out.update(headline=headline(tables), per_network=[] if several else per_network_all(tables))
    out.update(ranking=ranking(tables) if several else [])
    env = tables["environment"]
    out["places"] = [
        dict(name=p, environment=of_place(env, runs, p).to_dict("records"))
        | dict(headline=place_headline(tables, p) if several else [])
        | dict(per_network=per_network(m, p) if several and len(m) else [], findings=findings(tables, p))
        | {k: at_place(out[k], runs, p) if several else [] for k in ("disagreeing", "set_aside")}
        for p in by_name(runs["place"])
    ]
    # What no place's section says, said once at the end of summary.md (the report's page says all).
    said = {k: [r for p in out["places"] for r in p[k]] for k in ("disagreeing", "set_aside")}
    out["unplaced"] = {k: [r for r in out[k] if r not in rows] for k, rows in said.items()}
    first_network = [f for f in (out["per_network"] or [f for p in out["places"] for f in p["per_network"]])][:1]
    firsts = [bullet[0] for bullet in out["headline"] if bullet[0]["kind"] in ("ladder_small", "overview_kind")]
    out["pages"] = dict(
        ladder=firsts[:1],
        throughput=pages.batch_gain(tables["usable"], tables["rates"]),
        speedup=speedup_range(tables["speedup"]),
        map=first_network,
        cost=pages.cost_growth(fit),
        breakdown=pages.profiled(tables["profile"]),
        ops=pages.most_ops(tables["profile"]),
        bandwidth=pages.copy_rates(tables["bandwidth"]),
        many=out["many"],
        accuracy=pages.accuracy(
            runs, cfg.get("target_accuracy"), (cfg.get("training") or {}).get("lr"), cfg.get("test_samples")
        ),
    )
    return out


def at_place(rows: list[dict], runs: pd.DataFrame, place) -> list[dict]:
    """The rows (of the runs set aside, of the repeats that disagree) of a place's machines."""
    here = runs[runs["place"] == place]
    here = set(zip(here["machine"], here["device"]))
    return [r for r in rows if (r.get("machine"), r.get("device")) in here]


def headline(tables: dict, label: str = "") -> list[list[dict]]:
    """This run's (or a reference machine's) headline: one place's own, or the overview of several."""
    places = by_name(own(tables["ladder"], label)["place"])
    if len(places) > 1:
        return overview(tables, label)
    return [bullet for p in places for bullet in place_headline(tables, p, label)]


def per_network_all(tables: dict, label: str = "") -> list[dict]:
    """One fact per network and place (the place named where there are several)."""
    m = own(tables["map"], label)
    return [f for p in by_name(m["place"]) for f in per_network(m, p)] if len(m) else []


def config(cfg: dict) -> dict:
    keys = ("devices", "modes", "batch_sizes", "repeats", "train_samples", "epochs")
    return {k: cfg.get(k) for k in keys}
