"""Does the machine hold its speed? One process times the same step for minutes, nothing else
changing, and prints the median step time of each window of `--window` seconds.

Intervals over repeats catch what differs between the processes of one run; a change of the
whole machine's speed between two runs (a neighbour on the host, a shared core, a clock change)
is shared by every process of a run and shows in no interval over them. This script measures
that drift directly: if one process, always the same code on the same data, times its windows
tens of per cent apart, two runs minutes apart differ by as much, and so do the processes of one
run trained minutes apart. Prints each window, then max/min and sigma of the log window medians
(0.1 is about 10 %), and the median |log ratio| of windows a minute or more apart.

    python bench/host_drift.py [--minutes 5] [--window 2] [--mode manual] [--batch-size 1] [--threads 1]
"""

import argparse
import statistics
import time

import numpy as np
import torch
from common import config, data, prepared
from mnistbench.measure import timing


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--window", type=float, default=2.0, help="seconds of steps per window")
    p.add_argument("--mode", default="manual")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    d = data(4096)
    built = prepared(a.mode, a.batch_size, d, config(a.threads))
    if built is None:
        raise SystemExit(f"error: {a.mode} cannot run on this cpu")
    m, perm = built
    clock, t0, meds, starts = timing.StepClock("cpu"), time.monotonic(), [], []
    while time.monotonic() - t0 < a.minutes * 60:
        w0, steps = time.monotonic(), []
        while time.monotonic() - w0 < a.window:
            steps += timing.timed_epoch(m.step, m.epoch(d, perm), clock)[1]
        meds.append(statistics.median(steps))
        starts.append(w0 - t0)
        print(f"{starts[-1]:7.1f} s: {meds[-1] * 1e6:9.2f} µs/step over {len(steps)} steps", flush=True)
    logs = np.log(meds)
    # Windows at least a minute apart, as two processes of a run or two runs are.
    apart = [abs(logs[i] - logs[j]) for i in range(len(logs)) for j in range(i) if starts[i] - starts[j] >= 60]
    far = f"; windows >= 60 s apart: median |log ratio| {np.median(apart):.3f}" if apart else ""
    print(
        f"drift of {a.mode} at batch {a.batch_size}, {len(meds)} windows of {a.window:g} s: median "
        f"{np.median(meds) * 1e6:.2f} µs/step, max/min ratio {max(meds) / min(meds):.3f} (1.0: a steady machine), sigma of log "
        f"{np.std(logs, ddof=1) if len(logs) > 1 else 0.0:.3f}{far}"
    )


if __name__ == "__main__":
    main()
