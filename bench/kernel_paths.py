"""The C kernel's two paths on one thread: the seed shape's fast path against the generic path
(any network of the family), and the generic path against torch on wider networks.

(a) 784-16-16-10 at several batch sizes: sgd_steps (the fast path) and mlp_steps (the generic
path), called as the kernel mode calls them (256 rows per call, many steps per call at small
batches), µs per sample each and the ratio generic / fast. (b) 784-w-10 for several widths w:
the generic path against torch (an nn.Sequential of the same MLP, torch.optim.SGD, one
`zero_grad, loss, backward, step` per batch), µs per sample and the ratio generic / torch. The
two of a pair are called in turn, so a change in the host's load falls on both; each time is
the median over its calls, at least --min-time seconds of each after one warm-up call. Prints
the ratios last.

    python bench/kernel_paths.py [--samples N] [--min-time S] [--seed-batches B ...]
                                 [--widths W ...] [--batches B ...]
"""

import argparse
import statistics
import time

import torch
from common import NETWORK, config, data
from mnistbench.train import kernel, native, nets

ROWS_PER_CALL = 256  # as the kernel mode: many steps per call below 256 rows per step
TRAINING = config()["training"]  # the pipeline's: every path trains as a run does
LR, MSE = TRAINING["lr"], TRAINING["loss"] != "cross_entropy"


def per_sample_us(a, b, min_time: float) -> tuple[float, float]:
    """Median µs per sample of two timed things, each (call, rows): call(i) trains `rows` samples
    (i counts its calls). The calls alternate, so a change in the host's load in the meantime
    falls on both alike; one warm-up call each, then at least `min_time` seconds of each."""
    times = ([], [])
    for i in range(1 << 30):
        for (call, rows), ts in zip((a, b), times):
            t0 = time.perf_counter()
            call(i)
            if i:
                ts.append((time.perf_counter() - t0) / rows)
        if i >= 3 and min(sum(ts) * rows for ts, (_, rows) in zip(times, (a, b))) >= min_time:
            break
    return statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6


def chunks(d: dict, batch: int):
    """(steps per call, rows per call, call -> its x, t): consecutive rows, wrapping around."""
    steps = max(1, ROWS_PER_CALL // batch)
    rows = steps * batch
    n = len(d["x"]) // rows
    return steps, rows, lambda i: (d["x"][i % n * rows : (i % n + 1) * rows], d["t"][i % n * rows : (i % n + 1) * rows])


def fast_path(lib, d: dict, batch: int):
    """(call, rows): sgd_steps on the seed shape, the parameters laid out as the kernel mode lays
    them out."""
    p = {k: v.contiguous() for k, v in nets.init_params(NETWORK, "default", 0).items()}
    p["w1"] = p["w1"].t().contiguous()  # the kernel's layout, [784, 16]
    work = torch.empty(lib.work_floats(1))
    steps, rows, rows_of = chunks(d, batch)

    def call(i):
        x, t = rows_of(i)
        # Pointers taken here, from tensors this closure holds: they must outlive fast_path.
        ptrs = [p[k].data_ptr() for k in nets.names(NETWORK)]
        lib.sgd_steps(x.data_ptr(), t.data_ptr(), steps, batch, *ptrs, LR, MSE, 1, work.data_ptr())

    return call, rows


def init(sizes, seed: int = 0) -> dict:
    """nn.Linear's init for every layer of 784 -> ... -> 10, in train/nets.py's parameter names."""
    g = torch.Generator().manual_seed(seed)
    p = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        bound = fan_in**-0.5
        p[f"w{i}"] = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=g)
        p[f"b{i}"] = torch.empty(fan_out).uniform_(-bound, bound, generator=g)
    return p


def generic_path(lib, sizes, d: dict, batch: int):
    """(call, rows): mlp_steps through native.Net, one thread."""
    net = native.Net(lib, sizes, init(sizes), threads=1)
    steps, rows, rows_of = chunks(d, batch)

    def call(i):
        x, t = rows_of(i)
        net.steps(x, t, steps, batch, LR, mse=MSE)

    return call, rows


def torch_path(sizes, d: dict, batch: int):
    """(call, rows): the same MLP as an nn.Sequential, torch.optim.SGD, one step per batch."""
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.Sigmoid()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    steps, rows, rows_of = chunks(d, batch)
    y = d["y"]

    def call(i):
        x, _ = rows_of(i)
        n = len(d["x"]) // rows
        yy = y[i % n * rows : (i % n + 1) * rows]
        for s in range(steps):
            opt.zero_grad(set_to_none=True)
            nets.loss_fn(
                net(x[s * batch : (s + 1) * batch]), yy[s * batch : (s + 1) * batch], TRAINING["loss"]
            ).backward()
            opt.step()

    return call, rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--seed-batches", type=int, nargs="+", default=[1, 16, 256, 4096])
    p.add_argument("--widths", type=int, nargs="+", default=[16, 256, 1024, 4096])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 256, 4096])
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    lib = kernel.load()
    d = data(max(a.samples, *a.seed_batches, *a.batches))

    print("(a) 784-16-16-10, fast path (sgd_steps) vs generic path (mlp_steps), 1 thread, us/sample")
    seed_ratios = []
    for b in a.seed_batches:
        fast, gen = per_sample_us(fast_path(lib, d, b), generic_path(lib, NETWORK.sizes, d, b), a.min_time)
        seed_ratios.append(f"b{b} {gen / fast:.3g}")
        print(f"  batch {b:5d}: fast {fast:9.3f}  generic {gen:9.3f}  generic/fast {gen / fast:7.3g}", flush=True)

    print("(b) 784-w-10, generic path vs torch (nn.Sequential + optim.SGD), 1 thread, us/sample")
    torch_ratios = []
    for w in a.widths:
        sizes = (784, w, 10)
        for b in a.batches:
            gen, ref = per_sample_us(generic_path(lib, sizes, d, b), torch_path(sizes, d, b), a.min_time)
            torch_ratios.append(f"w{w}/b{b} {gen / ref:.3g}")
            print(
                f"  width {w:5d} batch {b:5d}: generic {gen:9.3f}  torch {ref:9.3f}  generic/torch {gen / ref:7.3g}",
                flush=True,
            )

    print(f"torch {torch.__version__}; kernel built by {kernel.identity()}")
    print("ratio generic/fast, 784-16-16-10: " + ", ".join(seed_ratios))
    print("ratio generic/torch, 784-w-10: " + ", ".join(torch_ratios))


if __name__ == "__main__":
    main()
