"""Every run's CSV row into one table, the per-combination summary, and the runs of other machines
merged in by host (pandas). The summary pools by machine (the hardware, machines.py), so repeats
on identical nodes share a row. Runs made with different settings never share a summary."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mnistbench import BenchError, files
from mnistbench.collect import uncertainty
from mnistbench.config import schema
from mnistbench.measure import machines
from mnistbench.train.records import ADDED, COLUMNS, INTEGER, NUMBER

# A combination of the summary: runs pool by the machine they ran on (its hardware), not by host.
MACHINE_KEYS = ["machine", "device", "model", "mode", "batch_size", "models_at_once"]
# Tables that travel between machines: each file name is the same in every results/summary/.
TABLES = ("runs", "epochs", "environment", "transfer", "profile")
ENV_COLUMNS = [
    "host",
    "device",
    "device_name",
    "cpu_model",
    "cores",
    "threads",
    "fma_gflops",
    "denormal_cost",
    "denormal_cost_lo",
    "denormal_cost_hi",
    "c_modes_flush",
    "python",
    "torch",
    "torchvision",
    "cuda",
    "cudnn",
    "platform",
    "env",
    "git_commit",
    "config_hash",
    "n_runs",
]


def load_records(env_files) -> list[dict]:
    """Every run's JSON record, read once."""
    return [json.loads(Path(f).read_text()) for f in env_files]


def load_epochs(records) -> pd.DataFrame:
    rows = []
    for rec in records:
        r = rec["row"]
        for e in rec["epochs"]:
            rows.append(dict({k: r.get(k, 1) for k in ["host", *MACHINE_KEYS, "repeat"]}, **e))
    cols = ["host", *MACHINE_KEYS, "repeat", "epoch", "train_s", "cum_train_s", "test_loss", "test_accuracy"]
    return pd.DataFrame(rows, columns=cols)


def load_environment(records) -> pd.DataFrame:
    """One row per host x device: what its timings depend on besides the code (the first run's
    record; `n_runs` counts the runs behind it). The cost of a denormal number is measured by every
    process: its median over the host's processes, with an interval over them."""
    rows, costs = {}, {}
    for rec in records:
        e = rec["environment"]
        key = (e["host"], e["device"])
        if e.get("denormal_cost") is not None:
            costs.setdefault(key, {})[e.get("pid")] = e["denormal_cost"]
        if key in rows:
            rows[key]["n_runs"] += 1
            continue
        row = {c: e.get(c, "") for c in ENV_COLUMNS}
        row["env"] = " ".join(f"{k}={v}" for k, v in (e.get("env") or {}).items())
        row["n_runs"] = 1
        rows[key] = row
    for key, row in rows.items():
        med, lo, hi = uncertainty.median_over_runs(list(costs.get(key, {}).values()), key, stream="denormal")
        row.update(denormal_cost=med, denormal_cost_lo=lo, denormal_cost_hi=hi)
    return pd.DataFrame(list(rows.values()), columns=ENV_COLUMNS)


def load_profiles(files_) -> pd.DataFrame:
    """The profile rule's tables, one per device."""
    frames = [pd.read_csv(f) for f in files_]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["host", "mode", "status"])


def read_runs(path) -> pd.DataFrame:
    """A runs.csv (this workflow's or another machine's), checked and typed: BenchError naming the
    file and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(
            f"{path}: no such file (merge_runs lists copies of another machine's results/summary/runs.csv)"
        )
    try:
        df = pd.read_csv(path)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise BenchError(
            f"{path}: not a CSV table of runs ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
        ) from None
    has_columns(df, path)
    return typed(df, path)


def has_columns(df: pd.DataFrame, path) -> None:
    """Refuses a table that lacks a column of this version's runs.csv, after filling in (in
    place) those an earlier version did not write (records.ADDED)."""
    if "dropped_samples" not in df.columns and {"train_samples", "batch_size"} <= set(df.columns):
        df["dropped_samples"] = pd.to_numeric(df["train_samples"], errors="coerce") % df["batch_size"]
    for c in ADDED:
        if c not in df.columns:
            df[c] = 1 if c == "models_at_once" else np.nan
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise BenchError(
            f"{path}: not a runs.csv of this version of mnist-device-bench (missing columns: {', '.join(missing[:8])}"
            f"{' ...' if len(missing) > 8 else ''}); rerun that machine's pipeline with this code"
        )


def read_rows(paths) -> pd.DataFrame:
    """The train jobs' one-row CSVs as one checked table: each file read and its columns checked,
    the numbers typed once for all of them (a file per run: checking each on its own cost most of
    the aggregate step); a bad value is named with its file, as read_runs names it."""
    frames = []
    for path in paths:
        try:
            df = pd.read_csv(path)
        except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError):
            return pd.concat([read_runs(p) for p in paths], ignore_index=True)  # names the file
        has_columns(df, path)
        frames.append(df)
    try:
        return typed(pd.concat(frames, ignore_index=True), "the train jobs' rows")
    except BenchError:
        for path in paths:
            read_runs(path)  # names the file that holds it
        raise


def typed(df: pd.DataFrame, path) -> pd.DataFrame:
    """A runs table's numeric columns as numbers: BenchError naming the file and the column."""
    for c in INTEGER + NUMBER:
        values = pd.to_numeric(df[c].replace("", pd.NA), errors="coerce")
        bad = df[c].notna() & (df[c].astype(str) != "") & values.isna()
        if bad.any():
            raise BenchError(f"{path}: column {c} holds {df[c][bad].iloc[0]!r}, not a number")
        if c in INTEGER:
            if (values.dropna() % 1 != 0).any():
                raise BenchError(f"{path}: column {c} holds a fraction where a whole number belongs")
            values = values.astype("Int64")
        df[c] = values
    return df


