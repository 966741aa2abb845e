"""Why the timings look as they do, computed from the summary tables (pandas + numpy).

- fits: step time = a + b * batch_size per host x device x mode. a is the fixed cost of a step
  (Python, dispatch, kernel launches, syncs), b the cost of one more sample (the arithmetic).
- crossover: the batch size from which each accelerator beats the cpu, per mode, from the fits
  and checked against the measured points.
- speedup: each accelerator over the cpu (same mode), and each mode over a reference mode.
- dataloader: what feeding batches through a DataLoader from host memory costs next to `module`.
- bandwidth: host->device copies, pinned vs pageable.
- findings: the same numbers in plain words, for results/summary.md and the report.
"""

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from mnistbench.aggregate import KEYS, write_csv

BYTES_PER_SAMPLE = 784 * 4 + 8  # float32 image + int64 label: what a DataLoader batch copies
REFERENCE_MODES = ("seed", "module", "manual")  # the mode ladder is compared with the first present


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
    out = dict(a=math.nan, b=math.nan, n_points=len(y), n_batch_sizes=len(sizes),
               batch_sizes=" ".join(str(int(s)) for s in sizes), rel_rmse=math.nan, max_rel_err=math.nan,
               quality="none", note="")  # fmt: skip
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


def fits(runs: pd.DataFrame) -> pd.DataFrame:
    """Per host x device x mode: a (µs per step), b (µs per sample) and the fit's quality.
    Combinations whose runs all failed get a row with a note, not a fit."""
    rows = []
    for (host, device, mode), g in runs.groupby(["host", "device", "mode"], sort=True):
        ok = g[g["status"] == "ok"]
        f = fit_line(ok["batch_size"], ok["step_time_median_s"])
        if ok.empty:
            f["note"] = f"no successful run (status: {', '.join(sorted(set(g['status'])))})"
        a, b = f.pop("a"), f.pop("b")
        rows.append(dict(
            host=host, device=device, device_name=g["device_name"].iloc[0], mode=mode,
            a_us=a * 1e6, b_us=b * 1e6,
            # Below this batch size the fixed cost is more than half of a step.
            overhead_bound_below=a / b if b > 0 else math.inf if a > 0 else math.nan,
            **f,
        ))  # fmt: skip
    cols = ["host", "device", "device_name", "mode", "a_us", "b_us", "overhead_bound_below", "n_points",
            "n_batch_sizes", "batch_sizes", "rel_rmse", "max_rel_err", "quality", "note"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


# --- accelerators against the cpu ---------------------------------------------------------------


def medians(runs: pd.DataFrame) -> pd.DataFrame:
    """Median step time (s) per host x device x mode x batch size over the repeats that succeeded."""
    ok = runs[runs["status"] == "ok"]
    return ok.groupby(KEYS, as_index=False)["step_time_median_s"].median()


def crossover(fit: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """For every accelerator x mode with a cpu run of the same mode on the same host: where the
    fitted lines cross, and what the measured points say."""
    med = medians(runs)
    rows = []
    for _, acc in fit[fit["device"] != "cpu"].iterrows():
        cpu = fit[(fit["host"] == acc["host"]) & (fit["device"] == "cpu") & (fit["mode"] == acc["mode"])]
        row = dict(host=acc["host"], device=acc["device"], mode=acc["mode"], a_us=acc["a_us"], b_us=acc["b_us"])
        if cpu.empty:
            row["note"] = f"no cpu run of {acc['mode']} on {acc['host']} to compare with"
            rows.append(row)
            continue
        cpu = cpu.iloc[0]
        row.update(cpu_a_us=cpu["a_us"], cpu_b_us=cpu["b_us"])
        row.update(_fit_crossover(acc["a_us"], acc["b_us"], cpu["a_us"], cpu["b_us"]))
        row.update(_measured_crossover(med, acc["host"], acc["device"], acc["mode"], row))
        rows.append(row)
    cols = ["host", "device", "mode", "verdict", "crossover_batch_size", "measured_last_slower",
            "measured_first_faster", "fit_agrees", "a_us", "b_us", "cpu_a_us", "cpu_b_us", "note"]  # fmt: skip
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
    return dict(verdict="slower below, faster above" if da > 0 else "faster below, slower above", crossover_batch_size=cross)


def _measured_crossover(med, host, device, mode, row) -> dict:
    sel = lambda d: med[(med["host"] == host) & (med["device"] == d) & (med["mode"] == mode)]  # noqa: E731
    both = sel(device).merge(sel("cpu"), on="batch_size", suffixes=("", "_cpu")).sort_values("batch_size")
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


def speedup(runs: pd.DataFrame) -> pd.DataFrame:
    """speedup = baseline step time / step time, at the same host and batch size.

    kind 'device': each accelerator over the cpu, same mode. kind 'mode': each mode over the
    reference mode (seed, the beginner's code, when it ran), same device.
    """
    med = medians(runs)
    cols = ["kind", "host", "device", "mode", "batch_size", "baseline_device", "baseline_mode",
            "step_time_s", "baseline_step_time_s", "speedup"]  # fmt: skip
    if med.empty:
        return pd.DataFrame(columns=cols)
    cpu = med[med["device"] == "cpu"].rename(columns={"step_time_median_s": "baseline_step_time_s"})
    dev = med[med["device"] != "cpu"].merge(cpu.drop(columns="device"), on=["host", "mode", "batch_size"])
    dev = dev.assign(kind="device", baseline_device="cpu", baseline_mode=dev["mode"])
    ref = reference_mode(med["mode"])
    base = med[med["mode"] == ref].rename(columns={"step_time_median_s": "baseline_step_time_s"})
    lad = med.merge(base.drop(columns="mode"), on=["host", "device", "batch_size"])
    lad = lad.assign(kind="mode", baseline_device=lad["device"], baseline_mode=ref)
    out = pd.concat([dev, lad], ignore_index=True).rename(columns={"step_time_median_s": "step_time_s"})
    out["speedup"] = out["baseline_step_time_s"] / out["step_time_s"]
    return out[cols].sort_values(["kind", "host", "device", "mode", "batch_size"], ignore_index=True)


# --- data movement ------------------------------------------------------------------------------


def bandwidth(transfer: pd.DataFrame) -> pd.DataFrame:
    """Per host x device x memory: copy time = latency + bytes / bandwidth (the same robust fit),
    and the bandwidth measured on the largest copy."""
    rows = []
    cols = ["host", "device", "memory", "latency_us", "fit_gb_per_s", "largest_bytes", "largest_gb_per_s",
            "pinned_over_pageable", "note"]  # fmt: skip
    if transfer.empty:
        return pd.DataFrame(columns=cols)
    for (host, device, memory), g in transfer.groupby(["host", "device", "memory"], sort=True):
        f = fit_line(g["bytes"], g["seconds"])
        big = g.loc[g["bytes"].idxmax()]
        rows.append(dict(
            host=host, device=device, memory=memory, latency_us=f["a"] * 1e6,
            fit_gb_per_s=1e-9 / f["b"] if f["b"] > 0 else math.nan,
            largest_bytes=int(big["bytes"]), largest_gb_per_s=big["gb_per_s"], note=f["note"],
        ))  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    for (host, device), g in out.groupby(["host", "device"]):
        pinned, pageable = g[g["memory"] == "pinned"], g[g["memory"] == "pageable"]
        if len(pinned) and len(pageable):
            ratio = pinned["largest_gb_per_s"].iloc[0] / pageable["largest_gb_per_s"].iloc[0]
            out.loc[g.index, "pinned_over_pageable"] = ratio
    return out


def copy_seconds(bw: pd.DataFrame, host, device, nbytes) -> float:
    """Predicted time of one host->device copy of nbytes, from the fitted line of the memory kind
    the DataLoader uses (pinned on cuda, pageable elsewhere; on cpu a host memcpy, which is what
    the DataLoader's collation does)."""
    g = bw[(bw["host"] == host) & (bw["device"] == device)]
    if g.empty:
        return math.nan
    want = "pinned" if device.startswith("cuda") else "pageable"
    r = g[g["memory"] == want]
    r = (r if len(r) else g).iloc[0]
    if not (np.isfinite(r["latency_us"]) and np.isfinite(r["fit_gb_per_s"])):
        return math.nan
    return r["latency_us"] * 1e-6 + nbytes / (r["fit_gb_per_s"] * 1e9)


def dataloader(runs: pd.DataFrame, bw: pd.DataFrame, prof: pd.DataFrame) -> pd.DataFrame:
    """What the DataLoader path costs per step next to `module` (the same model fed from tensors
    already on the device), per host x device x batch size.

    extra_share: (dataloader step - module step) / dataloader step, from the timed runs.
    copy_share: the host->device copy alone (predicted from the preload's copy timings) over the
    dataloader step. profiled_*_share: the batch fetch's share of a profiled step, for both modes.
    """
    med = medians(runs)
    cols = ["host", "device", "batch_size", "module_step_us", "dataloader_step_us", "extra_us", "extra_share",
            "copy_us", "copy_share", "profiled_dataloader_share", "profiled_module_share", "note"]  # fmt: skip
    mod = med[med["mode"] == "module"].drop(columns="mode")
    dl = med[med["mode"] == "dataloader"].drop(columns="mode")
    both = dl.merge(mod, on=["host", "device", "batch_size"], suffixes=("_dl", "_mod"))
    if both.empty:
        return pd.DataFrame(columns=cols)
    both["module_step_us"] = both["step_time_median_s_mod"] * 1e6
    both["dataloader_step_us"] = both["step_time_median_s_dl"] * 1e6
    both["extra_us"] = both["dataloader_step_us"] - both["module_step_us"]
    both["extra_share"] = both["extra_us"] / both["dataloader_step_us"]
    both["copy_us"] = [
        copy_seconds(bw, h, d, b * BYTES_PER_SAMPLE) * 1e6 for h, d, b in zip(both["host"], both["device"], both["batch_size"])
    ]
    both["copy_share"] = both["copy_us"] / both["dataloader_step_us"]
    both["note"] = np.where(both["extra_us"] < 0, "dataloader measured faster than module: within the noise", "")
    for mode in ("dataloader", "module"):
        share = {}
        if not prof.empty:
            p = prof[(prof["mode"] == mode) & (prof["status"] == "ok")]
            share = {(h, d, b): t / s for h, d, b, t, s in zip(p["host"], p["device"], p["batch_size"], p["transfer_us"], p["step_us_profiled"])}
        both[f"profiled_{mode}_share"] = [share.get(k, math.nan) for k in zip(both["host"], both["device"], both["batch_size"])]
    return both[cols].sort_values(["host", "device", "batch_size"], ignore_index=True)


# --- plain words --------------------------------------------------------------------------------


def us(x) -> str:
    """A duration given in µs, readable: '0.42 µs', '35 µs', '1.2 ms'."""
    if not np.isfinite(x):
        return "n/a"
    if x >= 1000:
        return f"{x / 1000:.3g} ms"
    return f"{x:.2g} µs" if x < 10 else f"{x:.0f} µs"


def pct(x) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:.0f} %"


def bs(x) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:,.0f}"


