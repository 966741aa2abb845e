"""The whole pipeline, run by the real snakemake on the tiny data set served over loopback."""

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import REPO, job_stats, snakemake, tiny_config, with_data
from mnistbench.config import devices, networks
from mnistbench.config.catalog import MODES
from mnistbench.data import download
from mnistbench.report import numbers
from mnistbench.train import trainer
from mnistbench.train.needs import exists

RUN_COLUMNS = (
    "host device device_name model mode batch_size repeat status message epochs train_samples steps "
    "step_time_median_s samples_per_s first_epoch_s steady_epoch_s total_train_s final_loss "
    "test_accuracy threads torch_version time_to_target_s setup_s step_time_all_steps_s dropped_samples"
).split()
ALL_MODES = list(MODES)
SEED = networks.build(trainer.DEFAULTS, "mlp-16-16")  # the default network: the only one of this grid


@pytest.fixture(scope="module")
def run(mirror, mnist_data, tmp_path_factory):
    url, md5 = mirror
    wd = with_data(mnist_data, tmp_path_factory.mktemp("pipeline"))  # downloaded and preloaded once per session
    # Two repeats, so medians, IQRs and the agreement of repeats are of more than one value.
    cfg = tiny_config(url, md5, modes=ALL_MODES, repeats=2)
    proc = snakemake(wd, cfg)
    report = snakemake(wd, cfg, "--report", "results/report.html")
    return wd, cfg, proc, report


def test_runs_csv_has_every_run_and_column(run):
    wd, cfg, _, _ = run
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    assert set(RUN_COLUMNS) <= set(runs.columns)
    here = devices.available()
    expected = {(d, m, b) for d in here for m in ALL_MODES if exists(m, d, SEED) for b in cfg["batch_sizes"]}
    assert set(zip(runs.device, runs["mode"], runs.batch_size)) == expected
    assert (
        set(runs.model) == {"mlp-16-16"}
        and (runs.flop_per_sample == 52_672).all()
        and (runs.parameters == 13_002).all()
    )
    assert len(runs) == len(expected) * cfg["repeats"]
    # What sparse skips: the share of the training inputs off the background value, its runs only.
    sparse = runs["mode"] == "sparse"
    assert runs[sparse].input_nonzero_share.between(0, 1).all() and runs[~sparse].input_nonzero_share.isna().all()


def test_every_cpu_mode_is_ok_and_learns(run):
    wd, cfg, _, _ = run
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    cpu = runs[runs.device == "cpu"]
    assert set(cpu["mode"]) == {m for m in ALL_MODES if exists(m, "cpu", SEED)}
    bad = cpu[cpu.status != "ok"]
    assert bad.empty, bad[["mode", "batch_size", "status", "message"]].to_string()
    assert (cpu.samples_per_s > 0).all() and (cpu.step_time_median_s > 0).all()
    # The share of timed steps the machine slowed is counted for every run, and summed up in words.
    assert cpu.slowed_share.between(0, 1, inclusive="left").all(), cpu.slowed_share
    summary = (wd / "results/summary.md").read_text()
    assert f"slowed {numbers.pct(runs[runs.status == 'ok'].slowed_share.median())} of a run's" in summary
    # Beside every step time, the median over all its timed steps (the same where no step was left
    # out), and the sentence that says where the two differ.
    assert (cpu.step_time_all_steps_s > 0).all()
    assert (cpu.step_time_median_s == cpu.step_time_all_steps_s)[cpu.slowed_share == 0].all()
    assert "the median over all timed steps (step_time_all_steps_s)" in summary
    assert (cpu.dropped_samples == cfg["train_samples"] % cpu.batch_size).all()
    # cpu_threads 0: a job holds every core Snakemake gives it (--cores 2) and gives torch all but one.
    assert (cpu.threads == max(1, min(os.cpu_count(), 2) - 1)).all(), cpu.threads
    # 2 epochs of 512 samples at batch 8 already lift accuracy far above chance (0.1).
    assert (cpu[cpu.batch_size == 8].test_accuracy > 0.4).all()


def test_exact_modes_train_the_same_function(run):
    """Same repeat => same initial weights and data order, whatever the mode: on cpu every exact
    mode ends with the same loss to within float32 round-off."""
    wd, _, _, _ = run
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    cpu = runs[(runs.device == "cpu") & runs["mode"].map(lambda m: MODES[m].exact)]
    for _, group in cpu.groupby(["batch_size", "repeat"]):
        spread = group.final_loss.max() - group.final_loss.min()
        assert spread < 1e-4 * group.final_loss.abs().max() + 1e-6, group[["mode", "final_loss"]]


def test_left_out_pairs_are_listed_not_failed(run):
    wd, _, _, _ = run
    left = pd.read_csv(wd / "results/summary/left_out.csv")
    here = devices.available()
    expected = {(d, m) for d in here for m in ALL_MODES if not exists(m, d, SEED)}
    assert set(zip(left.device, left["mode"])) == expected and set(left.model) <= {"mlp-16-16"}
    if "cuda" not in here:
        assert ("cpu", "cudagraph") in expected
    assert left.reason.str.len().gt(0).all()