def check_source(path) -> None:
    """Raise BenchError if another machine's runs.csv cannot be merged (used before any job runs)."""
    read_runs(path)


def siblings(runs_csv) -> dict:
    """Another machine's tables: its runs.csv and, when present, the other TABLES next to it (a
    copy of its results/summary/ folder)."""
    folder = Path(runs_csv).parent
    out = {"runs": read_runs(runs_csv)}
    for name in TABLES[1:]:
        f = folder / f"{name}.csv"
        if f.exists():
            try:
                out[name] = pd.read_csv(f)
            except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
                raise BenchError(f"{f}: not a CSV table ({type(e).__name__})") from None
    return out


def merge_by_host(sources, log=print) -> tuple[dict, dict]:
    """Merge tables from several machines. `sources` is [(label, {table: DataFrame})], this
    machine first. Each host's rows come from the first source that has it in any table (on a
    cluster the preload and profile jobs may run on a node no train job used), so a stale copy of
    a host's results never mixes with a fresh run of the same host. Returns ({table: DataFrame},
    {host: label of its source})."""
    owner = {}  # host -> label of the source its rows come from
    merged = {name: [] for name in TABLES}
    seen = {}  # a run's start, end and step time -> (host, label): the same run under two names
    for label, tables in sources:
        hosts = sorted({h for df in tables.values() if "host" in df.columns for h in df["host"]})
        new = [h for h in hosts if h not in owner]
        for key, host in run_keys(tables.get("runs"), new):
            if key in seen and seen[key][0] != host:
                first, where = seen[key]
                raise BenchError(
                    f"{label}: the runs of host {host} are the runs of host {first} from {where} under "
                    f"another name (the same start times and step times): a copy of the same results; "
                    "drop it from merge_runs"
                )
            seen.setdefault(key, (host, label))
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


def run_keys(runs, hosts) -> list:
    """[((start, end, step time), host)] of the runs of `hosts` that say when they ran: two
    processes never start, end and time their steps to the same microsecond, so a key seen under
    two host names is one run copied."""
    if runs is None or runs.empty or "start_utc" not in runs.columns:
        return []
    r = runs[runs["host"].isin(hosts) & runs["start_utc"].notna() & (runs["start_utc"].astype(str) != "")]
    col = lambda c: r[c].astype(str) if c in r.columns else pd.Series("", index=r.index)  # noqa: E731
    keys = zip(col("start_utc"), col("end_utc"), col("step_time_median_s"))
    return list(zip(keys, r["host"]))


def check_settings(runs: pd.DataFrame) -> list[str]:
    """Refuse (BenchError naming the key and the runs) to summarise runs made with different
    settings (the keys the schema marks x-run); grid axes (host, device, network, mode, batch
    size, repeat) may differ. Host-level settings may differ between hosts, not within one; one
    network's runs must all be of the same module file. Returns notes on code that differs
    between hosts."""
    if runs.empty:
        return []
    host_settings = schema.run_keys("host")
    parsed = [json.loads(s) if isinstance(s, str) and s else {} for s in runs["settings"]]
    table = pd.DataFrame(parsed, index=runs.index)
    for key in table.columns:
        scope = [runs["host"]] if key in host_settings else []
        groups = table.groupby(scope)[key] if scope else [(None, table[key])]
        for _, values in groups:
            distinct = values.astype(str).unique()
            if len(distinct) > 1:
                who = [
                    f"{runs.loc[values.index[values.astype(str) == v][0], 'host']}:"
                    f"{runs.loc[values.index[values.astype(str) == v][0], 'mode']} (and others) has {v}"
                    for v in distinct[:3]
                ]
                raise BenchError(
                    f"runs made with different settings cannot share one summary: `{key}` differs ({'; '.join(who)}); "
                    "rerun the stale runs (snakemake reruns them when their settings change) or drop that "
                    "machine from merge_runs"
                )
    digests = runs.groupby("model")["model_digest"].agg(lambda s: sorted(set(s.dropna().astype(str)) - {""}))
    for name, d in digests.items():
        if len(d) > 1:
            raise BenchError(
                f"the runs of model {name} were made from different versions of its file (sha256 "
                f"{', '.join(x[:12] for x in d)}); rerun the stale runs or drop that machine from merge_runs"
            )
    notes = []
    codes = runs.groupby("host")["code"].agg(lambda s: sorted(set(map(str, s))))
    for host, c in codes.items():
        if len(c) > 1:
            raise BenchError(f"the runs of host {host} were made by different code ({', '.join(c)}); rerun them")
    if codes.map(tuple).nunique() > 1:
        notes.append(
            "hosts ran different versions of the training code: "
            + "; ".join(f"{h} {c[0]}" for h, c in codes.items())
            + " (merged from other machines; compare their numbers with that in mind)"
        )
    return notes


