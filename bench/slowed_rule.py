"""What the slowed-stretch rule does to a run's numbers, measured on a finished run.

A run's step time (`step_time_median_s`) leaves out the blocks of its timed steps more than
slowed.SLOWED times slower than its second fastest block; beside it every run records the
median over all its timed steps (`step_time_all_steps_s`). For every combination of a results
folder this prints the ratio kept / all steps (the median over the repeats of each run's ratio)
with its 95 % interval over the repeats (uncertainty.median_over_runs, the project's interval
code), and the share of timed steps left out; then one line: the median ratio over the
combinations, its range and how many combinations' intervals exclude 1 (where the rule moved the
number by more than the noise between processes).

    .venv/bin/python bench/slowed_rule.py results        # after a default `snakemake --cores all`

Below 1: the rule made the step time faster than the median of all steps. Run it on a quiet
machine: on a busy one it measures the neighbours as much as the rule.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from mnistbench.collect import uncertainty
from mnistbench.collect.aggregate import MACHINE_KEYS, read_runs, usable  # noqa: E402
from mnistbench.report import numbers  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="a results folder (it holds summary/runs.csv)")
    p.add_argument("--use", nargs="+", default=["ok"], help="timing verdicts of the runs used (quality.use)")
    a = p.parse_args(argv)
    runs_csv = a.results / "summary" / "runs.csv"
    runs = read_runs(runs_csv)
    ok = usable(runs, a.use)
    ok = ok[pd.to_numeric(ok["step_time_all_steps_s"], errors="coerce") > 0]
    if ok.empty:
        print(
            f"error: {runs_csv} holds no usable run with step_time_all_steps_s: run the pipeline with this "
            "code (and quality.use covering its runs' verdicts, --use), then this again",
            file=sys.stderr,
        )
        return 1
    print(f"kept / all steps per combination of {runs_csv} (median over repeats, 95 % interval over them)")
    print(f"{'machine':<24} {'device':<8} {'model':<16} {'mode':<11} {'batch':>6} {'runs':>4}  kept/all (95 %)  slowed")
    ratios, differ, judged = [], 0, 0
    for key, g in ok.groupby(MACHINE_KEYS, sort=False):
        r = g["step_time_median_s"] / g["step_time_all_steps_s"]
        med, lo, hi = uncertainty.median_over_runs(r, key, stream="kept/all")
        ratios.append(med)
        if not np.isnan(lo):
            judged += 1
            differ += bool(hi < 1 or lo > 1)
        machine, device, model, mode, batch, k = key
        text = numbers.with_interval(numbers.num(med, lo, hi), lambda x: f"{x:.3f}")
        print(
            f"{str(machine)[:24]:<24} {device:<8} {model + (f' x{k}' if k > 1 else ''):<16} {mode:<11} {batch:>6} {len(g):>4}  "
            f"{text:<16} "
            f"{numbers.pct(pd.to_numeric(g['slowed_share'], errors='coerce').median())}"
        )
    ratios = np.array(ratios)
    print(
        f"slowed rule: kept/all ratio {np.median(ratios):.3f} (median over {len(ratios)} combinations; "
        f"{ratios.min():.3f}-{ratios.max():.3f}), {differ} of {judged} with an interval differ from 1 beyond it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