def test_summary_medians_iqrs_and_agreement_of_the_repeats(run):
    """Every summary row is its runs' median and IQR of samples/s over both repeats, and says
    whether their median step times agree within quality.repeat_spread."""
    wd, cfg, _, _ = run
    summary = pd.read_csv(wd / "results/summary/summary.csv")
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    ok = runs[runs.status == "ok"]
    keys = ["host", "device", "model", "mode", "batch_size"]
    assert len(summary) == len(runs.groupby(keys))
    spread_limit = trainer.DEFAULTS["quality"]["repeat_spread"]  # the config leaves it at its default
    agree = {True: 0, False: 0}
    for _, row in summary.iterrows():
        match = ok[(ok["mode"] == row["mode"]) & (ok.batch_size == row.batch_size) & (ok.device == row.device)]
        assert row.n_runs == cfg["repeats"] and row.n_ok == len(match)
        if row.n_ok < 2:
            continue
        rates = match.samples_per_s
        assert row.samples_per_s_median == pytest.approx(row.batch_size / match.step_time_median_s.median())
        assert rates.min() <= row.samples_per_s_median <= rates.max()
        assert row.samples_per_s_iqr == pytest.approx(rates.quantile(0.75) - rates.quantile(0.25))
        assert row.samples_per_s_iqr > 0  # two processes never time to the same float
        spread = match.step_time_median_s.max() / match.step_time_median_s.min()
        assert row.repeat_spread == pytest.approx(spread)
        assert str(row.repeats_agree) == str(spread <= spread_limit), row
        agree[spread <= spread_limit] += 1
    assert sum(agree.values()) >= len(summary) // 2, "most combinations must have two usable repeats"


def test_transfer_measured_for_every_device(run):
    wd, _, _, _ = run
    t = pd.read_csv(wd / "results/preload/transfer.csv")
    assert set(t.device) == set(devices.available())
    assert (t.gb_per_s > 0).all() and (t.bytes == t.samples * 784 * 4).all()


def test_train_logs_show_per_epoch_progress(run):
    wd, cfg, _, _ = run
    log = (wd / "logs/train/cpu/mlp-16-16/module/bs8_r0.log").read_text()
    assert "epoch 1/2" in log and "epoch 2/2" in log and "test accuracy" in log


def test_figure_and_report(run):
    wd, _, _, report = run
    png = wd / "results/figures/throughput.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (wd / "results/report.html").read_text(errors="replace")
    assert "throughput.png" in html and len(html) > 10000


def test_dry_run_plans_every_rule_once_per_job_it_needs(mirror, tmp_path):
    """Snakemake's own job counts: the data once, one train job per device x mode x batch size x
    repeat that can exist, one profile job per device, and one of each summary step."""
    url, md5 = mirror
    cfg = tiny_config(url, md5, repeats=2)
    planned = job_stats(snakemake(tmp_path, cfg, "-n"))
    here = devices.available()
    pairs = [(d, m) for d in here for m in cfg["modes"] if exists(m, d, SEED)]
    assert planned == {
        "download_mnist": 1,
        "preload": 1,
        "train": len(pairs) * len(cfg["batch_sizes"]) * cfg["repeats"],
        "profile": len(here),
        "aggregate": 1,
        "analyse": 1,
        "figures": 1,
        "all": 1,
    }


def test_planning_a_run_imports_no_torch(tmp_path):
    """Snakemake reads the registries (modes, device kinds, figures) and what a run depends on
    without torch or matplotlib, whose imports would cost seconds in every invocation; `devices:
    auto` asks torch only where a GPU driver could be. Python's own import log of a dry run shows
    every module."""
    cfg = tiny_config("http://127.0.0.1:9/", {f: "0" * 32 for f in download.FILES})  # planned, never fetched
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-X", "importtime", "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    cmd += ["--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "--cores", "1", "-n"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert proc.returncode == 0, proc.stdout[-3000:] + "\n".join(x for x in proc.stderr.splitlines() if x not in log)
    imported = [line.rsplit("|", 1)[1].strip() for line in log]
    assert "mnistbench.config.catalog" in imported and "snakemake.workflow" in imported, (
        "no import log: nothing checked"
    )
    for heavy in ("torch", "matplotlib", "seaborn"):
        assert not [m for m in imported if m.split(".")[0] == heavy], f"the plan imported {heavy}"
    assert job_stats(proc)["train"] == len(cfg["modes"]) * len(cfg["batch_sizes"])


@pytest.mark.slow  # Snakemake's command line in a process of its own
def test_a_dry_run_writes_nothing_but_snakemakes_own_records(tmp_path):
    """Planning only plans: a dry run of the default config builds no kernel (in a fresh TMPDIR,
    where none lies) and writes nothing there or under results/; only .snakemake/ (Snakemake's
    own) may appear in the working directory."""
    tmp, wd = tmp_path / "tmp", tmp_path / "wd"
    tmp.mkdir()
    wd.mkdir()
    cmd = [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(wd)]
    cmd += ["--configfile", str(REPO / "config/config.yaml"), "--cores", "2"]
    proc = subprocess.run(
        cmd, cwd=wd, env=dict(os.environ, TMPDIR=str(tmp)), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train" in job_stats(proc)  # it planned the grid
    assert list(tmp.iterdir()) == [] and sorted(p.name for p in wd.iterdir()) == [".snakemake"]
