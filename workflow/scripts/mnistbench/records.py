"""The outputs of a train run: one CSV row and one JSON record, written atomically.

Standard library only, so a Snakemake job can write them without importing torch.
"""

import csv
import json
import os
from pathlib import Path

COLUMNS = [
    "host", "device", "device_name", "mode", "batch_size", "repeat", "status", "message",
    "epochs", "train_samples", "steps", "warmup_steps", "timed_steps",
    "step_time_median_s", "step_time_q1_s", "step_time_q3_s", "samples_per_s",
    "setup_s", "first_epoch_s", "steady_epoch_s", "total_train_s",
    "final_loss", "test_loss", "test_accuracy", "time_to_target_s",
    "loss", "init", "lr", "seed", "threads", "torch_version",
]  # fmt: skip


def write_rows(path, columns, rows) -> None:
    """A CSV file written to a temporary name, then renamed: an interrupted job leaves no
    half-written output."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def write_outputs(row, record, csv_path, json_path=None):
    """A train run's row and record, each written to a temporary file, then renamed."""
    if json_path:
        jtmp = Path(str(json_path) + ".tmp")
        jtmp.write_text(json.dumps(record, default=str))
        os.replace(jtmp, json_path)
    write_rows(csv_path, COLUMNS, [row])
