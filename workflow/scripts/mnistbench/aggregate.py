"""Every run's CSV row into one table, the per-combination summary, and the runs of other machines
merged in by host (pandas)."""

import json
import os
from pathlib import Path

import pandas as pd

KEYS = ["host", "device", "mode", "batch_size"]
# Tables that travel between machines: each file name is the same in every results/summary/.
TABLES = ("runs", "epochs", "environment", "transfer", "profile")
ENV_COLUMNS = [
    "host", "device", "device_name", "cpu_model", "cores", "threads", "python", "torch", "torchvision",
    "cuda", "cudnn", "platform", "env", "git_commit", "config_hash", "n_runs",
]  # fmt: skip


def write_csv(df: pd.DataFrame, path) -> None:
    tmp = f"{path}.tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def load_epochs(env_files) -> pd.DataFrame:
    rows = []
    for f in env_files:
        rec = json.loads(Path(f).read_text())
        r = rec["row"]
        for e in rec["epochs"]:
            rows.append(dict({k: r[k] for k in KEYS + ["repeat"]}, **e))
    cols = KEYS + ["repeat", "epoch", "train_s", "cum_train_s", "test_loss", "test_accuracy"]
    return pd.DataFrame(rows, columns=cols)


def load_environment(env_files) -> pd.DataFrame:
    """One row per host x device: what its timings depend on besides the code (the first run's
    record; `n_runs` counts the runs behind it)."""
    rows = {}
    for f in env_files:
        e = json.loads(Path(f).read_text())["environment"]
        key = (e["host"], e["device"])
        if key in rows:
            rows[key]["n_runs"] += 1
            continue
        row = {c: e.get(c, "") for c in ENV_COLUMNS}
        row["env"] = " ".join(f"{k}={v}" for k, v in (e.get("env") or {}).items())
        row["n_runs"] = 1
        rows[key] = row
    return pd.DataFrame(list(rows.values()), columns=ENV_COLUMNS)


def load_profiles(files) -> pd.DataFrame:
    """The profile rule's tables, one per device."""
    frames = [pd.read_csv(f) for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["host", "mode", "status"])


def siblings(runs_csv) -> dict:
    """Another machine's tables: its runs.csv and, when present, the other TABLES next to it (a
    copy of its results/summary/ folder)."""
    folder = Path(runs_csv).parent
    out = {"runs": pd.read_csv(runs_csv)}
    for name in TABLES[1:]:
        f = folder / f"{name}.csv"
        if f.exists():
            out[name] = pd.read_csv(f)
    return out


def merge_by_host(sources, log=print) -> tuple[dict, dict]:
    """Merge tables from several machines. `sources` is [(label, {table: DataFrame})], this
    machine first. Each host's rows come from the first source that has it in any table (on a
    cluster the preload and profile jobs may run on a node no train job used), so a stale copy of
    a host's results never mixes with a fresh run of the same host. Returns ({table: DataFrame},
    {host: label of its source})."""
    owner = {}  # host -> label of the source its rows come from
    merged = {name: [] for name in TABLES}
    for label, tables in sources:
        hosts = sorted({h for df in tables.values() if "host" in df.columns for h in df["host"]})
        new = [h for h in hosts if h not in owner]
        for h in hosts:
            if h in owner:
                log(f"host {h} in {label} skipped: already taken from {owner[h]}")
            else:
                owner[h] = label
        for name, df in tables.items():
            if "host" in df.columns:
                merged[name].append(df[df["host"].isin(new)])
    out = {}
    for name, frames in merged.items():
        full = [f for f in frames if len(f)]
        empty = frames[0].iloc[:0] if frames else pd.DataFrame(columns=["host"])  # keeps the columns
        out[name] = pd.concat(full, ignore_index=True) if full else empty
    return out, owner


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


def run(row_files, env_files, transfer_csv, profile_files, merge_files, left_out, out, log=print) -> None:
    here = {
        "runs": pd.concat([pd.read_csv(f) for f in row_files], ignore_index=True),
        "epochs": load_epochs(env_files),
        "environment": load_environment(env_files),
        "transfer": pd.read_csv(transfer_csv),
        "profile": load_profiles(profile_files),
    }
    sources = [("this workflow", here)] + [(str(f), siblings(f)) for f in merge_files]
    tables, owner = merge_by_host(sources, log=log)
    runs = tables["runs"].sort_values(KEYS + ["repeat"], ignore_index=True)
    summary = summarise(runs)
    write_csv(runs, out.runs)
    write_csv(summary, out.summary)
    write_csv(tables["epochs"], out.epochs)
    write_csv(tables["environment"], out.environment)
    write_csv(tables["transfer"], out.transfer)
    write_csv(tables["profile"], out.profile)
    write_csv(pd.DataFrame(left_out, columns=["device", "mode", "reason"]), out.left_out)
    for host, label in owner.items():
        log(f"host {host}: from {label}")
    log(f"{len(runs)} runs ({(runs['status'] == 'ok').sum()} ok) in {len(summary)} combinations")
    for d, m, why in left_out:
        log(f"left out {d} x {m}: {why}")
