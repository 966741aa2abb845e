"""The report for many machines: a finished results folder relabelled as N machines (each a
different cpu, its step times scaled by a factor of its own, so that names and speed disagree),
merged through `merge_runs` as a lab or a cluster with many node types would, then the three
steps after training (aggregate, analyse, figures) timed one by one.

    .venv/bin/python bench/fifty_machines.py results --machines 50

Prints each step's wall time, every figure's size in pixels, the headline of summary.md and,
last, the total against its target (60 s for fifty machines). The folder is read, never
written: everything goes to a temporary folder (--keep to keep it).
"""

import argparse
import math
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import pandas as pd  # noqa: E402
from mnistbench.collect import aggregate  # noqa: E402
from mnistbench.config import catalog, schema  # noqa: E402
from mnistbench.report import figures  # noqa: E402
from mnistbench.report import summary as analysis  # noqa: E402
from mnistbench.train.records import COLUMNS  # noqa: E402
from PIL import Image  # noqa: E402

TARGET_S = 60.0  # aggregate + analyse + figures, fifty machines
MAX_PIXELS = 3000  # no figure larger on a side


class Paths(dict):
    """What Snakemake hands a script as its input and output: names as keys and attributes."""

    __getattr__ = dict.__getitem__


def scale_of(k: int, n: int) -> float:
    """Machine k's step times over the original's: up to 2x, in an order unrelated to k."""
    return 2.0 ** (((k * 37) % n) / n) if k else 1.0


