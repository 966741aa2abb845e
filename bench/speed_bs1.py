"""Batch size 1 on the cpu: every mode against the beginner's original code and against the
arithmetic limit of one core.

`seed` is the original code's structure reproduced faithfully (tests hold it against a verbatim
copy); every other cpu mode is timed beside it, in the same run, with the same loop. The limit is
measured here too: this core's peak fused multiply-add rate (many independent vector FMA chains,
kernel.c's fma_gflops) turned into µs per sample of this model's ~53 kFLOP of arithmetic. Prints
µs per sample for each mode with its share of that limit, then the limit, then the ratio
fastest / seed last (target: >= 100).

    python bench/speed_bs1.py [--samples N] [--min-time S] [--threads T]
"""

import argparse

import torch
from common import NETWORK, data, step_time
from mnistbench.config.catalog import MODES
from mnistbench.train import kernel
from mnistbench.train.needs import exists


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1, help="1: a single sample has no parallelism to use")
    p.add_argument("--modes", nargs="+", default=[m for m in MODES if exists(m, "cpu")])
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    try:
        limit = NETWORK.flop_per_sample() / (kernel.fma_gflops() * 1e9)
    except kernel.BuildError as e:
        limit = None
        print(f"arithmetic limit not measured: {e}")
    d = data(a.samples)
    times = {}
    for mode in a.modes:
        t = step_time(mode, 1, d, a.min_time)
        if t is not None:
            times[mode] = t
            share = f"  {limit / t:6.1%} of the limit" if limit else ""
            print(f"{mode:>10}: {t * 1e6:8.2f} us/sample  {1 / t:10.0f} samples/s{share}", flush=True)
    best = min((m for m in times if m != "seed"), key=times.get)
    print(f"threads {a.threads}, torch {torch.__version__}")
    if limit:
        print(
            f"arithmetic limit of one core: {limit * 1e6:.3f} us/sample ({NETWORK.flop_per_sample()} FLOP at the "
            f"measured peak FMA rate); seed is {times['seed'] / limit:.0f}x it, {best} {times[best] / limit:.1f}x"
        )
    print(f"fastest mode at batch 1: {best}; ratio {best}/seed = {times['seed'] / times[best]:.2f}x (target >= 100)")


if __name__ == "__main__":
    main()
