"""Train one device x network x mode x batch size x repeat combination and time it.

Runs inside the Snakemake `train` rule, or alone on any machine with torch:

    python -m mnistbench.train --data results/preload/mnist.pt --device cuda --network mlp-16-16 \\
        --mode module --batch-size 64 --out run.csv
"""

import argparse
import copy
import itertools
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

import torch

from mnistbench import BenchError
from mnistbench.config import depends, devices, networks, schema
from mnistbench.config.catalog import MODES
from mnistbench.data.preload import load_tensors
from mnistbench.measure import quality, slowed, timing
from mnistbench.train import environment, memory, nets, records, runner
from mnistbench.train.ladder import implementation
from mnistbench.train.modes import Unsupported
from mnistbench.train.native import nonzero_share
from mnistbench.train.needs import FIXES, lacking, why_not

# Defaults for a run outside Snakemake: the schema's, as the workflow's validated config has them.
DEFAULTS = schema.defaults()
# A run whose training loss ends above this many times its starting value blew up, even where
# every number stayed finite; one whose test accuracy is at chance (no better than always
# answering the test set's most common digit) and whose loss rose by more than ROSE went wrong
# too (a rate too high for the network: a wide sigmoid layer's output moves with its width). A
# loss within ROSE of where it started is a run too short or too slow to learn in its epochs (a
# few steps of a large batch, a low rate), not a failure: its timing stands.
BLOWUP = 10.0
ROSE = 1.05
# Extra timing epochs (to reach min_timed_s) stop here even if the run is still shorter: a run that
# needs more than this many epochs of its data says so in its quality note.
MAX_EPOCHS = 1000
# What the kept attempt gives the row (setup_s is the first attempt's: the coldest one-off cost).
KEPT = [
    "quality",
    "steps",
    "timed_steps",
    "timed_epochs",
    "steps_per_call",
    *records.TIMING,
    *records.BLOCKS,
    "test_loss",
    "test_accuracy",
    "time_to_target_s",
    *records.MACHINE,
]


def train(
    cfg: dict,
    data_path,
    device: str,
    network: str,
    mode: str,
    batch_size: int,
    repeat: int,
    models_at_once=1,
    log=print,
):
    """Returns (row, record): the CSV row, and the JSON record (environment, settings, per-epoch
    metrics, every attempt's evidence, the kept attempt's step times). `network` is a `models`
    entry; models_at_once (K) copies of it train together, and their losses and accuracies are
    the means of the copies'. Failures that belong in the results (oom, diverged, unsupported, a
    user's module that cannot be trained) become the row's status; an absent device raises
    BenchError."""
    threads = runner.use_threads(cfg)
    devices.prepare(device)
    try:
        s = networks.build(cfg, network)
    except networks.BadNetwork as e:
        raise BenchError(f"config key `models`: {e}") from None
    row = {c: "" for c in records.COLUMNS}
    row.update(runner.base_row(device, network, mode, batch_size, threads))
    row.update(
        repeat=repeat,
        models_at_once=models_at_once,
        epochs=cfg["epochs"],
        model_digest="" if s.network.family else s.network.digest,
        loss=s.loss,
        init=s.init,
        lr=s.lr,
        seed=cfg["seed"],
        settings=depends.settings_json(cfg),
        code=depends.code_fingerprint(),
    )
    record = dict(environment=environment.describe(device, threads, cfg), settings=depends.settings(cfg), row=row)
    record.update(epochs=[], step_times_rle=[], attempts=[])
    try:
        status, message = _train(cfg, data_path, device, s, mode, batch_size, models_at_once, repeat, row, record, log)
    except BenchError:
        raise  # the job's own failure (data, a missing tool): one line, no row
    except runner.recorded(s) as e:  # torch.OutOfMemoryError is a RuntimeError
        status, message = runner.failure(e, batch_size, s)
    row.update(status=status, message=message)
    log(f"{status}: {message}" + (f" [timing {row['quality']}: {row['quality_note']}]" if row["quality_note"] else ""))
    return row, record


