"""What flushing denormal numbers is worth on this cpu: the C modes with it and without it, side by side.

`kernel` and `sparse` are built twice at each batch size (1 and 16 by default), as the train jobs
build them (common.prepared: the pipeline's training settings, real MNIST where it is at hand): one
copy computes with denormals flushed, as the modes do, the other with them (kernel.c's
`flush_denormals` off for its calls). Each copy trains on, epoch after epoch, as a run does, so the
unflushed one meets the denormals its saturated units make. Rounds: one pass of each copy in turn,
so a change in the host's load falls on all alike. Per round the ratio flushed / computed of µs
per sample; printed: the medians of both and the ratio's median with its 95 % interval (a
bootstrap of the rounds), then what an operation on a denormal costs this core (the probe the
report quotes: kernel.denormal_cost). On a cpu that computes denormals at full speed the ratio is
1 within noise; on one that takes a microcode assist per operation it is well below 1.

    python bench/denormals.py [--batches 1 16] [--samples N] [--rounds R] [--threads T] [--mnist PATH]
"""

import argparse
import statistics

import torch
from common import config, data, fmt, interval, one_pass, prepared
from mnistbench.train import kernel

MODES = ("kernel", "sparse")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    p.add_argument("--samples", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, default=1, help="1: a single sample has no parallelism to use")
    p.add_argument("--mnist", help="a preloaded mnist.pt (default: the pipeline's results/preload/mnist.pt)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    try:
        lib = kernel.load()
    except kernel.BuildError as e:
        raise SystemExit(f"error: the C modes cannot run here: {e}") from None
    d, cfg = data(a.samples, path=a.mnist), config(a.threads)
    ratios = []
    for b in a.batches:
        for mode in MODES:
            built = {on: prepared(mode, b, d, cfg) for on in (True, False)}
            if any(v is None for v in built.values()):
                raise SystemExit(f"error: {mode} cannot run here: {kernel.problem()}")
            us = {True: [], False: []}
            for _ in range(a.rounds):
                for on, (m, perm) in built.items():
                    kernel.flush_denormals(lib, on)
                    try:
                        s, n = one_pass(m, d, perm)
                    finally:
                        kernel.flush_denormals(lib, True)
                    us[on].append(s / n * 1e6)
            r = interval([f / c for f, c in zip(us[True], us[False])])
            ratios.append(f"{mode} b{b} {fmt(r)}")
            print(
                f"{mode:>7} batch {b:5d}: flushed {statistics.median(us[True]):8.3f} us/sample, "
                f"computed {statistics.median(us[False]):8.3f}, flushed/computed {fmt(r)}",
                flush=True,
            )
    print(f"an operation on a denormal number costs this core {kernel.denormal_cost():.3g}x one on normal numbers")
    print(f"{a.threads} thread(s), torch {torch.__version__}; kernel built by {kernel.identity()}")
    print("ratio flushed/computed: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