def share(r) -> str:
    """The DataLoader's extra share of a step, in words; a negative difference is noise."""
    if not np.isfinite(r["extra_us"]):
        return "n/a"
    if r["extra_us"] < 0:
        return "nothing measurable (it timed faster than module)"
    return f"{pct(r['extra_share'])} ({us(r['extra_us'])})"


def trusted(fit: pd.DataFrame) -> pd.DataFrame:
    """Fits good enough to quote in a sentence (the table shows all of them)."""
    return fit[fit["a_us"].notna() & (fit["quality"] != "poor")]


def cpu_first(devices) -> list:
    """Devices in the order the text names them: cpu, then the accelerators."""
    return sorted(set(devices), key=lambda d: (d != "cpu", d))


def trusted_by_device(fit: pd.DataFrame, host: str, devices):
    """(device, its trusted fits on host) for each device, cpu first; empty where none is."""
    hf = trusted(fit[fit["host"] == host])
    for device in cpu_first(devices):
        yield device, hf[hf["device"] == device]


def findings(tables: dict) -> dict:
    """Plain-words findings from the numbers. Returns {host: [sentence, ...]} plus the notes of
    degenerate inputs under the key None."""
    fit, cross, spd, dl, bw, prof, runs = (tables[k] for k in ("fits", "crossover", "speedup", "dataloader", "bandwidth", "profile", "runs"))
    out = {None: []}
    if runs.empty or not (runs["status"] == "ok").any():
        statuses = ", ".join(sorted(set(runs["status"]))) if len(runs) else "none"
        out[None].append(f"No run succeeded (statuses: {statuses}): there is nothing to fit or compare.")
        return out
    for host in sorted(set(runs["host"])):
        lines = out.setdefault(host, [])
        for device, f in trusted_by_device(fit, host, runs[runs["host"] == host]["device"]):
            if f.empty:
                lines.append(f"On {host}, {device}: no fit is trustworthy (too few batch sizes or noisy timings); see fits.csv.")
                continue
            lo, hi = f.loc[f["a_us"].idxmin()], f.loc[f["a_us"].idxmax()]
            if len(f) == 1:
                lines.append(
                    f"On {host}, {device}: a step of {lo['mode']} (the one mode with a trustworthy fit) costs a fixed "
                    f"{us(lo['a_us'])} whatever the batch, plus {us(lo['b_us'])} per sample."
                )
            else:
                lines.append(
                    f"On {host}, {device}: a step costs a fixed {us(lo['a_us'])} ({lo['mode']}) to {us(hi['a_us'])} "
                    f"({hi['mode']}) whatever the batch, plus {us(f['b_us'].min())} to {us(f['b_us'].max())} per sample."
                )
            ref = f[f["mode"] == "module"]
            if len(ref):
                r = ref.iloc[0]
                lines.append(
                    f"For module on {device}, the fixed cost ({us(r['a_us'])}) outweighs the per-sample "
                    f"cost ({us(r['b_us'])}) below batch size {bs(r['overhead_bound_below'])}: "
                    "there the step waits on overhead, not arithmetic."
                )
        hc = cross[cross["host"] == host]
        for _, c in hc.iterrows():
            if c["verdict"] == "slower below, faster above":
                lines.append(
                    f"On {host}, {c['device']} is slower than cpu below batch size {bs(c['crossover_batch_size'])} "
                    f"for mode {c['mode']} (measured: last slower at {bs(c['measured_last_slower'])}, first faster "
                    f"at {bs(c['measured_first_faster'])}); per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} "
                    f"on cpu, per sample {us(c['b_us'])} vs {us(c['cpu_b_us'])}."
                )
            elif isinstance(c["verdict"], str):
                lines.append(
                    f"On {host}, {c['device']} is {c['verdict']} than cpu for mode {c['mode']} "
                    f"(per-step overhead {us(c['a_us'])} vs {us(c['cpu_a_us'])} on cpu)."
                )
            if isinstance(c["note"], str) and c["note"]:
                lines.append(f"Note ({c['device']}, {c['mode']}): {c['note']}.")
        if hc.empty and set(runs[runs["host"] == host]["device"]) == {"cpu"}:
            lines.append(f"Only the cpu ran on {host}, so there is no accelerator crossover to report.")
        hs = spd[(spd["host"] == host) & (spd["kind"] == "device")]
        if len(hs):
            best, worst = hs.loc[hs["speedup"].idxmax()], hs.loc[hs["speedup"].idxmin()]
            lines.append(
                f"Best accelerator speedup over cpu: {best['speedup']:.2g}x ({best['device']}, {best['mode']}, "
                f"batch {best['batch_size']}); worst: {worst['speedup']:.2g}x ({worst['device']}, "
                f"{worst['mode']}, batch {worst['batch_size']})."
            )
        hm = spd[(spd["host"] == host) & (spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
        if len(hm):
            best = hm.loc[hm["speedup"].idxmax()]
            lines.append(
                f"Best mode over {best['baseline_mode']}: {best['mode']} on {best['device']} at batch "
                f"{best['batch_size']}, {best['speedup']:.2g}x faster per step."
            )
        for _, r in dl[dl["host"] == host].iterrows():
            copy = "a host memcpy of the batch (what collation copies)" if r["device"] == "cpu" else "the host→device copy itself"
            lines.append(
                f"DataLoader on {r['device']} at batch {r['batch_size']}: {us(r['dataloader_step_us'])} per step vs "
                f"{us(r['module_step_us'])} for module, so feeding from host memory takes {share(r)} "
                f"of the step; {copy} takes {us(r['copy_us'])} ({pct(r['copy_share'])}) at the measured bandwidth."
            )
        for _, r in bw[(bw["host"] == host) & (bw["memory"] == "pinned")].iterrows():
            pg = bw[(bw["host"] == host) & (bw["device"] == r["device"]) & (bw["memory"] == "pageable")]
            if len(pg):
                lines.append(
                    f"Copies to {r['device']}: {r['largest_gb_per_s']:.3g} GB/s from pinned memory vs "
                    f"{pg['largest_gb_per_s'].iloc[0]:.3g} GB/s pageable ({r['pinned_over_pageable']:.2g}x) for "
                    f"{r['largest_bytes'] / 1e6:.3g} MB; a copy's fixed latency is {us(r['latency_us'])}."
                )
        for _, r in bw[(bw["host"] == host) & (bw["device"] == "cpu")].iterrows():
            lines.append(f"Host memcpy baseline on {host}: {r['largest_gb_per_s']:.3g} GB/s for {r['largest_bytes'] / 1e6:.3g} MB.")
        hp = prof[(prof["host"] == host) & (prof["status"] == "ok")] if not prof.empty else prof
        for device in cpu_first(hp["device"]) if len(hp) else []:
            d = hp[hp["device"] == device]
            small = d["batch_size"].min()
            s = d[d["batch_size"] == small]
            ops = ", ".join(f"{m} {o + ob:.0f}" for m, o, ob in zip(s["mode"], s["ops_step"], s["ops_batch"]))
            lines.append(f"Torch ops dispatched per training step on {device} at batch {small}: {ops}.")
    for _, f in fit[fit["note"].astype(str).str.len() > 0].iterrows():
        out[None].append(f"{f['host']}, {f['device']}, {f['mode']}: {f['note']}.")
    return out


def summary_md(found: dict, cfg: dict, env: pd.DataFrame) -> str:
    lines = [
        "# mnist-device-bench: what this run found",
        "",
        f"Config: devices {cfg.get('devices')}, modes {cfg.get('modes')}, batch sizes {cfg.get('batch_sizes')}, "
        f"{cfg.get('repeats')} repeats, {cfg.get('train_samples')} training samples x {cfg.get('epochs')} epochs. "
        "Step time is fitted as a + b x batch size: a is the fixed cost of every step, b the cost of each sample.",
        "",
    ]
    for host, sentences in found.items():
        if host is None:
            continue
        lines += [f"## {host}", ""]
        e = env[env["host"] == host] if "host" in env.columns else env.iloc[0:0]
        for _, r in e.iterrows():
            lines.append(f"- Environment ({r['device']}): {r['device_name']}; {r['cores']} cores, {r['threads']} threads; "
                         f"torch {r['torch']}, python {r['python']}, cuda {r['cuda']}; {r['platform']}")  # fmt: skip
        lines += [f"- {s}" for s in sentences] + [""]
    if found[None]:
        lines += ["## Notes", ""] + [f"- {s}" for s in found[None]] + [""]
    return "\n".join(lines)


# --- reStructuredText for the report ------------------------------------------------------------


def rst_table(df: pd.DataFrame, header: list[str]) -> str:
    if df.empty:
        return ""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header] + df.astype(str).replace({"": "–", "nan": "–"}).values.tolist():
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {c}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def answer(found: dict, tables: dict) -> str:
    """Two or three sentences per host: the fixed cost, the crossover, the DataLoader share."""
    fit, cross, dl, runs = tables["fits"], tables["crossover"], tables["dataloader"], tables["runs"]
    out = []
    for host in sorted(h for h in found if h is not None):
        words = []
        for device, f in trusted_by_device(fit, host, fit[fit["host"] == host]["device"]):
            if f.empty:
                words.append(f"On **{host}**, no fit on {device} is trustworthy (too few batch sizes or noisy timings): see the table.")
                continue
            fixed = f"{us(f['a_us'].min())} to {us(f['a_us'].max())} (depending on the mode)" if len(f) > 1 else f"{us(f['a_us'].iloc[0])} ({f['mode'].iloc[0]})"
            per = f"{us(f['b_us'].min())} to {us(f['b_us'].max())}" if len(f) > 1 else us(f["b_us"].iloc[0])
            words.append(
                f"On **{host}**, a training step on {device} costs a fixed {fixed} plus {per} per sample, so at "
                "small batches the step is paid in overhead, not arithmetic."
            )
        hc = cross[(cross["host"] == host) & (cross["verdict"] == "slower below, faster above")]
        if len(hc):
            c = hc.sort_values("crossover_batch_size").iloc[0]
            words.append(
                f"{c['device']} overtakes the cpu from batch size {bs(c['crossover_batch_size'])} in mode {c['mode']} "
                f"(earliest of {len(hc)} mode(s)): its fixed cost per step is {us(c['a_us'])} against "
                f"{us(c['cpu_a_us'])} on the cpu."
            )
        elif set(runs[runs["host"] == host]["device"]) == {"cpu"}:
            words.append("Only the cpu ran on this host, so there is no GPU crossover here.")
        d = dl[dl["host"] == host]
        if len(d):
            parts = ", ".join(f"{share(r)} at batch {r['batch_size']} on {r['device']}" for _, r in d.iterrows())
            words.append(f"Feeding batches through a DataLoader from host memory takes {parts} of the step (DataLoader transfer share).")
        if words:
            out.append(" ".join(words))
    if not out:
        out = [" ".join(found[None]) or "No run succeeded."]
    return "\n\n".join(out) + "\n"


def rst_pages(tables: dict, found: dict) -> dict:
    """The run-specific text of the report: {name: rst}, included by the captions and the workflow page."""
    fit, spd, dl, bw, prof, env = (tables[k] for k in ("fits", "speedup", "dataloader", "bandwidth", "profile", "environment"))
    pages = {}
    f = fit.copy()
    for c in ("a_us", "b_us"):
        f[c] = f[c].map(us)
    f["overhead_bound_below"] = f["overhead_bound_below"].map(bs)
    f["max_rel_err"] = f["max_rel_err"].map(pct)
    fit_table = rst_table(
        f[["host", "device", "mode", "a_us", "b_us", "overhead_bound_below", "batch_sizes", "max_rel_err", "quality"]],
        ["host", "device", "mode", "fixed cost a per step", "cost b per sample", "overhead-bound below batch", "batch sizes", "worst fit error", "fit"],
    )
    d = dl.copy()
    for c in ("module_step_us", "dataloader_step_us", "extra_us", "copy_us"):
        d[c] = d[c].map(us)
    d["extra_share"] = [share(r) for _, r in dl.iterrows()]
    for c in ("copy_share", "profiled_dataloader_share", "profiled_module_share"):
        d[c] = d[c].map(pct)
    dl_table = rst_table(
        d[["host", "device", "batch_size", "module_step_us", "dataloader_step_us", "extra_share", "copy_us", "copy_share", "profiled_dataloader_share", "profiled_module_share"]],
        ["host", "device", "batch", "module step", "dataloader step", "DataLoader transfer share", "copy alone", "copy share", "profiled fetch share (dataloader)", "profiled fetch share (module)"],
    )
    env_cols = ["host", "device", "device_name", "cpu_model", "cores", "threads", "python", "torch", "cuda", "platform", "git_commit", "config_hash"]
    env_table = rst_table(env.reindex(columns=env_cols).astype(object).fillna(""), env_cols) if len(env) else ""
    notes = "".join(f"- {s}\n" for s in found[None])
    pages["answer"] = (
        answer(found, tables)
        + "\n**Fixed cost per step (a) and cost per sample (b)**, fitted as step time = a + b × batch size:\n\n"
        + (fit_table or "No fit: no successful run.\n")
        + "\n**DataLoader transfer share**: the share of a `dataloader` step spent beyond a `module` step "
        "(same model, data already on the device), i.e. batch collation and the host→device copy:\n\n"
        + (dl_table or "Not measured: the run needs both the `module` and the `dataloader` mode.\n")
        + ("\n**Notes**\n\n" + notes if notes else "")
        + "\n**Environment of every host**\n\n"
        + (env_table or "No environment recorded.\n")
    )
    pages["throughput"] = "Fits on this run (a = fixed cost per step, b = cost per sample):\n\n" + (fit_table or "none.\n")
    dev = spd[spd["kind"] == "device"]
    if len(dev):
        best, worst = dev.loc[dev["speedup"].idxmax()], dev.loc[dev["speedup"].idxmin()]
        pages["speedup"] = (
            f"Accelerator over cpu on this run: from {worst['speedup']:.2g}× ({worst['device']}, {worst['mode']}, "
            f"batch {worst['batch_size']}) to {best['speedup']:.2g}× ({best['device']}, {best['mode']}, batch {best['batch_size']}).\n"
        )
    else:
        lad = spd[(spd["kind"] == "mode") & (spd["mode"] != spd["baseline_mode"])]
        if len(lad):
            best = lad.loc[lad["speedup"].idxmax()]
            pages["speedup"] = (
                f"No accelerator ran, so the heatmap shows each mode over {best['baseline_mode']} on the cpu instead: "
                f"best {best['speedup']:.2g}× ({best['mode']}, batch {best['batch_size']}).\n"
            )
        else:
            pages["speedup"] = "Not enough successful runs for a speedup.\n"
    ok = prof[prof["status"] == "ok"] if len(prof) else prof
    if len(ok):
        lines = []
        for _, r in ok[ok["mode"].isin(["module", "dataloader"])].iterrows():
            lines.append(
                f"- {r['host']} {r['device']} {r['mode']} batch {r['batch_size']}: transfer {us(r['transfer_us'])}, "
                f"forward {us(r['forward_us'])}, backward {us(r['backward_us'])}, optimizer {us(r['optimizer_us'])}"
                + ("" if r["device"] == "cpu" else f", device wait {us(r['wait_us'])}")
                + f"; profiled {us(r['step_us_profiled'])} per step vs {us(r['step_us_plain'])} without the profiler."
            )
        pages["breakdown"] = "On this run:\n\n" + ("\n".join(lines) + "\n" if lines else "(module and dataloader were not profiled)\n")
        o = ok.assign(total=ok["ops_step"] + ok["ops_batch"])
        top = o.loc[o["total"].idxmax()]
        pages["ops"] = (
            f"Most ops per step on this run: {top['mode']} at batch {top['batch_size']} on {top['device']}, "
            f"{top['total']:.0f} ({top['ops_batch']:.0f} of them fetching the batch).\n"
        )
    else:
        pages["breakdown"] = pages["ops"] = "No profile succeeded on this run.\n"
    if len(bw):
        pages["bandwidth"] = "".join(
            f"- {r['host']} {r['device']} {r['memory']}: {r['largest_gb_per_s']:.3g} GB/s for {r['largest_bytes'] / 1e6:.3g} MB, "
            f"fixed latency {us(r['latency_us'])}\n"
            for _, r in bw.iterrows()
        )
    else:
        pages["bandwidth"] = "No copy timings.\n"
    pages["accuracy"] = tables["accuracy"]
    return pages


def accuracy_text(runs: pd.DataFrame, target) -> str:
    ok = runs[runs["status"] == "ok"]
    if ok.empty:
        return "No successful run.\n"
    reached = ok[pd.to_numeric(ok["time_to_target_s"], errors="coerce").notna()]
    text = f"{len(reached)} of {len(ok)} successful runs reached test accuracy {target}."
    if len(reached):
        r = reached.loc[pd.to_numeric(reached["time_to_target_s"]).idxmin()]
        text += f" Fastest: {r['device']} · {r['mode']} at batch {r['batch_size']}, in {float(r['time_to_target_s']):.3g} s of training ({r['host']})."
    return text + "\n"


# --- the rule -----------------------------------------------------------------------------------


def write_text(text: str, path) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def analyse(runs, transfer, prof, env, cfg) -> tuple[dict, dict]:
    """All tables and the findings, from data frames (no files): what the tests call."""
    bw = bandwidth(transfer)
    fit = fits(runs)
    tables = dict(
        runs=runs, fits=fit, crossover=crossover(fit, runs), speedup=speedup(runs), bandwidth=bw,
        dataloader=dataloader(runs, bw, prof), profile=prof, environment=env,
        accuracy=accuracy_text(runs, cfg.get("target_accuracy")),
    )  # fmt: skip
    return tables, findings(tables)


def run(inp, out, cfg, log=print) -> None:
    runs, prof = pd.read_csv(inp.runs), pd.read_csv(inp.profile)
    tables, found = analyse(runs, pd.read_csv(inp.transfer), prof, pd.read_csv(inp.environment), cfg)
    for name in ("fits", "crossover", "speedup", "dataloader", "bandwidth"):
        write_csv(tables[name], out[name])
    write_text(summary_md(found, cfg, tables["environment"]), out.summary_md)
    pages = rst_pages(tables, found)
    for name in ("answer", "throughput", "speedup", "breakdown", "accuracy", "bandwidth", "ops"):
        write_text(pages[name], out[f"rst_{name}"])
    for host, sentences in found.items():
        for s in sentences:
            log(f"{host or 'note'}: {s}")
