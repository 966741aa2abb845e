"""Does the pipeline notice a busy machine? One grid on the quiet machine, then the same grid with
a CPU hog (as many busy processes as cores) started partway through it.

Prints, for the disturbed grid, the share of runs the hog overlapped that were flagged (`noisy`)
or retimed (target 100 %); for the quiet grid, the runs flagged (target 0 of N); the fitted a
(fixed cost per step) and b (cost per sample) of each mode from the disturbed grid against the
quiet grid (target within 15 %), beside the same comparison for a second quiet grid run after
it (how far two grids differ on this machine with no hog at all); and the preload's memcpy
baseline against numpy.copyto into a preallocated array of the same size (target within 2x). A run counts as overlapped when one of
its timing attempts shared at least MIN_OVERLAP_S with the hog (the quality check judges
stretches of at least that long).

    python bench/noise_check.py [--hog-after 0.3] [--hog-s 90] [--workdir DIR] [--config k=v ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import run_workflow  # noqa: E402
import yaml  # noqa: E402
from mnistbench.data import synthetic  # noqa: E402
from mnistbench.measure import quality  # noqa: E402

MIN_OVERLAP_S = quality.MIN_WINDOW_S
GRID = dict(
    devices=["cpu"],
    modes=["manual", "module", "dataloader"],
    batch_sizes=[1, 16, 256, 4096],
    repeats=3,  # processes differ by tens of % on a VM: three per combination keep the median steady
    epochs=4,
    train_samples=16384,
    test_samples=1000,
)
# Only proves the script works end to end (used by the tests): too small to judge anything, and
# with no retime, which would wait for a busy machine (a test's) to settle.
QUICK = dict(
    GRID,
    modes=["manual"],
    batch_sizes=[8, 64],
    repeats=1,
    epochs=2,
    train_samples=512,
    test_samples=64,
    min_timed_s=0.05,
    retime=0,
)


def pipeline(wd: Path, cfg: dict, extra: list, on_progress=None) -> float:
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = run_workflow.command(wd, "all", ["results/summary/fits.csv"], [wd / "config.yaml"], extra)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        if on_progress:
            on_progress()
        time.sleep(0.5)
    if proc.returncode != 0:
        sys.exit(f"error: the pipeline failed in {wd} ({proc.returncode}):\n{proc.stderr.read()[-3000:]}")
    return time.perf_counter() - t0


def attempts(wd: Path) -> pd.DataFrame:
    """Every timing attempt of every run: its interval and whether the run was flagged or retimed."""
    rows = []
    for f in sorted((wd / "results/runs").rglob("*.json")):
        rec = json.loads(f.read_text())
        r = rec["row"]
        flagged = r["quality"] != "ok" or int(r["attempts"] or 1) > 1
        for a in rec["attempts"]:
            rows.append(
                dict(
                    run=f"{r['mode']} bs{r['batch_size']} r{r['repeat']}",
                    flagged=flagged,
                    quality=r["quality"],
                    attempts=r["attempts"],
                    note=r["quality_note"],
                    start=datetime.fromisoformat(a["start_utc"]).timestamp(),
                    end=datetime.fromisoformat(a["end_utc"]).timestamp(),
                )
            )
    return pd.DataFrame(rows)


def memcpy_check(wd: Path) -> str:
    t = pd.read_csv(wd / "results/preload/transfer.csv")
    big = t[t.device == "cpu"].sort_values("bytes").iloc[-1]
    a = np.random.default_rng(0).random(int(big["bytes"]) // 4, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t0)
    ref = a.nbytes / float(np.median(times)) / 1e9
    return (
        f"memcpy baseline {big['gb_per_s']:.2f} GB/s for {big['bytes'] / 1e6:.0f} MB; numpy.copyto into a "
        f"preallocated array {ref:.2f} GB/s; ratio {big['gb_per_s'] / ref:.2f} (target within 2x)"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--hog-after", type=float, default=0.3, help="start the hog after this share of the runs")
    p.add_argument("--hog-s", type=float, default=90.0, help="how long the hog runs")
    p.add_argument("--config", nargs="*", default=[], help="extra key=value for both grids")
    p.add_argument(
        "--quick", action="store_true", help="a tiny grid, a short hog, no second quiet grid: proves the script runs"
    )
    a = p.parse_args(argv)
    grid = QUICK if a.quick else GRID
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="noise-"))
    md5 = synthetic.write(wd / "mirror", n_train=max(grid["train_samples"], 1000), n_test=grid["test_samples"])
    cfg = dict(grid, mnist=dict(mirrors=[(wd / "mirror").as_uri() + "/"], md5=md5))
    n_runs = len(grid["modes"]) * len(grid["batch_sizes"]) * grid["repeats"]

    quiet_s = pipeline(wd / "quiet", cfg, a.config)
    hog = {}

    def maybe_hog():
        done = len(list((wd / "disturbed/results/runs").rglob("*.csv")))
        if not hog and done >= a.hog_after * n_runs:
            code = f"import time\nt = time.time()\nwhile time.time() - t < {a.hog_s}: pass\n"
            hog["procs"] = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(len(os.sched_getaffinity(0)))]
            hog["start"] = time.time()
        if hog and "end" not in hog and all(p.poll() is not None for p in hog["procs"]):
            hog["end"] = time.time()

    disturbed_s = pipeline(
        run_workflow.with_data_of(wd / "quiet", wd / "disturbed"), cfg, a.config, on_progress=maybe_hog
    )
    if not hog:
        sys.exit(
            f"error: the disturbed grid finished before {a.hog_after:.0%} of its runs: no hog ran; lower --hog-after"
        )
    for proc in hog["procs"]:
        proc.kill()
    hog.setdefault("end", time.time())

    quiet, disturbed = attempts(wd / "quiet"), attempts(wd / "disturbed")
    overlap = (np.minimum(disturbed.end, hog["end"]) - np.maximum(disturbed.start, hog["start"])).clip(lower=0)
    hit = disturbed[overlap >= MIN_OVERLAP_S].drop_duplicates("run")
    print(
        f"quiet grid {quiet_s:.0f} s, disturbed grid {disturbed_s:.0f} s; hog of {len(hog['procs'])} processes "
        f"for {hog['end'] - hog['start']:.0f} s, from {hog['start'] - (time.time() - disturbed_s):.0f} s in"
    )
    for _, r in hit.iterrows():
        print(f"  overlapped: {r['run']:<20} {r['quality']:<9} attempts {r['attempts']}: {r['note'][:110]}")
    flagged_q = quiet.drop_duplicates("run")
    for _, r in flagged_q[flagged_q.flagged].iterrows():
        print(f"  quiet grid flagged: {r['run']:<20} {r['quality']:<9} attempts {r['attempts']}: {r['note'][:110]}")
    worst = compare_fits(wd / "quiet", wd / "disturbed", "disturbed")
    # The same grid once more on the quiet machine: how far two grids differ with no hog at all
    # (a VM's memory bandwidth and clock drift between grids, and processes differ), the scale
    # against which the disturbed grid's differences are read. --quick, which only proves the
    # script runs, leaves it out: it is the quiet grid's code once more.
    drift_words = "not run with --quick"
    if not a.quick:
        again_s = pipeline(run_workflow.with_data_of(wd / "quiet", wd / "quiet-again"), cfg, a.config)
        print(f"the quiet grid again, {again_s:.0f} s:")
        drift_words = f"worst {compare_fits(wd / 'quiet', wd / 'quiet-again', 'again'):.1%}"
    print(memcpy_check(wd / "quiet"))
    print(f"workdir {wd}")
    share = hit.flagged.mean() if len(hit) else float("nan")
    print(
        f"overlapped runs flagged or retimed: {hit.flagged.sum()} of {len(hit)} ({share:.0%}, target 100%); "
        f"quiet grid flagged: {int(flagged_q.flagged.sum())} of {len(flagged_q)} (target 0); "
        f"fits disturbed vs quiet: worst {worst:.1%} (target within 15%; two quiet grids: {drift_words})"
    )


def compare_fits(base: Path, other: Path, label: str) -> float:
    """Prints a and b of each mode of two grids side by side; returns the worst relative difference."""
    fq = pd.read_csv(base / "results/summary/fits.csv").set_index("mode")
    fd = pd.read_csv(other / "results/summary/fits.csv").set_index("mode")
    worst = 0.0
    print(f"{'mode':>12} {'a quiet us':>11} {'a ' + label:>12} {'b quiet us':>11} {'b ' + label:>12}")
    for m in fq.index:
        ra, rb = fd.loc[m, "a_us"] / fq.loc[m, "a_us"] - 1, fd.loc[m, "b_us"] / fq.loc[m, "b_us"] - 1
        worst = max(worst, abs(ra), abs(rb))
        print(
            f"{m:>12} {fq.loc[m, 'a_us']:>11.2f} {fd.loc[m, 'a_us']:>12.2f} {fq.loc[m, 'b_us']:>11.4f} "
            f"{fd.loc[m, 'b_us']:>12.4f}   ({ra:+.1%}, {rb:+.1%})"
        )
    return worst


if __name__ == "__main__":
    main()
