"""What bounds the batch-1 layer-1 pass on the cpu: loads and stores per FMA, and where W1 lives.

At batch 1 `kernel` streams W1 (784 x 16 floats, 50 KB) once per sample: per 16-float row it
loads the row, updates it (one FMA per vector), stores it and adds it into the next sample's
product (one more FMA). That is 2 FMAs per vector against 1 load and 1 store, and the whole
table is larger than a 32 KB L1. This times that pass, and its parts, on tables of rows x 16
floats of several sizes (an L1-resident 12 KB and 24 KB, W1's 50 KB, an L2-resident 400 KB), in
ns per row, against the core's FMA limit for the same row (kernel.fma_gflops measured in the
same run: the arithmetic limit the report uses). The variants and sizes are timed in turn,
round after round, so a change in the host's load falls on all alike; each figure is the best
over the rounds (a bound: the fastest the pass went, the host's interruptions left out). Prints
the ratios to the FMA limit last: near 1 = arithmetic-bound; well above 1 at every size = bound
by the loads or stores (compare `update`, a store per vector, with `product`); above 1 only from
50 KB on = by moving W1 between L2 and L1.

    python bench/l1_bound.py [--sizes-kb 12 24 50 400] [--rounds 7] [--passes N]
"""

import argparse
import ctypes
import subprocess
import tempfile
from pathlib import Path

import common  # noqa: F401  (puts workflow/scripts on the path)
import torch
from mnistbench.train import kernel

# One pass over a table w [rows][16] on the build's widest vector (8 floats with AVX2): `mode`
# 0 = product only (load, FMA), 1 = update only (load, FMA, store), 2 = both fused (load, FMA,
# store, FMA), as kernel.c's batch-1 pass. 8 accumulators, as there. Returns ns per row.
SOURCE = r"""
#include <time.h>
#if defined(__AVX512F__)
#define VB 64
#elif defined(__AVX__)
#define VB 32
#else
#define VB 16
#endif
typedef float vn __attribute__((vector_size(VB), aligned(4)));
enum { VL = VB / 4, VPR = 16 / VL, KU = 8 };
static volatile float sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
/* passes over w [rows][16]: as kernel.c's batch-1 layer-1 pass, KU rows' accumulators at a time */
static inline __attribute__((always_inline)) double run(float *restrict w, int rows, const float *restrict x,
                                                        int passes, const int upd, const int fwd) {
    vn acc[KU][VPR] = {{{0}}}, nd[VPR];
    for (int v = 0; v < VPR; v++) nd[v] = (vn){0} + 1e-7f;
    double t0 = now();
    for (int p = 0; p < passes; p++) {
        for (int k0 = 0; k0 < rows; k0 += KU)
            for (int u = 0; u < KU; u++)
                for (int v = 0; v < VPR; v++) {
                    vn *wp = (vn *)(w + (long)(k0 + u) * 16) + v, wk = *wp;
                    if (upd) *wp = wk = wk + x[k0 + u] * nd[v];
                    if (fwd) acc[u][v] += x[k0 + u] * wk;
                }
        for (int v = 0; v < VPR; v++) nd[v] = -nd[v]; /* the weights stay put over the passes */
    }
    double t = now() - t0;
    vn s = {0};
    for (int u = 0; u < KU; u++)
        for (int v = 0; v < VPR; v++) s += acc[u][v];
    sink = s[0];
    return t / ((double)passes * rows);
}
double row_ns(float *w, int rows, const float *x, int passes, int mode) {
    if (mode == 0) return run(w, rows, x, passes, 0, 1);
    if (mode == 1) return run(w, rows, x, passes, 1, 0);
    return run(w, rows, x, passes, 1, 1);
}
"""
MODES = {"product": 0, "update": 1, "fused": 2}
FMAS_PER_ROW = {"product": 16, "update": 16, "fused": 32}  # multiply-adds per 16-float row


def build() -> ctypes.CDLL:
    cc = kernel.compiler()
    if cc is None:
        raise SystemExit("needs a C compiler (cc or $CC)")
    d = Path(tempfile.mkdtemp(prefix="l1-bound-"))
    (d / "l1.c").write_text(SOURCE)
    subprocess.run(
        [*cc, "-O3", "-march=native", "-Wno-psabi", "-shared", "-fPIC", "-o", str(d / "l1.so"), str(d / "l1.c")],
        check=True,
    )
    lib = ctypes.CDLL(str(d / "l1.so"))
    lib.row_ns.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.row_ns.restype = ctypes.c_double
    return lib


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-kb", type=int, nargs="+", default=[12, 24, 50, 400])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--passes", type=int, default=2000, help="passes over the table per timing")
    a = p.parse_args(argv)
    lib = build()
    tables = {}
    for kb in a.sizes_kb:
        rows = max(8, kb * 1024 // 64 // 8 * 8)
        tables[kb] = (rows, torch.rand(rows, 16) * 0.1, torch.rand(rows))
    per = {(kb, m): [] for kb in tables for m in MODES}
    limit = []
    for _ in range(a.rounds):
        limit.append(1.0 / kernel.fma_gflops(200_000, 1))  # ns per FLOP
        for kb, (rows, w, x) in tables.items():
            passes = max(1, a.passes * 784 // rows)
            for m, code in MODES.items():
                per[(kb, m)].append(lib.row_ns(w.data_ptr(), rows, x.data_ptr(), passes, code))
    ns_flop = min(limit)
    print(f"FMA limit: {1 / ns_flop:.1f} GFLOP/s per core; a 16-float row: 1 load + 1 store + 2 FMA vectors fused")
    ratios = []
    for kb, (rows, _, _) in tables.items():
        cells = []
        for m in MODES:
            ns = min(per[(kb, m)])
            lim = 2 * FMAS_PER_ROW[m] * ns_flop
            cells.append(f"{m} {ns:.2f} ns/row ({ns / lim:.2f}x limit)")
            if m == "fused":
                ratios.append(f"{kb} KB {ns / lim:.2f}x")
        print(f"{kb:4d} KB ({rows} rows): " + ", ".join(cells), flush=True)
    print("ratio fused pass / FMA limit per table size: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
