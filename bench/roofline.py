"""Target 2: at large batch on cpu, the fastest mode against the compute roofline and eager module.

Measures a large float32 matrix product (GFLOP/s) in the same run; one training sample of the
model costs FLOP_PER_SAMPLE (forward + backward, ~78 kFLOP), so GFLOP/s / that = the compute
floor in samples/s. Prints each mode's samples/s, then the ratios fastest/roofline (target >=
0.70) and fastest/module (target >= 1.5) last.

    python bench/roofline.py [--batch-size 4096] [--matmul 2048] [--threads T]
"""

import argparse
import statistics
import time

import torch
from common import FLOP_PER_SAMPLE, data, step_time
from mnistbench.config.catalog import MODES
from mnistbench.train.needs import exists


def matmul_gflops(n: int, min_time: float) -> float:
    a, b = torch.rand(n, n), torch.rand(n, n)
    c = torch.empty(n, n)
    torch.mm(a, b, out=c)
    ts = []
    while sum(ts) < min_time:
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        ts.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(ts) / 1e9


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--batches", type=int, default=8, help="distinct batches per epoch")
    p.add_argument("--matmul", type=int, default=2048)
    p.add_argument("--min-time", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--modes", nargs="+", default=[m for m in MODES if exists(m, "cpu") and m != "seed"])
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    gflops = matmul_gflops(a.matmul, a.min_time)
    roof = gflops * 1e9 / FLOP_PER_SAMPLE
    print(
        f"float32 matmul {a.matmul}^3: {gflops:.1f} GFLOP/s -> roofline {roof:,.0f} samples/s "
        f"({FLOP_PER_SAMPLE} FLOP/sample)"
    )
    d = data(a.batch_size * a.batches)
    rate = {}
    for mode in a.modes:
        t = step_time(mode, a.batch_size, d, a.min_time)
        if t is not None:
            rate[mode] = a.batch_size / t
            print(f"{mode:>10}: {rate[mode]:12,.0f} samples/s  {rate[mode] / roof:6.1%} of roofline", flush=True)
    best = max(rate, key=rate.get)
    print(f"threads {a.threads}, batch {a.batch_size}, torch {torch.__version__}")
    print(
        f"fastest {best}: {rate[best] / roof:.2f} of roofline (target >= 0.70); "
        f"{best}/module = {rate[best] / rate['module']:.2f}x (target >= 1.5)"
    )


if __name__ == "__main__":
    main()
