"""`sparse` against `kernel` and the dense arithmetic limit, side by side in one run, on the cpu.

At each batch size (1, 16, 4096 by default) the two modes are built, set up and warmed up as the
train jobs do (common.prepared, the pipeline's training settings), on mostly-zero MNIST rows: the
real training images (common.data: a preloaded mnist.pt, --mnist or the pipeline's), else
handwriting-like stand-ins with about MNIST's share of nonzero pixels. Then rounds:
in each, the core's FMA rate (kernel.fma_gflops, the dense limit = the network's FLOP per sample
at that rate), one pass of `sparse` over the data and one of `kernel`, in turn, so a change in
the host's load falls on all three alike. Per round the ratios sparse/limit, kernel/limit and
sparse/kernel of µs per sample; printed: their medians over the rounds with 95 % intervals (a
bootstrap of the rounds), the ratios last. `sparse` does less arithmetic than the dense count:
below 1.0 against the limit is what it is built for. Beside them, in the same rounds, torch's
own matrix products for layer 1 at that batch size (gemm_pass): the bound that a mode built on
matrix products meets.

At batch 1, what a `sparse` step is made of, in the same rounds: the mode on blank images (every
list empty: the small layers, the softmax and the step's fixed costs alone) and the rest, the
lists' entries (sparse minus blank: layer 1's forward product and update over the nonzero
pixels), per entry against the FMA limit for its 4 x w1 FLOP. The target 0.6x the dense limit
needs both parts together under it.

    python bench/sparse_limit.py [--batches 1 16 4096] [--samples N] [--min-time S] [--rounds R]
                                 [--threads T] [--mnist results/preload/mnist.pt]
"""

import argparse
import statistics
import time

import torch
from common import NETWORK, config, data, fmt, interval, one_pass, prepared
from mnistbench.report.tables import effective_flop
from mnistbench.train import kernel
from mnistbench.train.native import nonzero_share

MODES = ("sparse", "kernel")


def gemm_pass(x: torch.Tensor, b: int) -> tuple[float, int]:
    """Seconds and samples of torch's own matrix products for layer 1 over the data in batches of
    b: x.W1^T (forward) and d1^T.x (W1's gradient), ~95 % of a step's arithmetic. What the
    vendor's BLAS reaches on these narrow (16-wide) products is the bound a dense mode built on
    matrix products meets at large batches."""
    w, d1 = torch.rand(784, NETWORK.sizes[1]), torch.rand(b, NETWORK.sizes[1])
    n = len(x) // b * b
    t0 = time.perf_counter()
    for i in range(0, n, b):
        xb = x[i : i + b]
        xb @ w
        d1.T @ xb
    return time.perf_counter() - t0, n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16, 4096])
    p.add_argument("--samples", type=int, default=16384)
    p.add_argument("--min-time", type=float, default=2.0, help="seconds of each mode per batch size, at least")
    p.add_argument("--rounds", type=int, default=7, help="rounds per batch size, at least")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--mnist", help="a preloaded mnist.pt (results/preload/mnist.pt): its training images")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    d = data(a.samples, path=a.mnist)
    share = nonzero_share(d["x"])
    dense = NETWORK.flop_per_sample()
    eff = effective_flop(NETWORK.name, dense, share)
    print(
        f"{NETWORK.name}: {dense} FLOP per sample dense; "
        f"{share:.1%} nonzero: sparse does {eff:.0f} FLOP ({eff / dense:.1%}); {a.threads} thread(s)"
    )
    blank = dict(d, x=torch.zeros_like(d["x"]))
    entries = share * d["x"].shape[1]  # list entries per sample
    summary = []
    for b in a.batches:
        if b > len(d["x"]):
            print(f"batch {b}: more than the {len(d['x'])} samples, skipped")
            continue
        cfg = config(a.threads)
        built = {m: prepared(m, b, d, cfg) for m in MODES}
        if any(v is None for v in built.values()):
            raise SystemExit(f"sparse or kernel cannot run here: {kernel.problem()}")
        parts = prepared("sparse", b, blank, cfg) if b == 1 else None
        per, spent = {"sparse": [], "kernel": [], "limit": [], "gemm": [], "blank": []}, dict.fromkeys(MODES, 0.0)
        while len(per["limit"]) < a.rounds or min(spent.values()) < a.min_time:
            per["limit"].append(dense / (kernel.fma_gflops(200_000, 1) * 1e3))
            for m in MODES:
                mode, perm = built[m]
                s, n = one_pass(mode, d, perm)
                spent[m] += s
                per[m].append(s / n * 1e6)
            s, n = gemm_pass(d["x"], b)
            per["gemm"].append(s / n * 1e6)
            if parts is not None:
                s, n = one_pass(parts[0], blank, parts[1])
                per["blank"].append(s / n * 1e6)
        us = {k: statistics.median(v) for k, v in per.items() if v}
        r_sl = interval([s / lim for s, lim in zip(per["sparse"], per["limit"])])
        r_kl = interval([k / lim for k, lim in zip(per["kernel"], per["limit"])])
        r_sk = interval([s / k for s, k in zip(per["sparse"], per["kernel"])])
        r_gl = interval([g / lim for g, lim in zip(per["gemm"], per["limit"])])
        print(
            f"batch {b:5d}: sparse {us['sparse']:.3f}  kernel {us['kernel']:.3f}  limit {us['limit']:.3f}  "
            f"torch's layer-1 products {us['gemm']:.3f} us/sample; sparse/limit {fmt(r_sl)}  kernel/limit {fmt(r_kl)}  "
            f"sparse/kernel {fmt(r_sk)}  layer-1 products/limit {fmt(r_gl)}  ({len(per['limit'])} rounds)",
            flush=True,
        )
        summary.append(
            f"b{b} sparse/limit {fmt(r_sl)}, kernel/limit {fmt(r_kl)}, sparse/kernel {fmt(r_sk)}, "
            f"layer-1 products/limit {fmt(r_gl)}"
        )
        if parts is not None:
            r_bl = interval([z / lim for z, lim in zip(per["blank"], per["limit"])])
            r_el = interval([(s - z) / lim for s, z, lim in zip(per["sparse"], per["blank"], per["limit"])])
            # per entry, against its 4 x w1 FLOP at the round's FMA rate: the same ratio, rescaled
            r_ee = tuple(r * dense / (entries * 4 * NETWORK.sizes[1]) for r in r_el)
            ns = (us["sparse"] - us["blank"]) / entries * 1e3
            print(
                f"batch 1 parts: blank images (every list empty) {us['blank']:.3f} us/sample, {fmt(r_bl)} the limit; "
                f"the lists' {entries:.0f} entries (sparse - blank) {fmt(r_el)} the limit, {ns:.2f} ns per entry, "
                f"{fmt(r_ee)} the FMA limit for its {4 * NETWORK.sizes[1]} FLOP",
                flush=True,
            )
            summary.append(
                f"b1 blank/limit {fmt(r_bl)}, entries/limit {fmt(r_el)}, per entry {fmt(r_ee)} its FMA limit"
            )
    print(f"torch {torch.__version__}; kernel built by {kernel.identity()}")
    print("ratio (median over rounds, 95 % interval): " + "; ".join(summary))


if __name__ == "__main__":
    main()
