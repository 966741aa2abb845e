"""Every run's CSV row into one table, and the per-combination summary (pandas)."""

import json
import os
from pathlib import Path

import pandas as pd

KEYS = ["host", "device", "mode", "batch_size"]


def write_csv(df: pd.DataFrame, path) -> None:
    tmp = f"{path}.tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def load_runs(row_files) -> pd.DataFrame:
    runs = pd.concat([pd.read_csv(f) for f in row_files], ignore_index=True)
    return runs.sort_values(KEYS + ["repeat"], ignore_index=True)


def load_epochs(env_files) -> pd.DataFrame:
    rows = []
    for f in env_files:
        rec = json.loads(Path(f).read_text())
        r = rec["row"]
        for e in rec["epochs"]:
            rows.append(dict({k: r[k] for k in KEYS + ["repeat"]}, **e))
    cols = KEYS + ["repeat", "epoch", "train_s", "cum_train_s", "test_loss", "test_accuracy"]
    return pd.DataFrame(rows, columns=cols)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per host x device x mode x batch size: median and IQR of samples/s over the repeats that
    succeeded, and how many did."""
    ok = runs[runs["status"] == "ok"]
    g = ok.groupby(KEYS)["samples_per_s"]
    stats = pd.DataFrame(
        {
            "samples_per_s_median": g.median(),
            "samples_per_s_q1": g.quantile(0.25),
            "samples_per_s_q3": g.quantile(0.75),
            "step_time_median_s": ok.groupby(KEYS)["step_time_median_s"].median(),
            "test_accuracy_median": ok.groupby(KEYS)["test_accuracy"].median(),
            "final_loss_median": ok.groupby(KEYS)["final_loss"].median(),
        }
    )
    stats["samples_per_s_iqr"] = stats["samples_per_s_q3"] - stats["samples_per_s_q1"]
    counts = runs.groupby(KEYS).agg(
        device_name=("device_name", "first"),
        n_runs=("status", "size"),
        n_ok=("status", lambda s: int((s == "ok").sum())),
        statuses=("status", lambda s: ",".join(sorted(set(s)))),
    )
    return counts.join(stats, how="left").reset_index()


def run(row_files, env_files, left_out, out, log=print) -> None:
    runs = load_runs(row_files)
    summary = summarise(runs)
    write_csv(runs, out.runs)
    write_csv(summary, out.summary)
    write_csv(load_epochs(env_files), out.epochs)
    write_csv(pd.DataFrame(left_out, columns=["device", "mode", "reason"]), out.left_out)
    log(f"{len(runs)} runs ({(runs['status'] == 'ok').sum()} ok) in {len(summary)} combinations")
    for d, m, why in left_out:
        log(f"left out {d} x {m}: {why}")
