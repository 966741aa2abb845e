"""Each mode runs without Snakemake, from the command line, on any machine with torch."""

import csv
import os
import subprocess
import sys

from conftest import REPO
from mnistbench import data, synthetic


def test_train_cli_runs_one_combination(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=128, n_test=32)
    data.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    data.save_tensors(data.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    env = dict(os.environ, PYTHONPATH=str(REPO / "workflow" / "scripts"))
    cmd = [
        sys.executable,
        "-m",
        "mnistbench.train",
        "--data",
        str(tmp_path / "t.pt"),
        "--mode",
        "numpy",
        "--batch-size",
        "16",
        "--train-samples",
        "128",
        "--test-samples",
        "32",
        "--out",
        str(tmp_path / "r.csv"),
    ]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = csv.DictReader(open(tmp_path / "r.csv"))
    assert row["status"] == "ok" and row["mode"] == "numpy" and float(row["samples_per_s"]) > 0
    assert (tmp_path / "r.json").exists()
    bad = subprocess.run(
        cmd[:-2] + ["--device", "cuda:7", "--out", str(tmp_path / "x.csv")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and bad.stderr.strip().startswith("error:") and "cuda:7" in bad.stderr
    assert not (tmp_path / "x.csv").exists()


def test_cli_defaults_are_the_workflow_defaults():
    from mnistbench import train
    from snakemake.utils import validate

    cfg = {}
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))  # fills every default
    for key, value in train.DEFAULTS.items():
        if key == "model":
            assert value == cfg["model"], "train.DEFAULTS['model'] drifted from the schema"
        else:
            assert value == cfg[key], f"train.DEFAULTS[{key!r}] drifted from the schema"