def with_models_at_once(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with their K (`models_at_once`): a table of runs from before K trained one model each."""
    return runs if "models_at_once" in runs.columns else runs.assign(models_at_once=1)


def succeeded(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows (runs, profiles) whose job ended with status ok, whatever their timing verdict: what
    the learning figures, the accuracy sentences and the profile pages may show."""
    return runs[runs["status"] == "ok"] if len(runs) else runs


def usable(runs: pd.DataFrame, use=("ok",)) -> pd.DataFrame:
    """Runs the timing analysis uses: succeeded, and a timing verdict in `use` (quality.use). The
    one definition: tables, sentences and figures all take their runs from here."""
    ok = succeeded(runs)
    return ok[ok["quality"].isin(list(use))]


def kept_over_all(ok: pd.DataFrame, keys=MACHINE_KEYS) -> pd.DataFrame:
    """Per combination of the runs `ok`: the median over its runs of each run's step time (the
    kept steps) over its median over all timed steps (`kept_over_all`, below 1 where the slowed-
    stretch rule left slow steps out), its 95 % interval over the runs, and whether the two differ
    by more than it (`all_steps_differ`: the interval excludes 1; "" without an interval)."""
    rows = []
    if "step_time_all_steps_s" in ok.columns:
        for key, g in ok.groupby(list(keys), sort=False):
            all_steps = pd.to_numeric(g["step_time_all_steps_s"], errors="coerce")
            r = pd.to_numeric(g["step_time_median_s"], errors="coerce") / all_steps
            med, lo, hi = uncertainty.median_over_runs(r, key, stream="kept/all")
            differ = "" if np.isnan(lo) else bool(hi < 1 or lo > 1)
            rows.append(
                dict(
                    zip(keys, key), kept_over_all=med, kept_over_all_lo=lo, kept_over_all_hi=hi, all_steps_differ=differ
                )
            )
    columns = list(keys) + ["kept_over_all", "kept_over_all_lo", "kept_over_all_hi", "all_steps_differ"]
    return pd.DataFrame(rows, columns=columns)


def summarise(runs: pd.DataFrame, use=("ok",), repeat_spread=1.25, intervals=True) -> pd.DataFrame:
    """Per machine x device x network x mode x batch size (`host`: the hosts it ran on): median and IQR of
    samples/s over the usable repeats (status ok, timing verdict in `use`) with the 95 % interval
    of the median (`_lo`, `_hi`: over processes and the steps within them; none with one usable
    run), how many runs were usable, and whether the repeats agree (their median step times within
    a factor of repeat_spread)."""
    runs = with_models_at_once(runs)
    ok = usable(runs, use)
    g = ok.groupby(MACHINE_KEYS)
    stats = pd.DataFrame(
        {
            "samples_per_s_median": g["samples_per_s"].median(),
            "samples_per_s_q1": g["samples_per_s"].quantile(0.25),
            "samples_per_s_q3": g["samples_per_s"].quantile(0.75),
            "step_time_median_s": g["step_time_median_s"].median(),
            "test_accuracy_median": g["test_accuracy"].median(),
            "final_loss_median": g["final_loss"].median(),
            "repeat_spread": g["step_time_median_s"].max() / g["step_time_median_s"].min(),
        }
    )
    stats["samples_per_s_iqr"] = stats["samples_per_s_q3"] - stats["samples_per_s_q1"]
    # The point is the batch size over the median step time, as every table of the report counts
    # it and as its interval is drawn: the median of the runs' own rates is the same for an odd
    # number of runs and would differ from both for an even one.
    stats["samples_per_s_median"] = stats.index.get_level_values("batch_size") / stats["step_time_median_s"]
    # Beside the step time of the kept steps, the median over all timed steps (what the step time
    # would be without the slowed-stretch rule), pooled the same way, with its interval.
    all_steps = ok.assign(
        step_time_median_s=pd.to_numeric(ok.get("step_time_all_steps_s", np.nan), errors="coerce"),
        step_time_blocks_s=ok.get("step_time_all_blocks_s", ""),
    ).dropna(subset=["step_time_median_s"])
    stats["step_time_all_steps_s"] = all_steps.groupby(MACHINE_KEYS)["step_time_median_s"].median()
    all_bounds = {
        key: uncertainty.interval(uncertainty.medians(drawn))
        for key, drawn in (
            uncertainty.replicates(all_steps, MACHINE_KEYS, stream="all steps") if intervals else {}
        ).items()
    }
    for i, side in enumerate(("lo", "hi")):
        stats[f"step_time_all_steps_s_{side}"] = [all_bounds.get(k, (np.nan, np.nan))[i] for k in stats.index]
    stats = stats.join(kept_over_all(ok).set_index(MACHINE_KEYS))
    # The 95 % interval of the median samples/s over processes (uncertainty.py); none for one run.
    # Without `intervals` (a caller that reads only the spread of the repeats), NaN: no replicates.
    drawn_all = uncertainty.replicates(ok, MACHINE_KEYS) if intervals else {}
    bounds = {
        key: uncertainty.interval(key[MACHINE_KEYS.index("batch_size")] / uncertainty.medians(drawn))
        for key, drawn in drawn_all.items()
    }
    stats["samples_per_s_lo"] = [bounds.get(k, (np.nan, np.nan))[0] for k in stats.index]
    stats["samples_per_s_hi"] = [bounds.get(k, (np.nan, np.nan))[1] for k in stats.index]
    counts = runs.groupby(MACHINE_KEYS).agg(
        host=("host", lambda s: ",".join(machines.by_name(s))),
        device_name=("device_name", "first"),
        n_runs=("status", "size"),
        statuses=("status", lambda s: ",".join(sorted(set(s)))),
        qualities=("quality", lambda s: ",".join(sorted(set(s.dropna().astype(str)) - {""}))),
    )
    counts["n_ok"] = ok.groupby(MACHINE_KEYS).size().reindex(counts.index, fill_value=0)
    out = counts.join(stats, how="left").reset_index()
    out["interval"] = [
        "no usable run" if n == 0 else "one usable run: no interval" if n == 1 else "95 %" for n in out["n_ok"]
    ]
    out["repeats_agree"] = [
        "" if n < 2 or pd.isna(s) else bool(s <= repeat_spread) for n, s in zip(out["n_ok"], out["repeat_spread"])
    ]
    return out


def run(
    row_files, env_files, transfer_csv, profile_files, merge_files, left_out, out, cfg, log=print, later=()
) -> None:
    """Write the summary tables. When it refuses (BenchError), Snakemake removes these outputs;
    the files made from them (`later`: the analysis, the figures) go too, so the results folder
    never holds figures and fits of runs that no longer have a summary."""
    try:
        _run(row_files, env_files, transfer_csv, profile_files, merge_files, left_out, out, cfg, log)
    except BenchError:
        for path in later:
            Path(path).unlink(missing_ok=True)
        raise


def _run(row_files, env_files, transfer_csv, profile_files, merge_files, left_out, out, cfg, log) -> None:
    records = load_records(env_files)
    here = {
        "runs": read_rows(row_files),
        "epochs": load_epochs(records),
        "environment": load_environment(records),
        "transfer": pd.read_csv(transfer_csv),
        "profile": load_profiles(profile_files),
    }
    # Every merged file is read and checked before anything is written.
    sources = [("this workflow", here)] + [(str(f), siblings(f)) for f in merge_files]
    tables, owner = merge_by_host(sources, log=log)
    runs = tables["runs"].sort_values(MACHINE_KEYS + ["repeat"], ignore_index=True)
    notes = check_settings(runs)
    q = cfg["quality"]
    summary = summarise(runs, q["use"], q["repeat_spread"])
    files.write_csv(out.runs, runs)
    files.write_csv(out.summary, summary)
    for name in TABLES[1:]:
        files.write_csv(out[name], tables[name])
    files.write_csv(
        out.left_out, pd.DataFrame(left_out, columns=["device", "model", "mode", "models_at_once", "reason"])
    )
    for host, label in owner.items():
        log(f"host {host}: from {label}")
    for note in notes:
        log(f"note: {note}")
    n_ok = int((summary["n_ok"]).sum())
    log(f"{len(runs)} runs ({n_ok} usable: status ok, timing {', '.join(q['use'])}) in {len(summary)} combinations")
    for d, net, m, k, why in left_out:
        log(f"left out {d} x {net} x {m}" + (f" x {k} at once" if k > 1 else "") + f": {why}")
