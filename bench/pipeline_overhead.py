"""Target 4: how long the default `snakemake --cores all` takes, and how much of it is not
timed training (start-up, data loading, aggregation, figures, report analysis).

Runs the pipeline in a fresh working directory (the repository's config plus any --configfile
you add, e.g. an offline mirror), times the whole command, and compares it with the training
time the runs themselves recorded (sum of total_train_s). Prints the overhead share last.

    python bench/pipeline_overhead.py [--configfile extra.yaml ...] [--workdir DIR] [--config k=v ...]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import run_workflow

REPO = Path(__file__).resolve().parents[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configfile", nargs="*", default=[])
    p.add_argument("--config", nargs="*", default=[])
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--cores", default="all")
    a = p.parse_args(argv)
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="overhead-"))
    cmd = run_workflow.command(wd, a.cores, (), [REPO / "config" / "config.yaml", *a.configfile], a.config)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: the pipeline failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    runs = pd.read_csv(wd / "results" / "summary" / "runs.csv")
    trained = runs.total_train_s.sum()
    setup = runs.setup_s.sum()
    print(f"{len(runs)} runs, wall {wall:.1f} s, timed training {trained:.1f} s, one-off setup {setup:.1f} s")
    print(f"workdir {wd}")
    print(f"wall {wall / 60:.2f} min (target <= 10); outside timed training: {1 - trained / wall:.1%} (target <= 25%)")


if __name__ == "__main__":
    main()
