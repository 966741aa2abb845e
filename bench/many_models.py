"""Many small models at once on the cpu: the time per model-step of K copies of the seed's network
trained together (models_at_once) against one at a time, per mode that takes K, and against the
fastest one-model mode (`kernel`, whose K models are K calls).

Each mode is timed with the train jobs' own loop (bench/common.py) at K = 1 and each larger K, in
one run; the ratio "x one at a time" is the per-model-step time at K = 1 over that at K.

    python bench/many_models.py [--batch-size B] [--models 1 16 256] [--modes module manual numpy]
"""

import argparse

import torch
from common import data, step_time
from mnistbench.config.catalog import MODES
from mnistbench.train.needs import exists


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--models", type=int, nargs="+", default=[1, 16, 256])
    p.add_argument("--modes", nargs="+", default=[m for m in MODES if not MODES[m].one_at_a_time and exists(m, "cpu")])
    p.add_argument("--one-at-a-time", default="kernel", help="the fastest mode that takes one model per step")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    d, b = data(a.samples), a.batch_size
    per_model = {}  # (mode, K) -> seconds per model-step
    for mode in a.modes:
        for k in a.models:
            t = step_time(mode, b, d, a.min_time, models=k)
            if t is None:
                continue
            per_model[mode, k] = t / k
            one = per_model.get((mode, 1))
            gain = f"  {one / (t / k):6.2f}x one at a time" if one else ""
            print(f"{mode:>9} K={k:<4}: {t * 1e6:10.1f} us/step  {t / k * 1e6:8.2f} us/model-step{gain}", flush=True)
    single = step_time(a.one_at_a_time, b, d, a.min_time) if exists(a.one_at_a_time, "cpu") else None
    if single is not None:
        print(f"{a.one_at_a_time:>9} K=1   : {single * 1e6:10.1f} us/step (K models: K calls)")
    print(f"batch {b}, threads {a.threads}, torch {torch.__version__}")
    k = max(a.models)
    best = min((m for m, kk in per_model if kk == k), key=lambda m: per_model[m, k])
    line = f"best at K={k}: {best} {per_model[best, k] * 1e6:.2f} us/model-step"
    if (best, 1) in per_model:
        line += f"; ratio one at a time/K = {per_model[best, 1] / per_model[best, k]:.2f}x"
    if single is not None:
        line += f"; ratio {a.one_at_a_time} (K calls)/{best} = {single / per_model[best, k]:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
