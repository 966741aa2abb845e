"""Train one device x mode x batch size x repeat combination and time it.

Runs inside the Snakemake `train` rule, or alone on any machine with torch:

    python -m mnistbench.train --data results/preload/mnist.pt --device cuda --mode module \\
        --batch-size 64 --out run.csv
"""

import argparse
import math
import os
import socket
import sys
from pathlib import Path

import torch

from mnistbench import BenchError, devices, env, model, timing
from mnistbench.data import load_tensors
from mnistbench.modes import MODES, Unsupported, exists
from mnistbench.records import COLUMNS, write_outputs

# Defaults for a run outside Snakemake (where the schema may not be readable: no pyyaml); the
# workflow passes its validated config instead. tests/test_cli.py holds them equal to the schema's.
DEFAULTS = dict(
    epochs=4,
    train_samples=32768,
    test_samples=2000,
    warmup_steps=20,
    cpu_threads=0,
    seed=0,
    target_accuracy=0.9,
    model=dict(loss="cross_entropy", init="default", lr=0.5, amp_dtype="float16"),
)


def seed_of(cfg: dict, repeat: int, epoch: int = 0) -> int:
    """Random seed from the config and the repeat index only, never the mode or device, so every
    run with the same repeat starts from the same weights and sees the same data order."""
    return (int(cfg["seed"]) * 1_000_003 + repeat) * 1_009 + epoch


def train(cfg: dict, data_path, device: str, mode: str, batch_size: int, repeat: int, log=print):
    """Returns (row, record): the CSV row, and the JSON record (environment, per-epoch metrics,
    every step time). Failures that belong in the results (oom, nan, unsupported) become the
    row's status; an absent device raises BenchError."""
    devices.prepare(device)
    threads = cfg["cpu_threads"] or os.cpu_count()
    torch.set_num_threads(threads)
    m = cfg["model"]
    row = {c: "" for c in COLUMNS}
    row.update(
        host=socket.gethostname(), device=device, device_name=devices.name(device), mode=mode,
        batch_size=batch_size, repeat=repeat, epochs=cfg["epochs"], loss=m["loss"], init=m["init"],
        lr=m["lr"], seed=cfg["seed"], threads=threads, torch_version=torch.__version__,
    )  # fmt: skip
    record = dict(environment=env.describe(device, threads, cfg), epochs=[], step_times_s=[], row=row)
    try:
        status, message = _train(cfg, data_path, device, mode, batch_size, repeat, row, record, log)
    except (Unsupported, RuntimeError) as e:  # torch.OutOfMemoryError is a RuntimeError
        status, message = failure(e, batch_size)
    row.update(status=status, message=message)
    log(f"{status}: {message}")
    return row, record


def failure(e: Exception, batch_size: int) -> tuple[str, str]:
    """(status, message) of a failure that belongs in the results rather than ending the job: a
    pair that cannot run here, out of memory, or another runtime error (one line each)."""
    if isinstance(e, Unsupported):
        return "unsupported", str(e)
    text = " ".join(str(e).split())
    if isinstance(e, torch.OutOfMemoryError):
        return "oom", f"out of memory at batch size {batch_size}: {text[:160]}"
    return ("oom" if "out of memory" in text.lower() else "error"), f"{type(e).__name__}: {text[:200]}"


