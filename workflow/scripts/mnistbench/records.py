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


def write_outputs(row, record, csv_path, json_path=None):
    """Write to temporary files, then rename: an interrupted job leaves no half-written output."""
    csv_path = Path(csv_path)
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow(row)
    if json_path:
        jtmp = Path(str(json_path) + ".tmp")
        jtmp.write_text(json.dumps(record, default=str))
        os.replace(jtmp, json_path)
    os.replace(tmp, csv_path)
