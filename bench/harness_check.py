"""Does the project's step clock agree with torch.utils.benchmark.Timer?

Times the `module` training step on cpu at batch sizes 1, 64 and 4096 twice in one run: with
the harness the train jobs use (timing.timed_epoch: a clock mark after every step, median of
the steps after warm-up), and with torch.utils.benchmark.Timer (blocked_autorange, same thread
count, same step over the same batches), interleaved in rounds. Prints the ratio
harness / Timer per batch size; 1.0 = agree.

    python bench/harness_check.py [--samples N] [--threads T]
"""

import argparse
import itertools
import statistics

import torch
import torch.utils.benchmark as benchmark
from common import NETWORK, config, data
from mnistbench.config import networks
from mnistbench.config.catalog import MODES
from mnistbench.measure import timing
from mnistbench.train import runner


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64, 4096])
    p.add_argument("--samples", type=int, default=16384, help="samples per timed epoch")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--min-run-time", type=float, default=2.0, help="seconds per method per batch size")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds of harness and Timer")
    p.add_argument("--mode", default="module", choices=sorted(MODES))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    n = max(a.samples, max(a.batch_sizes) * 8)
    d = data(n)
    print(f"mode {a.mode}, cpu, {a.threads} threads, torch {torch.__version__}")
    print(f"{'batch':>6} {'harness us':>11} {'Timer us':>10} {'ratio':>6}")
    ratios = []
    for b in a.batch_sizes:
        cfg = config(a.threads)
        m = runner.build(cfg, networks.build(cfg, NETWORK.name), a.mode, "cpu", b)
        perm = torch.randperm(n, generator=g)
        runner.setup(m, next(iter(m.epoch(d, perm))), "cpu")
        batches = list(m.epoch(d, perm))  # after setup: a mode may choose its steps per call there
        runner.warm_up(m, batches, min(20, len(batches) // 2))
        clock = timing.StepClock("cpu")
        # Timer steps through the same batches (a cycle), so both measure one workload: a single
        # repeated batch would stay in cache at large batch sizes, which training never does.
        feed = itertools.cycle(batches)
        timer = benchmark.Timer(stmt="m.step(next(feed))", globals={"m": m, "feed": feed}, num_threads=a.threads)
        # Interleave the two in rounds, so both see the same machine (other load comes and goes).
        ours, theirs = [], []
        for _ in range(a.rounds):
            steps = []
            while sum(steps) < a.min_run_time / a.rounds:
                steps += timing.timed_epoch(m.step, batches, clock)[1]
            ours.append(statistics.median(steps))
            # Timer times a call; a call may do several training steps (compiled at batch 1).
            theirs.append(timer.blocked_autorange(min_run_time=a.min_run_time / a.rounds).median / m.steps_per_call)
        harness, timer = statistics.median(ours), statistics.median(theirs)
        ratios.append(harness / timer)
        print(f"{b:>6} {harness * 1e6:>11.2f} {timer * 1e6:>10.2f} {ratios[-1]:>6.3f}")
    print("ratios harness/Timer: " + " ".join(f"bs{b}={r:.3f}" for b, r in zip(a.batch_sizes, ratios)))


if __name__ == "__main__":
    main()