def _train(cfg, data_path, device, mode, batch_size, repeat, row, record, log):
    m = cfg["model"]
    if not exists(mode, device):
        raise Unsupported(f"{mode} cannot run on {device}")
    # Data stays on the device for the whole run; only `dataloader` keeps it in host memory.
    home = "cpu" if MODES[mode].host_data else device
    tensors = load_tensors(data_path, home)
    n, n_test = cfg["train_samples"], cfg["test_samples"]
    if n > len(tensors["train_x"]) or n_test > len(tensors["test_x"]):
        raise BenchError(
            f"train_samples={n}/test_samples={n_test} exceed the data set "
            f"({len(tensors['train_x'])}/{len(tensors['test_x'])} images); lower them in the config"
        )
    data = {"x": tensors["train_x"][:n], "y": tensors["train_y"][:n]}
    data["t"] = torch.nn.functional.one_hot(data["y"], 10).float()
    test_x = tensors["test_x"][:n_test].to(device)
    test_y = tensors["test_y"][:n_test].to(device)
    eval_x, eval_y = data["x"].to(device), data["y"].to(device)

    steps_per_epoch = n // batch_size
    if steps_per_epoch == 0:
        return "unsupported", f"batch size {batch_size} exceeds train_samples {n}"
    total = steps_per_epoch * cfg["epochs"]
    # Warm-up steps are real training steps (so every mode trains the same function) whose times
    # stay out of the steady-state figures; capped at half an epoch, so large batches keep
    # most of their few steps.
    warmup = min(cfg["warmup_steps"], max(steps_per_epoch // 2, 1), total - 1)
    row.update(train_samples=n, steps=total, warmup_steps=warmup, timed_steps=total - warmup)

    params = model.init_params(m["init"], seed_of(cfg, repeat))
    trainer = MODES[mode](params, device, batch_size, loss=m["loss"], lr=m["lr"], amp_dtype=m["amp_dtype"])
    record["steps_per_call"] = trainer.steps_per_call
    if trainer.steps_per_call > 1:
        log(f"{mode} does {trainer.steps_per_call} training steps per call; each step's time is the call's share")

    def order(epoch):
        g = torch.Generator().manual_seed(seed_of(cfg, repeat, epoch))
        return torch.randperm(n, generator=g).to(home)

    # One-off costs (compile, graph capture) on a batch of the first epoch, timed apart.
    t0 = timing.wall(device)
    trainer.setup(next(iter(trainer.epoch(data, order(1)))))
    row["setup_s"] = timing.wall(device) - t0

    clock = timing.StepClock(device)
    clock.reserve(steps_per_epoch + 1)
    step_times, epoch_times, cum = record["step_times_s"], [], 0.0
    time_to_target = None
    for epoch in range(1, cfg["epochs"] + 1):
        batches = trainer.epoch(data, order(epoch))  # reordering happens here, before the clock
        epoch_s, intervals = timing.timed_epoch(trainer.step, batches, clock)
        step_times += intervals
        epoch_times.append(epoch_s)
        cum += epoch_s
        # Outside the timed region: evaluation and progress.
        test_loss, acc = model.evaluate(trainer.params(), test_x, test_y, m["loss"])
        record["epochs"].append(dict(epoch=epoch, train_s=epoch_s, cum_train_s=cum, test_loss=test_loss, test_accuracy=acc))
        log(f"epoch {epoch}/{cfg['epochs']}: {epoch_s:.3f} s, {steps_per_epoch / epoch_s:.1f} steps/s, test loss {test_loss:.4f}, test accuracy {acc:.4f}")
        if time_to_target is None and acc >= cfg["target_accuracy"]:
            time_to_target = cum
        if not math.isfinite(test_loss):
            row.update(first_epoch_s=epoch_times[0], total_train_s=cum, test_loss=test_loss)
            return "diverged", f"loss became {test_loss} in epoch {epoch}; lower model.lr"

    med, q1, q3 = timing.quantiles(step_times[warmup:])
    final_loss, _ = model.evaluate(trainer.params(), eval_x, eval_y, m["loss"])
    steady = epoch_times[1:]
    row.update(
        step_time_median_s=med, step_time_q1_s=q1, step_time_q3_s=q3, samples_per_s=batch_size / med,
        first_epoch_s=epoch_times[0], steady_epoch_s=timing.quantiles(steady)[0] if steady else "",
        total_train_s=cum, final_loss=final_loss, test_loss=test_loss, test_accuracy=acc,
        time_to_target_s="" if time_to_target is None else time_to_target,
    )  # fmt: skip
    if not math.isfinite(final_loss):
        return "diverged", f"training loss is {final_loss}; lower model.lr"
    return "ok", f"{batch_size / med:.0f} samples/s"


def main(argv=None):
    p = argparse.ArgumentParser(description="Train and time one combination of the MNIST benchmark.")
    p.add_argument("--data", required=True, help="tensor file written by the preload step")
    p.add_argument("--device", default="cpu")
    p.add_argument("--mode", default="module", choices=sorted(MODES))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeat", type=int, default=0)
    p.add_argument("--epochs", type=int, default=DEFAULTS["epochs"])
    p.add_argument("--train-samples", type=int, default=DEFAULTS["train_samples"])
    p.add_argument("--test-samples", type=int, default=DEFAULTS["test_samples"])
    p.add_argument("--warmup-steps", type=int, default=DEFAULTS["warmup_steps"])
    p.add_argument("--threads", type=int, default=0, help="cpu threads, 0 = all cores")
    p.add_argument("--loss", default="cross_entropy", choices=model.LOSSES)
    p.add_argument("--init", default="default", choices=["default", "seed"])
    p.add_argument("--lr", type=float, default=DEFAULTS["model"]["lr"])
    p.add_argument("--out", default="run.csv")
    a = p.parse_args(argv)
    cfg = dict(DEFAULTS, epochs=a.epochs, train_samples=a.train_samples, test_samples=a.test_samples,
               warmup_steps=a.warmup_steps, cpu_threads=a.threads,
               model=dict(DEFAULTS["model"], loss=a.loss, init=a.init, lr=a.lr))  # fmt: skip
    try:
        row, record = train(cfg, a.data, a.device, a.mode, a.batch_size, a.repeat)
    except BenchError as e:
        sys.exit(f"error: {e}")
    write_outputs(row, record, a.out, Path(a.out).with_suffix(".json"))
    print(f"{row['status']}: {row['samples_per_s'] and round(row['samples_per_s'])} samples/s -> {a.out}")


if __name__ == "__main__":
    main()
