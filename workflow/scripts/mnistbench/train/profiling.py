"""Where the time of one training step goes, and how many ops it dispatches (torch.profiler).

A few steps of every network x mode on one device, at the smallest and the largest batch size of
the grid.
Never inside a timed run: the profiler adds a cost to every op it records, so these numbers
explain the timings of the train rule, they do not replace them. Each row also carries the same
steps timed without the profiler (`step_us_plain`), so the reader sees how much it added.

How a step is split, as far as the code allows it honestly:
- transfer: fetching the next batch (DataLoader collation and the host->device copy in
  `dataloader`; slicing a tensor already on the device in the other modes).
- with autograd (autograd, module, dataloader, amp): forward = step start to the first
  backward node; backward = first to last autograd node; optimizer = torch.optim's own
  zero_grad ranges + everything after the backward pass (SGD update, GradScaler).
- with a hand-written `backward` method (manual, numpy): forward+backward = that method,
  optimizer = the rest of the step (the in-place SGD update).
- every other mode (the beginner's code, and the modes that fuse the step into one compiled,
  captured or hand-written kernel): one inseparable block ("whole step").
- device wait: the synchronisation after the step, i.e. queued device work the cpu did not wait
  for while issuing it (zero on cpu).
Times are cpu-side wall clock of each range; on cuda that is the time to issue the work, and what
the device still had to do shows up as device wait.
"""

import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch.autograd.profiler import record_function
from torch.profiler import profile

from mnistbench import BenchError
from mnistbench.config import devices
from mnistbench.config.networks import build
from mnistbench.data.preload import load_tensors
from mnistbench.train import runner
from mnistbench.train.ladder import implementation
from mnistbench.train.needs import exists
from mnistbench.train.records import PHASES, PROFILE_COLUMNS

PER_STEP = (
    ["step_us_plain", "step_us_profiled"]
    + [f"{p}_us" for p in PHASES]
    + ["ops_step", "ops_batch", "aten_calls", "launches", "kernels"]
)
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")


