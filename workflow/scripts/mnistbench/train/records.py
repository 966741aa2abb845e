"""The outputs of a train run (one CSV row and one JSON record, and the row's columns and types)
and the columns of a profile job's table.

Standard library only, so a Snakemake job can write them without importing torch (a warm worker
trains and profiles; the job only writes what it returns).
"""

from itertools import groupby

from mnistbench import files

# The columns of a row (and of runs.csv), in groups. host: where it ran; machine: the hardware
# it had (env.machine), which the summary pools by; model: the network trained (a `models` entry);
# models_at_once: K, the copies of it trained together (samples_per_s is each copy's rate: K times
# as many model-samples per second were trained).
WHAT = ["host", "machine", "device", "device_name", "model", "mode", "batch_size", "models_at_once", "repeat"]
# The network's size: FLOP per training sample (its arithmetic limit is that at the machine's
# measured FMA rate), parameters, and a user's module file's sha256 (empty for the family).
NETWORK = ["flop_per_sample", "parameters", "model_digest", "input_nonzero_share"]
# status: ok, diverged, oom, unsupported, bad_model (a user's module that cannot be trained),
# error; quality: the timing's verdict (ok, noisy, few_steps); each with its reason. attempts =
# timings made (retimes + 1).
OUTCOME = ["status", "message", "quality", "quality_note", "attempts"]
# timed_epochs: the configured epochs and any more timed to reach min_timed_s; dropped_samples:
# the train_samples after an epoch's last whole batch, which no step trains.
SIZES = [
    "epochs",
    "timed_epochs",
    "train_samples",
    "dropped_samples",
    "steps",
    "warmup_steps",
    "timed_steps",
    "steps_per_call",
]
# The steady-state step time over the timed steps the machine did not slow (slowed_share: the
# share of timed steps left out, slowed.undisturbed), the median over all timed steps beside
# it (step_time_all_steps_s: what the step time would be without that rule), and one-off and
# whole-epoch times.
TIMING = [
    "step_time_median_s",
    "step_time_all_steps_s",
    "step_time_q1_s",
    "step_time_q3_s",
    "step_spread",
    "slowed_share",
    "samples_per_s",
    "setup_s",
    "first_epoch_s",
    "steady_epoch_s",
    "total_train_s",
]
# The medians of the contiguous blocks of timed steps that the step time was taken over (the
# undisturbed ones), space-separated: what the bootstrap (uncertainty.py) resamples within a
# run, carried in runs.csv so merged machines get intervals too.
# step_time_all_blocks_s: the same of all timed steps' blocks, for step_time_all_steps_s.
BLOCKS = ["step_time_blocks_s", "step_time_all_blocks_s"]
# chance_accuracy: the highest test accuracy of a network that learned nothing (the test set's
# most common class's share plus 3.29 standard errors: one in a thousand above it by luck); a
# run at or below it did not learn, whatever its timing.
LEARNING = ["initial_loss", "final_loss", "test_loss", "test_accuracy", "chance_accuracy", "time_to_target_s"]
# What else the machine did while the kept timing ran.
MACHINE = ["other_cores", "own_cpu_share", "gpu_others", "load_avg_start", "load_avg_end", "start_utc", "end_utc"]
# The settings and code that produced it.
PROVENANCE = ["loss", "init", "lr", "seed", "threads", "torch_version", "settings", "code"]
# Columns a runs.csv of an earlier version lacks: read as empty (dropped_samples as computed from
# its sizes), so that such a file still merges and the reference machines still show.
ADDED = ["dropped_samples", "step_time_all_steps_s", "step_time_all_blocks_s", "input_nonzero_share", "chance_accuracy"]
ADDED += ["models_at_once"]  # read as 1: every earlier run trained one model
COLUMNS = WHAT + NETWORK + OUTCOME + SIZES + TIMING + BLOCKS + LEARNING + MACHINE + PROVENANCE
# Columns that hold numbers (another machine's runs.csv is checked against them).
INTEGER = [
    "batch_size",
    "models_at_once",
    "repeat",
    "flop_per_sample",
    "parameters",
    "attempts",
    *(c for c in SIZES if c != "steps_per_call"),
]
NUMBER = TIMING + LEARNING + ["other_cores", "own_cpu_share", "lr", "threads", "input_nonzero_share"]

# A profile job's rows (profiling.py): the phases a step is split into, each in µs per step.
PHASES = ["transfer", "forward", "backward", "fwd_bwd", "optimizer", "whole", "wait"]
PROFILE_COLUMNS = (
    ["host", "machine", "device", "device_name", "model", "mode", "batch_size", "status", "message", "split", "steps"]
    + ["step_us_plain", "step_us_profiled"]
    + [f"{p}_us" for p in PHASES]
    + ["ops_step", "ops_batch", "aten_calls", "launches", "kernels", "threads", "torch_version"]
)


def write_outputs(row, record, csv_path, json_path=None) -> None:
    """A train run's row and record, each written atomically (record first: the row is the
    Snakemake output whose presence says the run finished)."""
    if json_path:
        files.write_json(json_path, record)
    files.write_rows(csv_path, COLUMNS, [row])


def run_lengths(values) -> list[list]:
    """[[value, count], ...] of consecutive equal values: how a record keeps a run's step times
    (`step_times_rle`). A mode that does several training steps per call shares the call's time
    among them (timing.StepClock), so its step times come in runs: at batch 1 the kernel's 2.5
    million step times are 10 000 calls, and a record listing every step was 70 MB, seconds to
    send, read and write after the run."""
    return [[v, sum(1 for _ in g)] for v, g in groupby(values)]


def step_times(record: dict) -> list[float]:
    """A record's step times, one per training step in order (warm-up first)."""
    return [v for v, n in record["step_times_rle"] for _ in range(n)]
