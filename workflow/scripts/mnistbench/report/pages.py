"""The facts beside each figure of the report, its page (templates/pages.rst.j2); the first fact of
a page titles its figure (words.title). Facts as in facts.py: plain dicts whose `kind` names their
macro.
"""

import math

import pandas as pd

from mnistbench.collect.aggregate import succeeded
from mnistbench.report.numbers import at


def combination(r, **more) -> dict:
    """A table row's device, network, mode and batch size as a fact names them."""
    return dict(device=r["device"], network=r["model"], mode=r["mode"], batch=int(r["batch_size"]), **more)


def batch_gain(runs: pd.DataFrame, rates: pd.DataFrame) -> list[dict]:
    """How much a larger batch buys on the first network and machine of the usable `runs` (samples/s:
    `rates`): module's gain (the tutorial's way; else the largest gain) and the fastest mode at the largest."""
    if runs.empty:
        return []
    first = runs.iloc[0]
    med = rates[(rates["model"] == first["model"]) & (rates["place"] == first["place"])]  # one machine's gain
    small, large = med["batch_size"].min(), med["batch_size"].max()
    a = med[med["batch_size"] == small].set_index(["device", "mode"])["samples_per_s"]
    b = med[med["batch_size"] == large].set_index(["device", "mode"])["samples_per_s"]
    gain = (b / a).dropna()
    if small == large or gain.empty:
        return []
    device, mode = next(((d, m) for d, m in gain.index if m == "module"), gain.idxmax())
    top = b.idxmax()
    fact = dict(
        kind="batch_gain", device=device, mode=mode, gain=gain[(device, mode)], small=int(small), large=int(large)
    )
    return [dict(fact, top_mode=top[1], top_device=top[0], top_rate=b.max())]


def cost_growth(fit: pd.DataFrame) -> list[dict]:
    """Per place, device and mode, the cost per sample b of the smallest and the largest network
    against their arithmetic: where b grows with the FLOP, arithmetic has taken over."""
    f = fit[fit["b_us"].notna() & fit["flop_per_sample"].notna()]
    out = []
    for (place, device, mode), g in f.groupby(["place", "device", "mode"], sort=False):
        g = g.sort_values("flop_per_sample")
        if len(g) < 2:
            continue
        lo, hi = g.iloc[0], g.iloc[-1]
        ends = [dict(network=r["model"], flop=r["flop_per_sample"], b=at(r, "b_us")) for r in (lo, hi)]
        grew = hi["b_us"] / lo["b_us"] if lo["b_us"] > 0 else math.nan
        more = hi["flop_per_sample"] / lo["flop_per_sample"]
        fact = dict(kind="cost_growth", place=place, device=device, mode=mode, lo=ends[0], hi=ends[1])
        out.append(dict(fact, grew=grew, more=more))
    return out


def profiled(prof: pd.DataFrame) -> list[dict]:
    """Where a profiled step's time goes, after the slowest step at the smallest batch."""
    ok = succeeded(prof)
    if ok.empty:
        return []
    small = ok[ok["batch_size"] == ok["batch_size"].min()]
    top = small.loc[small["step_us_profiled"].idxmax()]
    out = [dict(kind="slowest_step", batch=int(top["batch_size"]), mode=top["mode"], device=top["device"])]
    return out + [dict(kind="breakdown", **r) for r in ok[ok["mode"].isin(["module", "dataloader"])].to_dict("records")]


def most_ops(prof: pd.DataFrame) -> list[dict]:
    ok = succeeded(prof)
    if ok.empty:
        return []
    o = ok.assign(total=ok["ops_step"] + ok["ops_batch"])
    top = o.loc[o["total"].idxmax()]
    keep = ("mode", "model", "batch_size", "device", "total", "ops_batch")
    return [dict(kind="most_ops", **{k: top[k] for k in keep})]


def copy_rates(bw: pd.DataFrame) -> list[dict]:
    if bw.empty:
        return []
    top = bw.loc[bw["largest_gb_per_s"].idxmax()]
    return [dict(kind="fastest_copy", **top)] + [dict(kind="copy", **r) for r in bw.to_dict("records")]


def accuracy(runs: pd.DataFrame, target, lr=None, test_samples=None) -> list[dict]:
    """How many runs reached the target accuracy and the fastest; the runs that learned nothing; and
    where modes that train the same function end further apart than a redraw of the test set would move one (chaos)."""
    ok = succeeded(runs)
    if ok.empty:
        return []
    reached = ok[pd.to_numeric(ok["time_to_target_s"], errors="coerce").notna()]
    fact = dict(kind="accuracy", reached=len(reached), of=len(ok), target=target, fastest=None)
    if len(reached):
        r = reached.loc[pd.to_numeric(reached["time_to_target_s"]).idxmin()]
        fact["fastest"] = combination(r, seconds=float(r["time_to_target_s"]), host=r["host"])
    return [fact] + [dict(kind="at_chance", **g) for g in at_chance(ok)] + chaos(ok, lr, test_samples)


def at_chance(ok: pd.DataFrame) -> list[dict]:
    """The successful runs whose test accuracy is chance (records.LEARNING: chance_accuracy)."""
    acc = pd.to_numeric(ok["test_accuracy"], errors="coerce")
    limit = pd.to_numeric(ok.get("chance_accuracy", pd.Series(math.nan, index=ok.index)), errors="coerce")
    hit = ok[acc <= limit]
    keys = ["host", "device", "model", "batch_size"]
    return [
        dict(host=h, device=d, network=m, batch=int(b), n=len(g), modes=sorted(set(g["mode"])))
        for (h, d, m, b), g in hit.groupby(keys, sort=False)
    ]


def chaos(ok: pd.DataFrame, lr, test_samples) -> list[dict]:
    """Per host, device, network and batch size: the modes' median test accuracies, where they
    lie further apart than three standard errors of an accuracy on this test set. Every mode
    trains the same function in exact arithmetic (proven over short runs in the tests); over
    thousands of small-batch steps at a large learning rate, float32 rounding differences grow
    to different weights, so the spread is the training's chaos, not a mode's error."""
    out = []
    for (h, d, m, b), g in ok.groupby(["host", "device", "model", "batch_size"], sort=False):
        med = pd.to_numeric(g["test_accuracy"], errors="coerce").groupby(g["mode"]).median().dropna()
        if len(med) < 2:
            continue
        p = med.median()
        se = math.sqrt(p * (1 - p) / test_samples) if test_samples else math.nan
        if med.max() - med.min() > 3 * se:
            out.append(dict(kind="chaos", host=h, device=d, network=m, batch=int(b), lr=lr,
                            lo=float(med.min()), hi=float(med.max()), low_mode=med.idxmin(), high_mode=med.idxmax()))  # fmt: skip
    return out