def profile_device(cfg, data_path, device, networks, modes, batch_sizes, steps=10, warmup=5, log=print) -> list[dict]:
    """One row per network x mode x batch size that can exist on `device`."""
    if not devices.traits(device).profiler:
        # Kineto probes for GPUs even when only the cpu is profiled and prints an error line
        # where there is none; nothing it reports at this level concerns a cpu-only profile.
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    devices.prepare(device)
    threads = runner.use_threads(cfg)
    tensors = load_tensors(data_path, "cpu")
    with profile():  # the first profiler session of a process pays for its own start-up; not a step
        torch.ones(1).add_(1)
    rows = []
    for network in networks:
        s = build(cfg, network)
        for mode in modes:
            if not exists(mode, device, s):
                continue
            for b in sorted(set(batch_sizes)):
                # Large batches: few long, steady steps, and reading the profile back costs ~0.1 ms
                # per event recorded. A DataLoader dispatches ops per sample (~25 k events per step
                # at batch 4096, ~2.3 s to read back), so it gets one step there.
                n = steps if b == min(batch_sizes) else 1 if implementation(mode).host_data else max(3, steps // 3)
                row = dict(
                    {c: "" for c in PROFILE_COLUMNS}, **runner.base_row(device, network, mode, b, threads), steps=n
                )
                try:
                    row.update(profile_one(cfg, s, tensors, device, mode, b, n, warmup), status="ok")
                except BenchError:
                    raise
                except runner.recorded(s) as e:  # as in a train run
                    status, message = runner.failure(e, b, s)
                    row.update(status=status, message=message)
                log(
                    f"{device} {network} {mode} bs{b}: {row['status']} {row['message']} "
                    f"{row['step_us_plain'] and round(row['step_us_plain'])} us/step plain, "
                    f"{row['step_us_profiled'] and round(row['step_us_profiled'])} profiled"
                )
                rows.append(row)
    return rows


def batches_for(tensors, device, mode, b, n_batches):
    """Data for n_batches batches, the training images repeated if the data set is smaller."""
    i = torch.arange(b * n_batches) % len(tensors["train_x"])
    x, y = tensors["train_x"][i], tensors["train_y"][i]
    home = "cpu" if implementation(mode).host_data else device
    data = {"x": x.to(home), "y": y.to(home), "t": F.one_hot(y, 10).float().to(home)}
    return data, torch.arange(len(i)).to(home)


def profile_one(cfg, s, tensors, device, mode, b, steps, warmup) -> dict:
    trainer = runner.build(cfg, s, mode, device, b)
    first, order = batches_for(tensors, device, mode, b, trainer.steps_per_call)
    runner.setup(trainer, next(iter(trainer.epoch(first, order))), device)  # outside everything measured
    k = trainer.steps_per_call  # an item of the epoch (one step() call) may hold several steps
    data, perm = batches_for(tensors, device, mode, b, (warmup + 2 * steps) * k)
    batches = iter(trainer.epoch(data, perm))
    runner.warm_up(trainer, batches, warmup)

    # The same kind of steps without the profiler: what the profiler's own cost is measured against.
    plain = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.step(next(batches))
        devices.synchronize(device)
        plain.append(time.perf_counter() - t0)

    if callable(getattr(trainer, "backward", None)):
        # Hand-written modes compute forward and backward in one method: mark it, so the rest of
        # the step (the SGD update) can be told apart. The instance attribute shadows the method;
        # only now, so the plain steps above do not pay for the marker.
        inner = trainer.backward

        def backward(*args, **kw):
            with record_function("mnistbench::fwd_bwd"):
                return inner(*args, **kw)

        trainer.backward = backward

    host = devices.is_cpu(device)
    with profile(activities=devices.profiler_activities(device)) as prof:
        for _ in range(steps):
            with record_function("mnistbench::batch"):
                batch = next(batches)
            with record_function("mnistbench::step"):
                trainer.step(batch)
            if not host:  # on the cpu there is nothing to wait for
                with record_function("mnistbench::wait"):
                    devices.synchronize(device)
    out = split_steps(prof.events(), steps, kernels_launched=devices.traits(device).profiler is not None)
    out["step_us_plain"] = statistics.median(plain) * 1e6
    # Per training step, not per call.
    return {key: v / k if key in PER_STEP else v for key, v in out.items()}


def _span(e):
    return e.time_range.start, e.time_range.end


def _is_top_aten(e) -> bool:
    """An aten op the code itself asked for (not one dispatched from inside another aten op)."""
    if not e.name.startswith("aten::"):
        return False
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith("aten::"):
            return False
        p = p.cpu_parent
    return True


def split_steps(events, steps, kernels_launched=False) -> dict:
    """Per-phase medians (µs) over the profiled steps, and per-step op / launch counts."""
    cpu = [e for e in events if str(getattr(e, "device_type", "")).endswith("CPU")]
    by_name = lambda name: sorted(_span(e) for e in cpu if e.name == name)  # noqa: E731
    step_r, batch_r, wait_r = by_name("mnistbench::step"), by_name("mnistbench::batch"), by_name("mnistbench::wait")
    fb_r = by_name("mnistbench::fwd_bwd")
    bwd_r = sorted(_span(e) for e in cpu if e.name.startswith("autograd::engine::evaluate_function"))
    zero_r = sorted(_span(e) for e in cpu if e.name.startswith("Optimizer.zero_grad#"))
    if len(step_r) != steps or len(batch_r) != steps or len(wait_r) not in (0, steps):
        raise RuntimeError(f"profiler recorded {len(step_r)} of {steps} steps")

    def inside(rs, lo, hi):
        return [r for r in rs if r[0] >= lo and r[1] <= hi]

    per = {p: [] for p in PHASES}
    split = "not separable"
    for i, (s0, s1) in enumerate(step_r):
        total = s1 - s0
        ph = dict.fromkeys(PHASES, 0.0)
        bwd, fb = inside(bwd_r, s0, s1), inside(fb_r, s0, s1)
        if bwd:
            split = "autograd phases"
            b0, b1 = min(r[0] for r in bwd), max(r[1] for r in bwd)
            zero = sum(e - s for s, e in inside(zero_r, s0, b0))
            ph.update(forward=b0 - s0 - zero, backward=b1 - b0, optimizer=(s1 - b1) + zero)
        elif fb:
            split = "hand-written backward"
            inner = sum(e - s for s, e in fb)
            ph.update(fwd_bwd=inner, optimizer=total - inner)
        else:
            ph["whole"] = total
        ph["transfer"] = batch_r[i][1] - batch_r[i][0]
        ph["wait"] = wait_r[i][1] - wait_r[i][0] if wait_r else 0.0
        for p in PHASES:
            per[p].append(ph[p])
    out = {f"{p}_us": statistics.median(v) for p, v in per.items()}
    totals = [per["transfer"][i] + (s1 - s0) + per["wait"][i] for i, (s0, s1) in enumerate(step_r)]
    out["step_us_profiled"] = statistics.median(totals)
    out["split"] = split

    # Counts: ops the code dispatched inside the step and inside the batch fetch; every aten call
    # including the nested ones; kernel launches (cuda runtime calls) and kernels run on the device.
    def count(pred, ranges):
        return sum(
            1 for e in cpu if pred(e) and any(lo <= e.time_range.start and e.time_range.end <= hi for lo, hi in ranges)
        )

    out["ops_step"] = count(_is_top_aten, step_r) / steps
    out["ops_batch"] = count(_is_top_aten, batch_r) / steps
    out["aten_calls"] = count(lambda e: e.name.startswith("aten::"), step_r + batch_r) / steps
    windows = [(b[0], (w or s)[1]) for b, s, w in zip(batch_r, step_r, wait_r or [None] * steps)]
    launches = count(lambda e: e.name in LAUNCH_NAMES, windows)
    kernels = sum(
        1
        for e in events
        if str(getattr(e, "device_type", "")).endswith("CUDA")
        and not getattr(e, "is_user_annotation", False)  # our record_function ranges, mirrored on the GPU
        and not e.name.lower().startswith(("memcpy", "memset"))
    )
    # Nothing is launched on the cpu; the profiler records no launches on mps.
    out["launches"] = launches / steps if kernels_launched else float("nan")
    out["kernels"] = kernels / steps if kernels_launched else float("nan")
    return out
