"""Benchmarks are not tests: this only checks that each bench script runs, on a tiny size, and
prints its ratio last."""

import re
import subprocess
import sys

import pytest
from conftest import REPO
from mnistbench.config import catalog

pytestmark = pytest.mark.slow  # each starts Python and torch, some a whole pipeline

TINY = {
    "denormals.py": ["--samples", "256", "--rounds", "2", "--batches", "1", "16"],
    "host_drift.py": ["--minutes", "0.02", "--window", "0.2"],
    "harness_check.py": ["--batch-sizes", "1", "64", "--samples", "512", "--min-run-time", "0.05", "--rounds", "2"],
    "process_noise.py": [
        "--processes",
        "2",
        "--min-time",
        "0.02",
        "--steps",
        "manual:1",
        "--settings",
        "baseline",
        "malloc",
    ],
    "kernel_paths.py": [
        "--samples",
        "512",
        "--min-time",
        "0.01",
        "--seed-batches",
        "1",
        "16",
        "--widths",
        "16",
        "40",
        "--batches",
        "1",
        "16",
    ],
    "l1_bound.py": ["--sizes-kb", "4", "50", "--rounds", "2", "--passes", "20"],
    "many_models.py": ["--samples", "64", "--min-time", "0.02", "--models", "1", "4", "--modes", "manual", "numpy"],
    "sparse_limit.py": ["--samples", "512", "--min-time", "0.01", "--rounds", "3", "--batches", "1", "16", "256"],
    "speed_bs1.py": ["--samples", "64", "--min-time", "0.02", "--modes", "seed", "manual", "numpy"],
    "roofline.py": [
        "--batch-size",
        "256",
        "--batches",
        "2",
        "--matmul",
        "256",
        "--min-time",
        "0.05",
        "--modes",
        "module",
        "manual",
    ],
}


@pytest.mark.parametrize("script", sorted(TINY))
def test_bench_script_runs_and_prints_its_ratio(script):
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *TINY[script]],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert "ratio" in last or "x (target" in last or "of roofline" in last, last


def end_to_end(script: str, *args) -> str:
    """Run a bench script that drives whole pipelines; its stdout, after checking it succeeded."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args], capture_output=True, text=True, timeout=900, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_gpu_check_runs_end_to_end_on_cpu(tmp_path):
    out = end_to_end("gpu_check.py", "--quick", "--devices", "[cpu]", "--workdir", str(tmp_path))
    assert "samples/s (median over repeats)" in out and "manual" in out


def test_noise_check_runs_end_to_end(tmp_path):
    out = end_to_end("noise_check.py", "--quick", "--hog-s", "1", "--workdir", str(tmp_path))
    last = out.strip().splitlines()[-1]
    assert "overlapped runs flagged or retimed" in last and "quiet grid flagged" in last, last


def test_calibration_runs_two_pipelines_and_prints_the_shares(tmp_path):
    out = end_to_end("calibration.py", "--quick", "--workdir", str(tmp_path))
    assert "run1 headline:" in out and "run2 headline:" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("calibration: run2/run1 intervals containing 1: medians ") and "relative width" in last, last


def test_slowed_rule_prints_every_combinations_ratio(cpu_pipeline):
    """On the shared tiny pipeline (every timing verdict usable, as its config says)."""
    _, wd, cfg, _ = cpu_pipeline
    out = end_to_end("slowed_rule.py", str(wd / "results"), "--use", *cfg["quality"]["use"])
    n = len(cfg["modes"]) * len(cfg["batch_sizes"])
    rows = [ln for ln in out.splitlines() if " cpu " in ln and "mlp-16-16" in ln]
    assert len(rows) == n and all("(" in r or "no interval" in r for r in rows), out
    last = out.strip().splitlines()[-1]
    assert last.startswith("slowed rule: kept/all ratio ") and f"over {n} combinations" in last, last


def test_fifty_machines_relabels_a_finished_run_and_prints_sizes_and_the_headline(cpu_pipeline):
    """bench/fifty_machines.py on the shared finished run as 12 machines (a tiny size: it proves
    the script works, not how fast the steps are): the three steps' times, every registered
    figure within 3000 px, a headline across machines of at most ten bullets, the total last."""
    results = cpu_pipeline[1] / "results"
    out = end_to_end("fifty_machines.py", str(results), "--machines", "12")
    lines = out.strip().splitlines()
    assert lines[0].startswith("12 machines, ")
    for step in ("aggregate", "analyse", "figures"):
        assert any(line.startswith(f"{step}: ") for line in lines), out
    sizes = dict(re.findall(r"^figure (\w+): (\d+ x \d+) px", out, re.M))
    assert set(sizes) == set(catalog.FIGURES), out
    assert all(max(map(int, s.split(" x "))) <= 3000 for s in sizes.values()), sizes
    bullets = int(re.search(r"^summary.md: \d+ kB, (\d+) headline bullets", out, re.M).group(1))
    assert 1 < bullets <= 10 and "12 machines (cpu: 12)" in out
    assert "x (target <= 60 s, <= 3000 px)" in lines[-1]
