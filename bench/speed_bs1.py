"""Target 1: at batch size 1 on cpu, the fastest mode against the beginner's original code.

`seed` is the original code's structure reproduced faithfully (tests hold it against a verbatim
copy); every other cpu mode is timed beside it, in the same run, with the same loop. Prints
µs per sample for each and the ratio fastest / seed last (target: >= 10).

    python bench/speed_bs1.py [--samples N] [--min-time S] [--threads T]
"""

import argparse

import torch
from common import data, step_time

from mnistbench.modes import MODES, exists


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1, help="1: a single sample has no parallelism to use")
    p.add_argument("--modes", nargs="+", default=[m for m in MODES if exists(m, "cpu")])
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    d = data(a.samples)
    times = {}
    for mode in a.modes:
        t = step_time(mode, 1, d, a.min_time)
        if t is not None:
            times[mode] = t
            print(f"{mode:>10}: {t * 1e6:8.2f} us/sample  {1 / t:10.0f} samples/s", flush=True)
    best = min((m for m in times if m != "seed"), key=times.get)
    print(f"threads {a.threads}, torch {torch.__version__}")
    print(f"fastest mode at batch 1: {best}; ratio {best}/seed = {times['seed'] / times[best]:.2f}x (target >= 10)")


if __name__ == "__main__":
    main()
