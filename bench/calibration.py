"""Are the intervals right? The same grid run twice, as two independent pipeline runs (each in its
own working directory: its own warm workers, so its own processes), one after the other.

For every median samples/s and every headline ratio (each mode's factor over the beginner's code
at the smallest and the largest batch, the headline's own among them) it forms run 2 / run 1 with
its 95 % interval from both runs' bootstrap replicates (uncertainty.py) and prints the share of
those intervals that contain 1 (target >= 90 %: two runs of one config agree that nothing
changed), and the median relative width of the medians' intervals, (hi - lo) / median (target
<= 25 %: an interval wide enough to always contain 1 says nothing). Each run's wall time and the
share of it outside timed training are printed too (the default run's targets: <= 10 min, <= 25 %).

    python bench/calibration.py [--configfile offline.yaml ...] [--workdir DIR] [--config k=v ...]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import run_workflow  # noqa: E402
import yaml  # noqa: E402
from mnistbench.collect import uncertainty  # noqa: E402
from mnistbench.data import synthetic  # noqa: E402
from mnistbench.measure import machines  # noqa: E402
from mnistbench.report import tables as tbl  # noqa: E402

# Only proves the script works end to end (used by the tests): too small to judge anything.
QUICK = dict(
    devices=["cpu"],
    modes=["seed", "manual"],
    batch_sizes=[8, 64],
    repeats=2,
    epochs=2,
    train_samples=512,
    test_samples=64,
    min_timed_s=0.05,
    retime=0,
)


def pipeline(wd: Path, configfiles: list, config: list, targets=()) -> float:
    """One whole default run (`snakemake --cores all`, or up to `targets`) in its own working
    directory: its wall s."""
    cmd = run_workflow.command(wd, "all", targets, [REPO / "config" / "config.yaml", *configfiles], config)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: the pipeline failed in {wd} ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def replicates(runs: pd.DataFrame, name: str) -> dict:
    """One run's replicates, as the report draws them (analysis.replicates), as a stream of its
    own: both runs hold the same keys, and replicates seeded by the key alone would draw the same
    shift between processes in both, so that run 2 / run 1 would lose it and its interval would
    be far too narrow."""
    return tbl.replicates(runs, stream=name)


def medians(reps: dict) -> dict:
    return {k: uncertainty.medians(d) for k, d in reps.items()}


def ladder_ratios(runs: pd.DataFrame, med: dict) -> dict:
    """{(place, device, network, point, mode): replicates of the mode's samples/s over seed's} at
    the smallest and the largest batch size of each device: the factors the headline and the
    ladder figure quote."""
    out = {}
    lad = tbl.ladder(runs)
    for _, r in lad[lad["mode"] != "seed"].iterrows():
        seed = med.get((r["place"], r["device"], r["model"], "seed", int(r["batch_size"])))
        own = med.get((r["place"], r["device"], r["model"], r["mode"], int(r["batch_size"])))
        if seed is not None and own is not None:
            out[(r["place"], r["device"], r["model"], r["point"], r["mode"])] = seed / own
    return out


def agreement(first: dict, second: dict) -> pd.DataFrame:
    """Per key in both: the ratio second / first of the estimates' replicates, its interval and
    whether that contains 1 (keys with no interval in either run are left out)."""
    rows = []
    for k in sorted(set(first) & set(second), key=str):
        ratio = second[k] / first[k]
        lo, hi = uncertainty.interval(ratio)
        if np.isnan(lo):
            continue
        rows.append(dict(key=k, ratio=float(np.median(ratio)), lo=lo, hi=hi, agree=lo <= 1 <= hi))
    return pd.DataFrame(rows, columns=["key", "ratio", "lo", "hi", "agree"])


def widths(summary: pd.DataFrame) -> list[float]:
    """(hi - lo) / median of every median samples/s of a summary.csv that has an interval."""
    have = summary["samples_per_s_lo"].notna()
    w = (summary["samples_per_s_hi"] - summary["samples_per_s_lo"]) / summary["samples_per_s_median"]
    return list(w[have])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configfile", nargs="*", default=[], help="added after config/config.yaml, e.g. a mirror")
    p.add_argument("--config", nargs="*", default=[], help="extra key=value for both runs")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--quick", action="store_true", help="a tiny grid on synthetic data: proves the script runs")
    a = p.parse_args(argv)
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="calibration-"))
    configfiles = list(a.configfile)
    if a.quick:
        md5 = synthetic.write(wd / "mirror", n_train=1000, n_test=QUICK["test_samples"])
        quick = dict(QUICK, mnist=dict(mirrors=[(wd / "mirror").as_uri() + "/"], md5=md5))
        (wd / "quick.yaml").write_text(yaml.safe_dump(quick))
        configfiles.append(wd / "quick.yaml")

    reps, runs = {}, {}
    for name in ("run1", "run2"):
        if a.quick:  # what this script reads, no figures; the second run trains on the first's data
            if name == "run2":
                run_workflow.with_data_of(wd / "run1", wd / name)
            wall = pipeline(wd / name, configfiles, a.config, ["results/summary.md"])
        else:
            wall = pipeline(wd / name, configfiles, a.config)
        r = machines.places(pd.read_csv(wd / name / "results/summary/runs.csv"))  # as the analysis compares
        reps[name], runs[name] = replicates(r, name), r  # the usable runs, as the report's
        trained = r["total_train_s"].sum()
        print(
            f"{name}: {len(r)} runs, wall {wall:.1f} s ({wall / 60:.2f} min), timed training {trained:.1f} s, "
            f"outside timed training {1 - trained / wall:.1%}; quality {dict(r['quality'].value_counts())}"
        )
        not_measured = r["quality_note"].astype(str).str.contains("not measured").sum()
        print(f"{name}: runs whose interference was not measured: {not_measured}")
        head = (wd / name / "results/summary.md").read_text().split("## The headline", 1)[-1].split("\n\n")[1]
        print(f"{name} headline: {head.strip()}")

    med1, med2 = medians(reps["run1"]), medians(reps["run2"])
    m = agreement(med1, med2)
    h = agreement(ladder_ratios(runs["run1"], med1), ladder_ratios(runs["run2"], med2))
    for label, df in (("median samples/s", m), ("factor over the beginner's code", h)):
        for _, r in df[~df["agree"]].iterrows():
            print(f"  {label} differs: {r['key']}: run2/run1 {r['ratio']:.3f} ({r['lo']:.3f}-{r['hi']:.3f})")
    summaries = [pd.read_csv(wd / n / "results/summary/summary.csv") for n in ("run1", "run2")]
    w = [x for s in summaries for x in widths(s)]
    print(f"workdir {wd}")
    print(
        f"calibration: run2/run1 intervals containing 1: medians {m['agree'].mean():.0%} of {len(m)}, "
        f"headline ratios {h['agree'].mean():.0%} of {len(h)} (target >= 90 %); median relative width "
        f"of the medians' intervals {np.median(w):.1%} of {len(w)} (target <= 25 %)"
    )


if __name__ == "__main__":
    main()