def relabel(tables: dict, k: int, n: int) -> dict:
    """The source's tables as machine k: host node<k>, a cpu of its own, step times scaled."""
    s = scale_of(k, n)
    host = f"node{k + 1}"
    out = {}
    for name, df in tables.items():
        df = df.copy()
        if "host" in df.columns:
            df["host"] = host
        if "machine" in df.columns:
            df["machine"] = [re.sub(r"^([^,;]*)", rf"\1 type {k + 1}", m) for m in df["machine"].astype(str)]
        if "cpu_model" in df.columns:
            df["cpu_model"] = df["cpu_model"].astype(str) + f" type {k + 1}"
        if name == "runs":
            for c in ("step_time_median_s", "step_time_q1_s", "step_time_q3_s", "setup_s", "first_epoch_s"):
                df[c] = pd.to_numeric(df[c], errors="coerce") * s
            for c in ("steady_epoch_s", "total_train_s"):
                df[c] = pd.to_numeric(df[c], errors="coerce") * s
            df["samples_per_s"] = pd.to_numeric(df["samples_per_s"], errors="coerce") / s
            df["step_time_blocks_s"] = [
                " ".join(f"{float(t) * s:.9g}" for t in str(b).split()) if isinstance(b, str) else b
                for b in df["step_time_blocks_s"]
            ]
        if name == "epochs":
            for c in ("train_s", "cum_train_s"):
                df[c] = df[c] * s
        if name == "profile":
            for c in [c for c in df.columns if c.endswith("_us")]:
                df[c] = pd.to_numeric(df[c], errors="coerce") * s
        out[name] = df
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a finished pipeline's results/ folder (read only)")
    ap.add_argument("--machines", type=int, default=50)
    ap.add_argument("--keep", type=Path, help="write everything here instead of a temporary folder")
    args = ap.parse_args()
    src = args.results
    summary = src / "summary"
    if not (summary / "runs.csv").is_file():
        sys.exit(f"{src}: no summary/runs.csv (give a finished pipeline's results/ folder)")
    if args.machines < 1:
        sys.exit("--machines must be 1 or more")
    work = args.keep or Path(tempfile.mkdtemp(prefix="fifty-machines-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(src, work, args.machines)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(src: Path, work: Path, n: int) -> None:
    summary = src / "summary"
    tables = {
        name: pd.read_csv(summary / f"{name}.csv") for name in aggregate.TABLES if (summary / f"{name}.csv").exists()
    }
    tables["runs"] = tables["runs"][COLUMNS + [c for c in tables["runs"].columns if c not in COLUMNS]]
    merge = []
    for k in range(1, n):  # machine 0 is the source itself, "this workflow"
        folder = work / "machines" / f"node{k + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, df in relabel(tables, k, n).items():
            df.to_csv(folder / f"{name}.csv", index=False)
        merge.append(folder / "runs.csv")
    cfg = schema.defaults()
    out = work / "results"
    (out / "summary" / "report").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    agg_out = Paths({name: out / "summary" / f"{name}.csv" for name in [*aggregate.TABLES, "summary", "left_out"]})
    quiet = lambda s: None  # noqa: E731
    row_files = sorted((src / "runs").rglob("r*.csv"))
    env_files = [f.with_suffix(".json") for f in row_files]
    profiles = sorted((src / "profile").glob("*.csv"))
    times, cpu = {}, {}

    t0, c0 = time.perf_counter(), time.process_time()
    aggregate.run(row_files, env_files, src / "preload" / "transfer.csv", profiles, merge, [], agg_out, cfg, log=quiet)
    times["aggregate"], cpu["aggregate"] = time.perf_counter() - t0, time.process_time() - c0

    ana_in = Paths(
        runs=agg_out.runs, transfer=agg_out.transfer, environment=agg_out.environment, profile=agg_out.profile
    )
    ana_out = Paths({name: out / "summary" / f"{name}.csv" for name in catalog.TABLES})
    ana_out.update({f"rst_{name}": out / "summary" / "report" / f"{name}.rst" for name in [*catalog.FIGURES, "answer"]})
    ana_out["summary_md"], ana_out["facts"] = out / "summary.md", out / "summary" / "facts.json"
    t0, c0 = time.perf_counter(), time.process_time()
    analysis.run(ana_in, ana_out, cfg, log=quiet)
    times["analyse"], cpu["analyse"] = time.perf_counter() - t0, time.process_time() - c0

    fig_in = Paths({name: out / "summary" / f"{name}.csv" for name in catalog.inputs()}, facts=ana_out["facts"])
    fig_out = Paths({name: out / "figures" / f"{name}.png" for name in catalog.FIGURES})
    f = cfg["figures"]
    t0, c0 = time.perf_counter(), time.process_time()
    figures.render(fig_in, fig_out, dpi=f["dpi"], style=f["style"], target=cfg["target_accuracy"], log=quiet)
    times["figures"], cpu["figures"] = time.perf_counter() - t0, time.process_time() - c0

    runs = pd.read_csv(agg_out.runs)
    print(f"{n} machines, {len(runs)} runs, from {src}")
    for step, t in times.items():
        print(f"{step}: {t:.1f} s wall, {cpu[step]:.1f} s cpu of this process")
    worst = 0
    for name, path in fig_out.items():
        with Image.open(path) as im:
            w, h = im.size
        worst = max(worst, w, h)
        print(f"figure {name}: {w} x {h} px, {path.stat().st_size / 1e3:.0f} kB")
    md = Path(ana_out["summary_md"]).read_text()
    head = md.split("## The headline", 1)[-1].split("\n## ", 1)[0]
    bullets = [line for line in head.splitlines() if line.startswith("- ")]
    print(f"summary.md: {len(md) / 1e3:.0f} kB, {len(bullets)} headline bullets:")
    for line in bullets:
        print(f"  {line}")
    total = sum(times.values())
    target = TARGET_S * n / 50 if n > 50 else TARGET_S
    ok = total <= target and worst <= MAX_PIXELS
    print(
        f"total {total:.1f} s for {n} machines, largest figure side {worst} px: "
        f"{total / target:.2f}x (target <= {target:.0f} s, <= {MAX_PIXELS} px){'' if ok else ' MISSED'}"
    )
    assert math.isfinite(total)


if __name__ == "__main__":
    main()
