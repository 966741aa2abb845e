"""Why do two processes time the same step differently, and what takes that away?

Starts PROCESSES fresh processes per environment setting, interleaved (A B C A B C ...) so that a
drift of the machine hits every setting alike; each process times the same few steps with the
train jobs' own loop (bench/common.step_time) and prints its medians. Per setting and step it
prints the spread between processes: max/min of their medians and the standard deviation of
their logarithms (sigma: 0.1 is about 10 %). The last line compares every setting's median sigma
with the baseline's.

Settings (each an environment for the process; what the pipeline can set for its train jobs):
- baseline: as a train job ran before;
- malloc: glibc's malloc keeps freed memory (no mmap/munmap and no fresh page faults per step,
  whatever the process did before: its dynamic mmap threshold otherwise depends on history);
- thp: torch's cpu allocator asks for transparent huge pages (THP_MEM_ALLOC_ENABLE=1);
- bind: OpenMP threads bound to cores (OMP_PROC_BIND=close, OMP_PLACES=cores);
- all: the three together;
- passive: idle OpenMP threads sleep rather than spin (OMP_WAIT_POLICY=PASSIVE);
- one_thread: torch runs on one thread (OMP_NUM_THREADS=1), the other cores stay idle.

    python bench/process_noise.py [--processes 6] [--min-time 1.0] [--settings baseline malloc ...]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

STEPS = [("manual", 1), ("module", 16), ("module", 4096), ("dataloader", 256)]
SETTINGS = {
    "baseline": {},
    # M_MMAP_THRESHOLD at its largest (32 MiB on 64-bit), no trimming: freed memory stays in the heap.
    "malloc": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 40)},
    "thp": {"THP_MEM_ALLOC_ENABLE": "1"},
    "bind": {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
}
SETTINGS["all"] = {k: v for s in SETTINGS.values() for k, v in s.items()}
SETTINGS["passive"] = {"OMP_WAIT_POLICY": "PASSIVE"}
SETTINGS["one_thread"] = {"OMP_NUM_THREADS": "1"}
# Every variable some setting sets: a process gets none of them but its own setting's.
SET_BY_SOME = {k for s in SETTINGS.values() for k in s}
CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
import common
d = common.data(8192)
out = {{}}
for mode, b in {steps!r}:
    out[f"{{mode}} {{b}}"] = common.step_time(mode, b, d, min_time={min_time})
print(json.dumps(out))
"""


def one(setting: str, min_time: float, steps) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SET_BY_SOME}
    env.update(SETTINGS[setting])
    code = CHILD.format(bench=str(REPO / "bench"), steps=steps, min_time=min_time)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"error: a {setting} process failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=6)
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of steps per step and process")
    p.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--steps", nargs="*", default=[f"{m}:{b}" for m, b in STEPS], help="mode:batch")
    a = p.parse_args(argv)
    steps = [(s.split(":")[0], int(s.split(":")[1])) for s in a.steps]
    got = {s: [] for s in a.settings}
    for i in range(a.processes):
        for s in a.settings:
            got[s].append(one(s, a.min_time, steps))
            print(
                f"process {i + 1}/{a.processes} {s}: "
                + ", ".join(f"{k} {v * 1e6:.1f} µs" for k, v in got[s][-1].items())
            )
    sigma = {}
    print(f"{'setting':<9} {'step':<16} {'median µs':>10} {'max/min':>8} {'sigma':>6}")
    for s in a.settings:
        per = []
        for k in got[s][0]:
            v = np.array([g[k] for g in got[s]])
            per.append(float(np.std(np.log(v), ddof=1)))
            print(f"{s:<9} {k:<16} {np.median(v) * 1e6:>10.1f} {v.max() / v.min():>8.3f} {per[-1]:>6.3f}")
        sigma[s] = statistics.median(per)
    base = sigma.get("baseline", next(iter(sigma.values())))
    print(
        "median sigma between processes: "
        + ", ".join(f"{s} {v:.3f} (ratio {v / base:.2f})" for s, v in sigma.items())
        + " (lower is steadier)"
    )


if __name__ == "__main__":
    main()
