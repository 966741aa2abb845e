"""One command for a machine with a CUDA GPU (and the project's packages, no internet needed).

Generates a small MNIST-format data set, runs the pipeline for every device this machine has
(cpu and cuda) over the main modes of the mode ladder (or those given) and a range of batch sizes, and prints samples/s per device
x mode x batch size, the cuda/cpu speedup and, when the analysis step wrote them, the fitted
per-step overhead and the crossover batch size. Meant to finish in under 8 minutes.

    python bench/gpu_check.py [--workdir DIR] [--devices auto] [--modes M ...] [--batch-sizes B ...] [--quick]
    python bench/gpu_check.py --summary DIR/results/summary

`--quick` is a tiny grid that only proves the command works end to end (used by the tests).
`--summary` prints the same tables for a run already made (bench/gpu_reference.py's), training nothing.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow" / "scripts"))

import pandas as pd  # noqa: E402
import run_workflow  # noqa: E402
import yaml  # noqa: E402
from mnistbench.config import devices  # noqa: E402
from mnistbench.data import synthetic  # noqa: E402
from mnistbench.train import needs  # noqa: E402

# The modes that answer the question: the beginner's code, correct hand-written, nn.Module, graph
# replay, the GPU's top mode (persistent) and the cpu's (kernel). The whole ladder does not fit in
# 8 minutes on a GPU machine (on an H200 machine its cpu side alone ran 6 min, one cold compile
# 71 s); `--modes` adds any mode, and tests/test_modes.py checks them all on cuda in seconds.
FULL = dict(
    modes=["seed", "manual", "module", "cudagraph", "kernel", "persistent"],
    batch_sizes=[1, 16, 256, 4096],
    repeats=2,
    epochs=2,
    train_samples=8192,
    test_samples=2000,
    data=(12000, 2000),
)
QUICK = dict(
    modes=["manual", "module"],
    batch_sizes=[8, 64],
    repeats=1,
    epochs=1,
    train_samples=256,
    test_samples=64,
    min_timed_s=0.05,
    retime=0,  # no wait for a busy machine (a test's) to settle
    data=(300, 64),
)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--devices", default="auto", help="'auto' or a YAML list, e.g. '[cpu, cuda]'")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cores", default="all")
    p.add_argument("--modes", nargs="+", help="modes of the ladder (default: " + " ".join(FULL["modes"]) + ")")
    p.add_argument("--batch-sizes", nargs="+", type=int)
    p.add_argument("--summary", type=Path, help="a finished run's results/summary folder: print its tables only")
    a = p.parse_args(argv)
    if a.summary:
        if not (a.summary / "summary.csv").exists():
            sys.exit(f"error: {a.summary} holds no summary.csv")
        print_tables(a.summary)
        return 0
    grid = dict(QUICK if a.quick else FULL)
    if a.modes:
        grid["modes"] = a.modes
    if a.batch_sizes:
        grid["batch_sizes"] = a.batch_sizes
    wd = a.workdir or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    wd.mkdir(parents=True, exist_ok=True)
    md5 = synthetic.write(wd / "mirror", *grid["data"])
    cfg = {k: v for k, v in grid.items() if k != "data"}
    cfg.update(
        devices=yaml.safe_load(a.devices),
        warmup_steps=10,
        mnist=dict(mirrors=[(wd / "mirror").as_uri() + "/"], md5=md5),
    )
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = run_workflow.command(wd, a.cores, (), [wd / "config.yaml"], (), "--keep-going")
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd)
    summary_dir = wd / "results" / "summary"
    if not (summary_dir / "summary.csv").exists():
        sys.exit(f"error: the pipeline wrote no summary (exit {proc.returncode}); see {wd}/logs")
    print_tables(summary_dir)
    print(f"\nworkdir: {wd}")
    return proc.returncode


def print_tables(summary_dir: Path) -> None:
    s = pd.read_csv(summary_dir / "summary.csv")
    runs = pd.read_csv(summary_dir / "runs.csv")
    env = runs.groupby("device")["device_name"].first()
    print("\ndevices: " + "; ".join(f"{d} = {n}" for d, n in env.items()))
    print(f"torch {runs.torch_version.iloc[0]}, threads {sorted(int(t) for t in runs.threads.unique())}")
    table = s.pivot_table(index=["mode", "batch_size"], columns="device", values="samples_per_s_median")
    print("\nsamples/s (median over repeats)")
    print(table.round(0).to_string())
    host = devices.CPU
    for acc in [c for c in table.columns if c != host and host in table.columns]:
        print(f"\n{acc} / {host} speedup")
        print((table[acc] / table[host]).unstack("batch_size").round(2).to_string())
    for name in ["fits.csv", "crossover.csv"]:
        f = summary_dir / name
        if f.exists():
            t = pd.read_csv(f)
            print(f"\n{name}")
            print(t.to_string(index=False) if len(t) else "(none: no accelerator ran beside the cpu)")
    top_mode(table)
    bad = runs[runs.status != "ok"]
    if len(bad):
        print("\nruns not ok:")
        print(bad[["device", "mode", "batch_size", "repeat", "status", "message"]].to_string(index=False))


def top_mode(table) -> None:
    """The GPU's top mode per batch size against graph replay and against the best cpu mode of
    the same host: the question `persistent` exists to answer."""
    if "persistent" not in table.index.get_level_values("mode"):
        return
    rows = []
    for b in sorted(set(table.index.get_level_values("batch_size"))):
        at = table.xs(b, level="batch_size")
        gpus = [c for c in at.columns if needs.exists("persistent", c)]
        for gpu in gpus:
            top = at.loc["persistent", gpu] if "persistent" in at.index else float("nan")
            graph = at.loc["cudagraph", gpu] if "cudagraph" in at.index else float("nan")
            cpu = at[devices.CPU].dropna() if devices.CPU in at.columns else at.iloc[:0, 0]
            best = cpu.idxmax() if len(cpu) else "-"
            rows.append(
                f"{b:>6} {gpu:>6} {top:>14,.0f} {top / graph:>13.2f} {best:>12} {top / cpu.max() if len(cpu) else float('nan'):>12.2f}"
            )
    print("\npersistent (samples/s) against cudagraph and the best cpu mode, per batch size")
    print(f"{'batch':>6} {'device':>6} {'persistent':>14} {'/ cudagraph':>13} {'best cpu':>12} {'/ best cpu':>12}")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
