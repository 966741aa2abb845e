"""Each mode runs without Snakemake, from the command line, on any machine with torch, pyyaml and
psutil."""

import csv
import os
import subprocess
import sys

import pytest
from conftest import REPO
from mnistbench.data import download, preload, synthetic


@pytest.mark.slow  # two Python processes that import torch
def test_train_cli_runs_one_combination(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=128, n_test=32)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
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
        # Timed as briefly as possible and never retimed: a retime first waits for a busy machine
        # (the suite's other processes) to settle, and the CLI's options are what is tested here.
        "--min-timed-s",
        "0",
        "--retime",
        "0",
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


def validated(cfg: dict) -> dict:
    """`cfg` with every default filled in by Snakemake's validation against the schema."""
    from snakemake.utils import validate

    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))
    return cfg


def test_cli_defaults_are_the_workflow_defaults():
    from mnistbench.train import trainer

    assert trainer.DEFAULTS == validated({})


def test_config_yaml_is_the_schema_defaults():
    """config/config.yaml spells out the default run: every key, each at the schema's default."""
    import yaml

    written = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert written == validated({})
