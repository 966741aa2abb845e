"""What moving data costs, computed from the preload's copy timings and the runs (pandas + numpy):
the bandwidth of each copy, and what feeding batches through a DataLoader costs next to `module`.
"""

import math

import numpy as np
import pandas as pd

from mnistbench.collect import uncertainty
from mnistbench.collect.aggregate import succeeded
from mnistbench.report.tables import add_interval_columns, medians, of_place, replicates, reps_of

BYTES_PER_SAMPLE = 784 * 4 + 8  # float32 image + int64 label: what a DataLoader batch copies


def bandwidth(transfer: pd.DataFrame) -> pd.DataFrame:
    """Per host x device x memory: copy time = latency + bytes / bandwidth (the robust fit of
    collect/uncertainty.py), the bandwidth measured on the largest copy, pinned over pageable."""
    cols = ["host", "device", "memory", "latency_us", "fit_gb_per_s", "largest_bytes", "largest_gb_per_s"]
    cols += ["pinned_over_pageable", "note"]
    rows = []
    for (host, device, memory), g in transfer.groupby(["host", "device", "memory"], sort=True):
        f = uncertainty.fit_line(g["bytes"], g["seconds"])
        big = g.loc[g["bytes"].idxmax()]
        rows.append(
            dict(host=host, device=device, memory=memory, latency_us=f["a"] * 1e6, note=f["note"])
            | dict(fit_gb_per_s=1e-9 / f["b"] if f["b"] > 0 else math.nan, largest_bytes=int(big["bytes"]))
            | dict(largest_gb_per_s=big["gb_per_s"])
        )
    out = pd.DataFrame(rows, columns=cols)
    for _, g in out.groupby(["host", "device"]):
        pinned, pageable = g[g["memory"] == "pinned"], g[g["memory"] == "pageable"]
        if len(pinned) and len(pageable):
            ratio = pinned["largest_gb_per_s"].iloc[0] / pageable["largest_gb_per_s"].iloc[0]
            out.loc[g.index, "pinned_over_pageable"] = ratio
    return out


def copy_seconds(bw: pd.DataFrame, device, nbytes) -> float:
    """Predicted time of one host->device copy of nbytes on a place (`bw`: its rows, of_place),
    from the fitted line of the memory kind the DataLoader uses (pinned where the device has it,
    pageable elsewhere; on the cpu a host memcpy, which is what the DataLoader's collation does)."""
    g = bw[bw["device"] == device]
    if g.empty:
        return math.nan
    want = "pinned" if (g["memory"] == "pinned").any() else "pageable"
    r = g[g["memory"] == want]
    r = (r if len(r) else g).iloc[0]
    if not (np.isfinite(r["latency_us"]) and np.isfinite(r["fit_gb_per_s"])):
        return math.nan
    return r["latency_us"] * 1e-6 + nbytes / (r["fit_gb_per_s"] * 1e9)


def dataloader(runs: pd.DataFrame, bw: pd.DataFrame, prof: pd.DataFrame, use=("ok",), reps=None) -> pd.DataFrame:
    """What the DataLoader path costs per step next to `module` (the same network fed from tensors
    already on the device), per place x device x network x batch size (a place's copies are its
    host's: the preload times them per host).

    extra_share: (dataloader step - module step) / dataloader step, from the timed runs, with its
    interval over the replicates of both medians. copy_share: the host->device copy alone
    (predicted from the preload's copy timings) over the dataloader step. profiled_*_share: the
    batch fetch's share of a profiled step, for both modes.
    """
    reps = replicates(runs, use) if reps is None else reps
    med = medians(runs, use)
    keys = ["place", "device", "model", "batch_size"]
    cols = [*keys, "module_step_us", "dataloader_step_us", "extra_us", "extra_share", "extra_share_lo"]
    cols += ["extra_share_hi", "copy_us", "copy_share", "profiled_dataloader_share", "profiled_module_share", "note"]
    mod = med[med["mode"] == "module"].drop(columns="mode")
    dl = med[med["mode"] == "dataloader"].drop(columns="mode")
    both = dl.merge(mod, on=keys, suffixes=("_dl", "_mod"))
    if both.empty:
        return pd.DataFrame(columns=cols)
    both["module_step_us"] = both["step_time_median_s_mod"] * 1e6
    both["dataloader_step_us"] = both["step_time_median_s_dl"] * 1e6
    both["extra_us"] = both["dataloader_step_us"] - both["module_step_us"]
    both["extra_share"] = both["extra_us"] / both["dataloader_step_us"]
    at = list(zip(*(both[k] for k in keys)))
    add_interval_columns(
        both,
        "extra_share",
        [1 - reps_of(reps, p, d, m, "module", b) / reps_of(reps, p, d, m, "dataloader", b) for p, d, m, b in at],
    )
    both["copy_us"] = [copy_seconds(of_place(bw, runs, p), d, b * BYTES_PER_SAMPLE) * 1e6 for p, d, _, b in at]
    both["copy_share"] = both["copy_us"] / both["dataloader_step_us"]
    both["note"] = np.where(both["extra_us"] < 0, "dataloader measured faster than module: within the noise", "")
    placed = [of_place(prof, runs, p).assign(place=p) for p in both["place"].unique()]
    placed = pd.concat(placed, ignore_index=True) if placed else prof.iloc[0:0]
    for mode in ("dataloader", "module"):  # a place's profile is its hosts', as its copies are
        both[f"profiled_{mode}_share"] = math.nan
        if len(placed):  # the last profile of a combination profiled twice
            p = succeeded(placed[placed["mode"] == mode])
            p = p.assign(share=p["transfer_us"] / p["step_us_profiled"]).drop_duplicates(keys, keep="last")
            both[f"profiled_{mode}_share"] = both[keys].merge(p[[*keys, "share"]], on=keys, how="left")["share"]
    return both[cols].sort_values(keys, ignore_index=True)