def _train(cfg, data_path, device, s, mode, batch_size, k, repeat, row, record, log):
    home = "cpu" if implementation(mode).host_data else device  # only `dataloader` keeps the data on the host
    tensors = load_tensors(data_path, home)
    n, n_test = cfg["train_samples"], cfg["test_samples"]
    if n > len(tensors["train_x"]) or n_test > len(tensors["test_x"]):
        raise BenchError(
            f"train_samples={n}/test_samples={n_test} exceed the data set "
            f"({len(tensors['train_x'])}/{len(tensors['test_x'])} images); lower them in the config"
        )
    data = {"x": tensors["train_x"][:n], "y": tensors["train_y"][:n]}
    data["t"] = torch.nn.functional.one_hot(data["y"], 10).float()
    test = tensors["test_x"][:n_test].to(device), tensors["test_y"][:n_test].to(device)
    evaluation = data["x"].to(device), data["y"].to(device)

    steps_per_epoch = n // batch_size
    if steps_per_epoch == 0:
        return "unsupported", f"batch size {batch_size} exceeds train_samples {n}"
    total = steps_per_epoch * cfg["epochs"]
    # Warm-up steps are real training steps (so every mode trains the same function) whose times
    # stay out of the steady-state figures; capped at half an epoch, so large batches keep most
    # of their few steps.
    warmup = min(cfg["warmup_steps"], max(steps_per_epoch // 2, 1), total - 1)
    # Whole batches only: the n % batch_size samples after the last whole batch of an epoch are
    # not trained (dropped_samples), in every mode alike.
    row.update(
        train_samples=n, dropped_samples=n % batch_size, steps=total, warmup_steps=warmup, timed_steps=total - warmup
    )
    reason = why_not(mode, device, s, k)
    if reason and reason == lacking(mode):
        # The grid held this run, so the machine had what its mode needs when it was planned (a
        # compiler that builds the kernel, Triton): a failed job, which a plain rerun redoes once
        # the machine has it again, not an `unsupported` row that would stand.
        raise BenchError(f"{reason}: {FIXES[MODES[mode].needs]}")
    if reason:  # before a user's module is loaded: its row says why the combination cannot run
        raise Unsupported(reason)
    memory.check(cfg, s, mode, device, batch_size, k)  # before anything of the run is allocated
    initial = nets.initial_state(s, runner.seed_of(cfg, repeat), k)
    # One copy's size: a run of K copies trains K times as many parameters and FLOP per sample.
    row.update(flop_per_sample=nets.flop_per_sample(s), parameters=sum(v.numel() for v in initial.values()) // k)
    if mode == "sparse":  # what it skips: the inputs that are the background value
        row["input_nonzero_share"] = nonzero_share(data["x"])
    initial_loss, _ = nets.evaluate(s, initial, *evaluation, k)
    row["initial_loss"] = initial_loss

    # Time the run; a noisy timing is made again (up to `retime` times, after the machine settled)
    # and the cleanest attempt is kept. Every attempt trains the same function from the same start.
    q = cfg["quality"]
    kept = None
    for attempt in range(1, cfg["retime"] + 2):
        if attempt > 1:
            waited = quality.settle(q["max_other_cpu"], q["settle_s"], log=log)
            last = record["attempts"][-1]
            log(f"retiming (attempt {attempt}) after waiting {waited:.1f} s: the last timing was {last['quality']}")
        try:
            a = _attempt(cfg, data, test, device, s, mode, batch_size, k, repeat, warmup, log)
        except (Unsupported, RuntimeError) as e:  # e.g. out of memory in a retime
            if kept is None:
                raise
            status, message = runner.failure(e, batch_size)
            record["attempts"].append(dict(status=status, message=message, quality=status, quality_note=message))
            log(f"attempt {attempt} failed ({message}); the cleanest earlier timing is kept")
            break
        record["attempts"].append({k: v for k, v in a.items() if k not in ("step_times_s", "params")})
        if kept is None or a["score"] < kept["score"]:
            kept = a
        if a["status"] != "ok" or a["quality"] != "noisy":  # retiming cannot cure a failure or few steps
            break
    row["attempts"] = len(record["attempts"])
    row["setup_s"] = record["attempts"][0]["setup_s"]  # the one-off cost is the first (coldest) one
    record["steps_per_call"] = kept["steps_per_call"]
    record["epochs"], record["step_times_rle"] = kept["epochs"], records.run_lengths(kept["step_times_s"])
    row.update({k: kept[k] for k in KEPT if k in kept and k != "setup_s"})
    note = kept["quality_note"]
    if len(record["attempts"]) > 1:
        earlier = [f"attempt {i}: {x['quality']} ({x['quality_note']})" for i, x in enumerate(record["attempts"], 1)]
        note = "; ".join(filter(None, [note, f"kept the cleanest of {len(earlier)} attempts"] + earlier))
    row["quality_note"] = note
    if kept["status"] != "ok":
        return kept["status"], kept["message"]

    final_loss, _ = nets.evaluate(s, kept["params"], *evaluation, k)
    row["final_loss"] = final_loss
    chance = float(torch.bincount(test[1], minlength=10).max()) / len(test[1])
    wrong = went_wrong(initial_loss, final_loss, row["test_accuracy"], chance)
    if wrong:
        return "diverged", wrong
    row["chance_accuracy"] = chance + 3.29 * math.sqrt(chance * (1 - chance) / len(test[1]))
    rate = f"{row['samples_per_s']:.0f} samples/s"
    if row["test_accuracy"] <= row["chance_accuracy"]:  # timed right, learned nothing: said, not hidden
        return "ok", (
            f"{rate}; test accuracy {row['test_accuracy']:.3f} is chance (at most {row['chance_accuracy']:.3f} "
            f"for a network that learned nothing): it did not learn at lr {s.lr:g} and batch size {batch_size}, so "
            "its timing stands and its accuracy says nothing; lower training.lr or raise the batch size"
        )
    return "ok", rate


def went_wrong(initial_loss: float, final_loss: float, accuracy: float, chance: float) -> str | None:
    """Why a run's training went wrong (its status is then `diverged`), or None: a loss that is not
    finite, that blew up, or that rose while the test accuracy stayed at chance."""
    if not math.isfinite(final_loss):
        return f"training loss is {final_loss}; lower training.lr"
    if final_loss > BLOWUP * initial_loss:
        return f"training loss rose from {initial_loss:.3g} to {final_loss:.3g}; lower training.lr"
    if accuracy <= chance and final_loss > ROSE * initial_loss:
        return (
            f"test accuracy {accuracy:.3f} is chance and the loss rose from {initial_loss:.3g} to {final_loss:.3g}; "
            "lower training.lr"
        )
    return None


def _attempt(cfg, data, test, device, s, mode, batch_size, k, repeat, warmup, log) -> dict:
    """One timed training run from the repeat's initial weights: the row's timing fields, the
    evidence of what else ran, and the verdict."""
    n = len(data["x"])
    home = data["x"].device
    trainer = runner.build(cfg, s, mode, device, batch_size, repeat, k)
    out = dict(status="ok", message="")

    def order(epoch):
        g = torch.Generator().manual_seed(runner.seed_of(cfg, repeat, epoch))
        return torch.randperm(n, generator=g).to(home)

    # One-off costs (compile, graph capture, build) on a batch of the first epoch, timed apart.
    out["setup_s"] = runner.setup(trainer, next(iter(trainer.epoch(data, order(1)))), device)
    out["steps_per_call"] = trainer.steps_per_call  # a mode may choose it in setup, by measuring
    if getattr(trainer, "choice", None):
        log(f"{mode} chose its path in setup: {trainer.choice}")
    if trainer.steps_per_call > 1:
        log(f"{mode} does up to {trainer.steps_per_call} training steps per call; each step's time is the call's share")

    clock = timing.StepClock(device)
    clock.reserve(n // batch_size + 1)
    monitor = quality.Monitor(device, torch.get_num_threads())
    steps_per_epoch = n // batch_size
    step_times, epoch_times, epochs, cum, time_to_target = [], [], [], 0.0, None
    learned = None  # the weights after the configured epochs: the run's learning is judged on them
    load_start, start = quality.load_average(), datetime.now(UTC)
    try:
        for epoch in range(1, cfg["epochs"] + 1):
            batches = trainer.epoch(data, order(epoch))  # reordering happens here, before the clock
            monitor.start()
            epoch_s, intervals = timing.timed_epoch(trainer.step, batches, clock)
            # Outside the timed region: what else ran, evaluation and progress.
            timed = max(0, len(intervals) - max(0, warmup - len(step_times)))
            evidence = monitor.stop(timed)
            step_times += intervals
            epoch_times.append(epoch_s)
            cum += epoch_s
            test_loss, acc = nets.evaluate(s, trainer.params(), *test, k)
            epochs.append(dict(epoch=epoch, train_s=epoch_s, cum_train_s=cum, test_loss=test_loss, test_accuracy=acc))
            other = evidence["other_cores"]
            log(
                f"epoch {epoch}/{cfg['epochs']}: {epoch_s:.3f} s, {steps_per_epoch / epoch_s:.1f} steps/s, "
                f"test loss {test_loss:.4f}, test accuracy {acc:.4f}"
                + ("" if other is None or epoch_s < quality.MIN_WINDOW_S else f", other processes {other:.2f} cores")
            )
            if time_to_target is None and acc >= cfg["target_accuracy"]:
                time_to_target = cum
            if not math.isfinite(test_loss):
                out.update(status="diverged", message=f"loss became {test_loss} in epoch {epoch}; lower training.lr")
                out.update(first_epoch_s=epoch_times[0], total_train_s=cum, test_loss=test_loss)
                break
        else:
            learned = _weights(trainer)
            cum = _extra_epochs(cfg, trainer, data, order, clock, monitor, step_times, epoch_times, cum, log)
            last_loss, _ = nets.evaluate(s, trainer.params(), *test, k)
            if not math.isfinite(last_loss):
                out.update(
                    status="diverged",
                    message=f"loss became {last_loss} in the extra timing epochs; lower training.lr or min_timed_s",
                    first_epoch_s=epoch_times[0],
                    total_train_s=cum,
                    test_loss=last_loss,
                )
        timed_epochs = len(epoch_times)
    finally:
        monitor.close()
    end = datetime.now(UTC)
    # The trained weights, not the mode: a kept attempt must not hold a mode's buffers, graphs or
    # compiled code while the next attempt builds its own.
    out["params"] = learned if learned is not None else _weights(trainer)
    del trainer
    timed_steps = step_times[warmup:]
    # The step time is taken over the steps the machine left alone (slowed.undisturbed; every
    # step with `slowed_rule: false`); the record keeps every step, slowed_share says how many were
    # left out, and step_time_all_steps_s is the median over all of them, beside it.
    kept_blocks, slowed_share = slowed.kept_blocks(timed_steps, rule=cfg.get("slowed_rule", True))
    kept = slowed.steps_of(kept_blocks)
    med, q1, q3 = timing.quantiles(kept)
    spread = quality.spread(kept)
    verdict, note, score = quality.verdict(monitor.epochs, len(timed_steps), spread, cfg)
    if cum < cfg["min_timed_s"] and timed_epochs >= MAX_EPOCHS and out["status"] == "ok":
        note = "; ".join(
            filter(None, [note, f"timed only {cum:.3g} s in {timed_epochs} epochs, under min_timed_s (the cap)"])
        )
    measured = quality.windows(monitor.epochs)
    wall = sum(e["wall_s"] for e in monitor.epochs) or math.nan
    gpu = sorted({p for e in monitor.epochs for p in (e["gpu_others"] or [])})
    out.update(
        quality=verdict,
        quality_note=note,
        score=score + (0 if out["status"] == "ok" else math.inf),
        evidence=monitor.epochs,
        step_times_s=step_times,
        epochs=epochs,
        other_cores=sum(w["other_cores"] * w["wall_s"] for w in measured) / wall if measured else "",
        own_cpu_share=sum(e["own_cpu_s"] for e in monitor.epochs) / (wall * torch.get_num_threads()),
        gpu_others=" ".join(map(str, gpu)),
        load_avg_start=load_start,
        load_avg_end=quality.load_average(),
        start_utc=start.isoformat(timespec="milliseconds"),
        end_utc=end.isoformat(timespec="milliseconds"),
        step_spread=spread,
        slowed_share=slowed_share,
        steps=len(step_times),
        timed_steps=len(timed_steps),
        timed_epochs=timed_epochs,
    )
    if out["status"] != "ok":
        return out
    steady = epoch_times[1:]
    out.update(
        step_time_median_s=med,
        step_time_all_steps_s=timing.quantiles(timed_steps)[0],
        step_time_q1_s=q1,
        step_time_q3_s=q3,
        samples_per_s=batch_size / med,
        first_epoch_s=epoch_times[0],
        steady_epoch_s=timing.quantiles(steady)[0] if steady else "",
        total_train_s=cum,
        step_time_blocks_s=slowed.blocks_cell(kept_blocks),
        step_time_all_blocks_s=slowed.blocks_cell(slowed.split(timed_steps)),
        test_loss=test_loss,
        test_accuracy=acc,
        time_to_target_s="" if time_to_target is None else time_to_target,
    )
    return out


def _extra_epochs(cfg, trainer, data, order, clock, monitor, step_times, epoch_times, cum, log) -> float:
    """Past the configured epochs, more epochs of the same data are timed (training goes on) until
    the timed steps add up to min_timed_s, so that every run's interference check and interval
    rest on enough time; the learning figures stay those of the configured epochs. They are timed
    in blocks of several passes each, with the batches of the last configured epoch reused (no
    reordering and no monitor stop between passes: for a fast mode that overhead would outweigh
    the steps); `dataloader` fetches its batches anew in every pass, as its step includes that.
    Returns the timed seconds so far."""
    configured = len(epoch_times)
    while cum < cfg["min_timed_s"] and len(epoch_times) < MAX_EPOCHS:
        per_pass = cum / len(epoch_times)
        k = min(MAX_EPOCHS - len(epoch_times), max(1, math.ceil(1.2 * (cfg["min_timed_s"] - cum) / per_pass)))
        if trainer.host_data:
            passes = [trainer.epoch(data, order(len(epoch_times) + i + 1)) for i in range(k)]
        else:
            passes = [list(trainer.epoch(data, order(configured)))] * k
        clock.reserve((len(data["x"]) // trainer.batch_size + 1) * k + 1)  # cuda events, made before the clock
        monitor.start()
        block_s, intervals = timing.timed_epoch(trainer.step, itertools.chain.from_iterable(passes), clock)
        monitor.stop(len(intervals))
        step_times += intervals
        epoch_times += [block_s / k] * k
        cum += block_s
    if len(epoch_times) > configured:
        log(
            f"timed {len(epoch_times) - configured} more epoch(s) of the same data to reach min_timed_s = "
            f"{cfg['min_timed_s']} s: {cum:.3f} s timed in {len(epoch_times)} epochs"
        )
    return cum


def _weights(trainer) -> dict:
    return {k: torch.as_tensor(v).detach().clone() for k, v in trainer.params().items()}


def options(p: argparse.ArgumentParser) -> None:
    """One option per config key a run depends on (the schema's x-run keys), its type, default,
    choices and help from the schema: `training.lr` is --training-lr."""
    parse = {"integer": int, "number": float, "string": str, "boolean": lambda v: v.lower() in ("1", "true", "yes")}
    for key, _, sub in schema.walk():
        if key in schema.run_keys():
            p.add_argument(
                "--" + key.replace(".", "-").replace("_", "-"),
                dest=key,
                type=parse[sub["type"]],
                default=schema.get(DEFAULTS, key),
                choices=sub.get("enum"),
                help=" ".join(str(sub.get("description", "")).split()) or None,
            )


def main(argv=None):
    p = argparse.ArgumentParser(description="Train and time one combination of the MNIST benchmark.")
    p.add_argument("--data", required=True, help="tensor file written by the preload step")
    p.add_argument("--device", default="cpu")
    p.add_argument("--network", default=DEFAULTS["models"][0], help="a `models` entry: mlp-16-16, or file.py:Class")
    p.add_argument("--mode", default="module", choices=list(MODES))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeat", type=int, default=0)
    p.add_argument("--models-at-once", type=int, default=1, help="K: copies of the network trained together")
    p.add_argument("--out", default="run.csv")
    options(p)
    a = vars(p.parse_args(argv))
    cfg = copy.deepcopy(DEFAULTS)
    for key in schema.run_keys():
        *parents, leaf = key.split(".")
        node = cfg
        for part in parents:
            node = node[part]
        node[leaf] = a[key]
    try:
        row, record = train(
            cfg, a["data"], a["device"], a["network"], a["mode"], a["batch_size"], a["repeat"], a["models_at_once"]
        )
    except BenchError as e:
        sys.exit(f"error: {e}")
    records.write_outputs(row, record, a["out"], Path(a["out"]).with_suffix(".json"))
    rate = row["samples_per_s"] and round(row["samples_per_s"])
    print(f"{row['status']}: {rate} samples/s, timing {row['quality'] or 'n/a'} -> {a['out']}")


if __name__ == "__main__":
    main()
