"""The why: fits, crossovers, speedups and the DataLoader's share on synthetic timings made from
known numbers; degenerate inputs; merging machines; the profiler's split of a step; and the
pipeline's report, regenerated without retraining."""

import itertools
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO, as_another_machine, edited, jobs, own_workdir, snakemake
from mnistbench.collect import aggregate
from mnistbench.config import depends, networks
from mnistbench.report import copies, figures, summary, words
from mnistbench.report import tables as tbl
from mnistbench.train import profiling, records

GRID = [1, 4, 16, 64, 256, 1024, 4096]  # a batch-size step is a factor of 4
CFG = dict(
    devices="auto",
    modes=["manual", "module"],
    batch_sizes=GRID,
    repeats=3,
    train_samples=8192,
    epochs=2,
    target_accuracy=0.9,
)


def synthetic_runs(
    truth: dict, sizes=GRID, repeats=3, noise=0.02, seed=0, host="h1", models_at_once=(1,)
) -> pd.DataFrame:
    """One row per run, step time = (a + b·B·K)·lognormal noise for K models at once; truth =
    {(device, mode): (a_us, b_us)}, or {(device, mode, network): ...} for another network than the
    seed's."""
    rng = np.random.default_rng(seed)
    rows = []
    for key, (a, b) in truth.items():
        device, mode, network = (*key, "mlp-16-16")[:3]
        flop = networks.network(network).flop_per_sample()
        for bs, k, r in itertools.product(sizes, models_at_once, range(repeats)):
            t = (a + b * bs * k) * 1e-6 * math.exp(rng.normal(0, noise))
            rows.append(
                dict(
                    host=host,
                    # each host its own hardware (machines.py's format)
                    machine=f"{host} cpu, 4 threads; "
                    + (f"{device.upper()}, 16 GiB; " if device != "cpu" else "")
                    + "torch 2",
                    device=device,
                    device_name=device.upper(),
                    model=network,
                    flop_per_sample=flop,
                    mode=mode,
                    batch_size=bs,
                    models_at_once=k,
                    repeat=r,
                    status="ok",
                    quality="ok",
                    step_time_median_s=t,
                    samples_per_s=bs / t,
                    test_accuracy=0.5,
                    time_to_target_s="",
                    final_loss=1.0,
                )
            )
    return pd.DataFrame(rows)


def transfer_table(host="h1", cuda=True) -> pd.DataFrame:
    rows = []
    targets = [("cpu", "pageable", 2e-6, 20e9)] + (
        [("cuda", "pageable", 10e-6, 6e9), ("cuda", "pinned", 8e-6, 24e9)] if cuda else []
    )
    for device, memory, lat, bw in targets:
        for n in (1, 64, 4096, 60000):
            nbytes = n * 3136
            s = lat + nbytes / bw
            rows.append(
                dict(
                    host=host,
                    device=device,
                    memory=memory,
                    samples=n,
                    bytes=nbytes,
                    seconds=s,
                    gb_per_s=nbytes / s / 1e9,
                )
            )
    return pd.DataFrame(rows)


def findings(found, place) -> list[str]:
    """The sentences of a place's findings (summary.md's section of the place)."""
    return words.sentences(next(p for p in found["places"] if p["name"] == place)["findings"])


def notes(found) -> list[str]:
    return words.sentences(found["notes"])


def analyse(runs, transfer=None, prof=None, gflops=None):
    """The analysis of synthetic runs; `gflops`: the measured peak rate of h1's cpu cores."""
    transfer = transfer_table(cuda=False) if transfer is None else transfer
    prof = pd.DataFrame(columns=["host", "model", "mode", "status"]) if prof is None else prof
    env = pd.DataFrame(
        [
            dict(
                host="h1",
                device="cpu",
                device_name="CPU",
                cores=2,
                threads=2,
                fma_gflops=gflops,
                python="3.11",
                torch="2",
                cuda="",
                platform="linux",
            )
        ]
    )
    return summary.analyse(runs, transfer, prof, env, CFG)


# --- the fit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [(50.0, 1.0), (300.0, 0.1), (8.0, 0.02)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_a_and_b_within_5_percent(a, b, seed):
    runs = synthetic_runs({("cpu", "module"): (a, b)}, seed=seed)
    f = tbl.fits(runs).iloc[0]
    assert f.a_us == pytest.approx(a, rel=0.05) and f.b_us == pytest.approx(b, rel=0.05)
    assert f.quality == "good" and f.n_batch_sizes == len(GRID) and f.note == ""


def test_fit_shrugs_off_an_outlier():
    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0)}, seed=3)
    runs.loc[(runs.batch_size == 16) & (runs.repeat == 0), "step_time_median_s"] *= 5  # one run hit by a hiccup
    f = tbl.fits(runs).iloc[0]
    assert f.a_us == pytest.approx(50.0, rel=0.05) and f.b_us == pytest.approx(1.0, rel=0.05)


def test_crossover_within_one_batch_size_step_and_speedups():
    cpu, gpu = (40.0, 1.0), (300.0, 0.1)  # the GPU wins above (300 - 40) / (1 - 0.1) = 289
    truth = (gpu[0] - cpu[0]) / (cpu[1] - gpu[1])
    runs = synthetic_runs({("cpu", "module"): cpu, ("cuda", "module"): gpu, ("cpu", "manual"): (10.0, 0.8)})
    tables, found = analyse(runs, transfer_table())
    c = tables["crossover"]
    assert len(c) == 1  # no cuda run of manual: nothing to compare, no row
    c = c.iloc[0]
    assert c.verdict == "slower below, faster above" and c.fit_agrees
    assert abs(math.log(c.crossover_batch_size / truth)) <= math.log(4)
    assert c.measured_last_slower == 256 and c.measured_first_faster == 1024
    s = tables["speedup"]
    dev = s[s.kind == "device"].set_index("batch_size")["speedup"]
    assert list(dev.index) == GRID
    for bs_, sp in dev.items():
        assert sp == pytest.approx((cpu[0] + cpu[1] * bs_) / (gpu[0] + gpu[1] * bs_), rel=0.1)
    # The mode ladder: every mode over the reference (here module; seed did not run) on each device.
    lad = s[s.kind == "mode"]
    assert set(lad.baseline_mode) == {"module"} and set(lad["mode"]) == {"module", "manual"}
    text = " ".join(findings(found, "h1"))
    assert "cuda is slower than cpu below batch size" in text and "module" in text


def test_crossover_verdicts_for_lines_that_do_not_cross():
    assert tbl.fit_crossover(10, 0.5, 40, 1.0)["verdict"] == "faster at every batch size"
    assert tbl.fit_crossover(300, 1.5, 40, 1.0)["verdict"] == "slower at every batch size"
    r = tbl.fit_crossover(10, 2.0, 40, 1.0)
    assert r["verdict"] == "faster below, slower above" and r["crossover_batch_size"] == pytest.approx(30)


# --- degenerate inputs --------------------------------------------------------------------------


def test_one_batch_size_gives_a_note_not_a_crash():
    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0), ("cpu", "dataloader"): (80.0, 1.2)}, sizes=[64])
    tables, found = analyse(runs)
    f = tables["fits"]
    assert f.a_us.isna().all() and f.note.str.contains("only batch size 64 ran").all()
    assert any("only batch size 64" in n for n in notes(found))
    pages = words.pages(found, tables)
    assert "only batch size 64" in pages["answer"] and "DataLoader transfer share" in pages["answer"]
    assert "only batch size 64" in words.summary_md(found)


def test_every_report_page_belongs_to_a_figure_of_the_registry():
    """A page named for no figure would never reach the report (a renamed figure loses its words)."""
    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0), ("cpu", "seed"): (120, 3.0)})
    tables, found = analyse(runs)
    pages = words.pages(found, tables)
    assert set(pages) - {"answer"} <= set(figures.FIGURES), set(pages) - {"answer"} - set(figures.FIGURES)
    assert all(pages[name].strip() for name in ("ladder", "throughput", "speedup"))


def test_all_failed_runs_give_a_note_not_a_crash():
    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0)}, sizes=[16, 256], repeats=1)
    runs["status"] = "oom"
    runs["step_time_median_s"] = np.nan
    tables, found = analyse(runs)
    assert tables["fits"].note.str.contains("no successful run").all()
    assert tables["speedup"].empty and tables["crossover"].empty and tables["dataloader"].empty
    assert notes(found) and "No run succeeded" in notes(found)[0]
    pages = words.pages(found, tables)
    assert "No run succeeded" in pages["answer"]
    assert "nothing to fit" in words.summary_md(found)


def test_cpu_only_states_overhead_per_sample_cost_and_dataloader_share():
    runs = synthetic_runs(
        {("cpu", "module"): (50.0, 1.0), ("cpu", "dataloader"): (90.0, 1.5), ("cpu", "seed"): (120, 3.0)}
    )
    tables, found = analyse(runs)
    assert tables["crossover"].empty
    text = " ".join(findings(found, "h1"))
    assert "Only the cpu ran on h1" in text
    dl = tables["dataloader"].set_index("batch_size")
    # Known lines: the DataLoader adds 40 + 0.5·B µs to a step of 90 + 1.5·B.
    for b in GRID:
        assert dl.loc[b, "extra_share"] == pytest.approx((40 + 0.5 * b) / (90 + 1.5 * b), abs=0.05)
        assert 0 < dl.loc[b, "copy_us"] < dl.loc[b, "dataloader_step_us"]
    answer = words.pages(found, tables)["answer"]
    assert "no GPU crossover" in answer and "DataLoader transfer share" in answer
    fits_table = answer.split("**Fixed cost per step", 1)[1].split("**DataLoader", 1)[0]
    for mode in ("module", "dataloader", "seed"):
        assert re.search(rf"^h1 +cpu +mlp-16-16 +{mode} ", fits_table, re.M), fits_table  # a row for every mode
    assert "50 µs" in answer and "1 µs" in answer  # module's a and b, as fitted
    # The fixed cost, the cost per sample and the batch size below which the fixed cost is more
    # than half a step (a / b = 50), each with its interval from the same resamples.
    (line,) = [ln for ln in findings(found, "h1") if ln.startswith("For module on cpu")]
    quoted = re.findall(r"([\d.,]+)(?: µs)? \(([\d.,]+)–([\d.,]+)(?: µs)?\)", line)
    assert len(quoted) == 3, line
    lo, hi = (float(v.replace(",", "")) for v in quoted[2][1:])
    assert lo <= 50 <= hi, line
    fit = tables["fits"].set_index("mode").loc["module"]
    assert fit.overhead_bound_below_lo <= fit.overhead_bound_below <= fit.overhead_bound_below_hi


def test_bandwidth_pinned_vs_pageable():
    bw = copies.bandwidth(transfer_table()).set_index(["device", "memory"])
    assert bw.loc[("cuda", "pinned"), "fit_gb_per_s"] == pytest.approx(24, rel=0.02)
    assert bw.loc[("cuda", "pinned"), "latency_us"] == pytest.approx(8, rel=0.05)
    assert bw.loc[("cuda", "pinned"), "pinned_over_pageable"] > 3
    assert math.isnan(bw.loc[("cpu", "pageable"), "pinned_over_pageable"])


# --- many machines, one report ------------------------------------------------------------------


def test_merge_by_host_first_source_wins(tmp_path):
    here = {"runs": synthetic_runs({("cpu", "module"): (50.0, 1.0)}, sizes=[16], repeats=1, host="a")}
    other = synthetic_runs(
        {("cpu", "module"): (60.0, 1.0), ("cuda", "module"): (300, 0.1)}, sizes=[16], repeats=1, host="a"
    )
    other = pd.concat([other, synthetic_runs({("cuda", "module"): (200, 0.1)}, sizes=[16], repeats=1, host="b")])
    (tmp_path / "m").mkdir()
    other.reindex(columns=records.COLUMNS).to_csv(tmp_path / "m/runs.csv", index=False)  # a whole runs.csv
    transfer_table(host="b").to_csv(tmp_path / "m/transfer.csv", index=False)
    tables, owner = aggregate.merge_by_host(
        [("here", here), ("m", aggregate.siblings(tmp_path / "m/runs.csv"))], log=lambda m: None
    )
    assert owner == {"a": "here", "b": "m"}
    runs = tables["runs"]
    assert set(zip(runs.host, runs.device)) == {("a", "cpu"), ("b", "cuda")}  # a's stale cuda row is not mixed in
    assert set(tables["transfer"].host) == {"b"}


# --- the profiler's split of a step -------------------------------------------------------------


def test_profiler_splits_steps_and_counts_ops():
    g = torch.Generator().manual_seed(0)
    tensors = {"train_x": torch.rand(100, 784, generator=g), "train_y": torch.randint(0, 10, (100,), generator=g)}
    cfg = dict(seed=0, training=dict(init="default", loss="cross_entropy", lr=0.1, amp_dtype="float16"))
    s = networks.build(cfg, "mlp-16-16")
    rows = {
        m: profiling.profile_one(cfg, s, tensors, "cpu", m, 16, steps=3, warmup=1)
        for m in ("module", "manual", "numpy", "seed")
    }
    m = rows["module"]
    assert m["split"] == "autograd phases" and min(m["forward_us"], m["backward_us"], m["optimizer_us"]) > 0
    assert m["whole_us"] == 0 and m["wait_us"] == 0 and m["fwd_bwd_us"] == 0
    assert rows["manual"]["split"] == "hand-written backward" and rows["manual"]["fwd_bwd_us"] > 0
    assert rows["seed"]["split"] == "not separable" and rows["seed"]["whole_us"] > 0
    assert m["ops_step"] > 10 and rows["numpy"]["ops_step"] == 0  # numpy dispatches no torch op
    assert rows["seed"]["ops_step"] > rows["manual"]["ops_step"]  # the beginner's code dispatches more
    assert math.isnan(m["launches"])  # nothing is launched on a cpu
    for r in rows.values():
        assert r["step_us_plain"] > 0 and r["step_us_profiled"] > 0


# --- the pipeline: report contents, and figures regenerated without retraining ------------------

FIGURES = list(figures.FIGURES)


def run_copy(repo, wd, cfg, *args):
    """snakemake on the Snakefile of a copy of the workflow (the test edits the copy's code)."""
    return snakemake(wd, cfg, *args, repo=repo)


@pytest.fixture
def small_run(cpu_pipeline):
    """The shared finished pipeline: cpu only, three modes and three batch sizes."""
    repo, wd, cfg, _ = cpu_pipeline
    return repo, wd, cfg


@pytest.mark.slow
def test_report_has_every_figure_and_states_the_answer(small_run):
    _, wd, cfg = small_run
    html = (wd / "results/report.html").read_text(errors="replace")
    for name in FIGURES:
        assert f"{name}.png" in html
    for cat in ("Throughput", "Speedup", "Breakdown", "Accuracy", "Data transfer", "Environment"):
        assert cat in html
    fits = pd.read_csv(wd / "results/summary/fits.csv")
    assert set(fits["mode"]) == set(cfg["modes"]) and fits.a_us.notna().all() and fits.b_us.notna().all()
    # The workflow page: the answer, the fixed cost and cost per sample of every mode, the
    # DataLoader transfer share, the environment.
    assert "The answer for this run" in html and "fixed cost a per step" in html
    assert "DataLoader transfer share" in html and "no GPU crossover" in html
    assert "Environment of every host" in html and "Problems with" not in html and "system-message" not in html
    md = (wd / "results/summary.md").read_text()
    assert "fixed" in md and "DataLoader on cpu (mlp-16-16) at batch 4" in md
    # The run's process measured what a denormal number costs this cpu (one repeat: one process,
    # no interval); the machine's section says it.
    env = pd.read_csv(wd / "results/summary/environment.csv")
    assert (env.denormal_cost > 0).all() and env.denormal_cost_lo.isna().all()
    assert "an operation on a denormal number" in md and "flush them to zero" in md
    dl = pd.read_csv(wd / "results/summary/dataloader.csv")
    assert list(dl.batch_size) == cfg["batch_sizes"] and dl.extra_share.notna().all()
    prof = pd.read_csv(wd / "results/summary/profile.csv")
    assert set(prof.batch_size) == {4, 64} and (prof.status == "ok").all()
    for name in ("fits", "crossover", "speedup"):
        assert (wd / f"results/summary/{name}.csv").exists()


@pytest.mark.slow
def test_figures_regenerate_without_retraining(cpu_pipeline, tmp_path):
    repo, cfg = cpu_pipeline[0], cpu_pipeline[2]
    wd = own_workdir(cpu_pipeline, tmp_path)  # this test redraws
    trained = sorted((wd / "results/runs").rglob("*.csv")) + [wd / "results/profile/cpu.csv"]
    before = {p: p.stat().st_mtime_ns for p in trained}
    png = wd / "results/figures/throughput.png"
    # A plotting option: only the figures rule reruns.
    size = png.stat().st_size
    cfg = dict(cfg, figures=dict(dpi=60))
    assert jobs(run_copy(repo, wd, cfg)) == ["all", "figures"]
    assert png.stat().st_size < size  # drawn again, at the lower dpi
    # An edit of the figure code (in the package the thin script imports): again only figures.
    mtime = png.stat().st_mtime_ns
    with edited(repo / "workflow/scripts/mnistbench/report/figures.py", "\n# an edit\n"):
        assert jobs(run_copy(repo, wd, cfg, "-n")) == ["all", "figures"]
        assert jobs(run_copy(repo, wd, cfg)) == ["all", "figures"]
    assert png.stat().st_mtime_ns > mtime
    assert {p: p.stat().st_mtime_ns for p in trained} == before  # no train or profile job ran
    # Then the report again, from the regenerated figures.
    run_copy(repo, wd, cfg, "--report", "results/report2.html")
    assert "throughput.png" in (wd / "results/report2.html").read_text(errors="replace")


@pytest.mark.slow
def test_merge_another_machine_by_host(cpu_pipeline, tmp_path):
    """Another machine's results/summary (here: this run's, as host gpu-box's own runs, given cuda
    rows) merged through `merge_runs`: one report, both hosts; no train job reruns."""
    repo, cfg = cpu_pipeline[0], cpu_pipeline[2]
    wd = own_workdir(cpu_pipeline, tmp_path)  # the merge rewrites the summary
    other = tmp_path / "gpu-box"
    other.mkdir()
    runs = as_another_machine(pd.read_csv(wd / "results/summary/runs.csv"), "gpu-box")
    cuda = runs.assign(device="cuda", device_name="Fake GPU")
    cuda["step_time_median_s"] = 200e-6 + 0.05e-6 * cuda["batch_size"]  # a GPU-like line: big a, tiny b
    pd.concat([runs, cuda]).to_csv(other / "runs.csv", index=False)
    for name in ("epochs", "environment", "transfer", "profile"):
        pd.read_csv(wd / f"results/summary/{name}.csv").assign(host="gpu-box").to_csv(
            other / f"{name}.csv", index=False
        )
    trained = {p: p.stat().st_mtime_ns for p in (wd / "results/runs").rglob("*.csv")}
    proc = run_copy(repo, wd, dict(cfg, merge_runs=[str(other / "runs.csv")]))
    assert "train" not in jobs(proc) and "profile" not in jobs(proc) and "aggregate" in jobs(proc)
    assert {p: p.stat().st_mtime_ns for p in trained} == trained
    merged = pd.read_csv(wd / "results/summary/runs.csv")
    assert "gpu-box" in set(merged.host) and len(set(merged.host)) == 2
    cross = pd.read_csv(wd / "results/summary/crossover.csv")
    assert set(cross.place) == {"gpu-box"} and set(cross["mode"]) == set(cfg["modes"])
    assert set(pd.read_csv(wd / "results/summary/environment.csv").host) == set(merged.host)
    assert set(pd.read_csv(wd / "results/summary/profile.csv").host) == set(merged.host)
    md = (wd / "results/summary.md").read_text()
    assert "## gpu-box" in md and "cuda" in md


def test_headline_names_the_ladder_and_the_arithmetic_limit():
    """The headline: per device, the beginner's code at batch 1, the best mode there and at the
    largest batch with their factors, and how far the beginner's code is from the cpu's limit."""
    runs = synthetic_runs(
        {("cpu", "seed"): (220.0, 1.4), ("cpu", "kernel"): (0.5, 0.25), ("cpu", "module"): (250, 1.1)}
    )
    runs["message"], runs["quality_note"] = "", ""
    tables, found = analyse(runs, gflops=52_672 / 410)  # a core whose limit for the seed's network is 0.41 µs
    lines = words.sentences(found["headline"])
    first, second = lines[0], lines[1]
    seed1 = 1 / (221.4e-6)  # samples/s of seed at batch 1: one sample per (a + b) µs
    assert first.startswith("On h1, cpu, mlp-16-16:")
    assert "the beginner's code trains" in first and "the best mode there, kernel" in first
    assert "At batch 4096 the best is kernel" in first
    kernel1 = 1 / (0.75e-6)
    found_ = re.search(
        r"kernel, [0-9.]+ [kM]? ?\([0-9.]+–[0-9.]+ [kM]?\) samples/s: ([0-9.]+)× \(([0-9.]+)–([0-9.]+)×\)", first
    )
    factor, lo, hi = map(float, found_.groups())
    assert factor == pytest.approx(kernel1 / seed1, rel=0.05)  # the timings carry 2 % noise
    assert lo <= factor <= hi  # with its 95 % interval
    assert "the arithmetic limit" in second and "0.41 µs" in second and "kernel takes" in second
    over = float(
        re.search(r"µs\) per sample of mlp-16-16 on h1's cpu, ([0-9.]+)× \([0-9.]+–[0-9.]+×\)", second).group(1)
    )
    assert over == pytest.approx(221.4 / 0.41, rel=0.05)  # ~540x the limit
    md = words.summary_md(found)
    assert md.index("## The headline") < md.index("## h1")


def test_sparse_is_set_against_the_dense_limit_with_what_it_skipped():
    """`sparse` records the nonzero share of the training inputs; the fits count the FLOP it does
    (layer 1 at that share), the ladder carries the dense limit as samples/s, and the headline
    says how far past the limit sparse runs and why."""
    runs = synthetic_runs(
        {("cpu", "seed"): (220.0, 1.4), ("cpu", "kernel"): (0.5, 0.44), ("cpu", "sparse"): (0.05, 0.2)}
    )
    runs["message"], runs["quality_note"] = "", ""
    runs["input_nonzero_share"] = np.where(runs["mode"] == "sparse", 0.2, np.nan)
    tables, found = analyse(runs, gflops=52_672 / 410)  # a limit of 0.41 µs per sample
    f = tables["fits"].set_index("mode")
    dense = 2 * (2 * (784 * 16 + 16 * 16 + 16 * 10) + 16 * 16 + 16 * 10)
    assert f.loc["sparse", "effective_flop_per_sample"] == pytest.approx(dense - 0.8 * 4 * 784 * 16)  # 12.5 kFLOP
    assert f.loc["kernel", "effective_flop_per_sample"] == dense
    assert f.loc["sparse", "input_nonzero_share"] == 0.2 and np.isnan(f.loc["kernel", "input_nonzero_share"])
    assert tables["ladder"]["limit_samples_per_s"].dropna().unique() == pytest.approx([1e6 / 0.41])
    line = next(s for s in words.sentences(found["headline"]) if s.startswith("sparse takes"))
    took = float(re.search(r"sparse takes ([0-9.]+) µs", line).group(1))
    assert took == pytest.approx(0.25, rel=0.05)  # a + b at batch 1
    over = float(re.search(r"µs\) per sample at batch 1, ([0-9.]+)× ", line).group(1))
    assert over == pytest.approx(0.25 / 0.41, rel=0.05)
    assert "the dense arithmetic limit (0.41 µs)" in line and "24 % of the arithmetic" in line
    assert "12.5 kFLOP of 52.7 kFLOP" in line and "the 20.0 % of the training inputs that are nonzero" in line


def test_an_older_runs_csv_without_the_nonzero_share_is_read(tmp_path):
    """input_nonzero_share is a column runs.csv gained: another machine's runs.csv written before
    it still merges, the share read as empty."""
    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0)})
    for c in records.COLUMNS:
        if c not in runs.columns and c != "input_nonzero_share":
            runs[c] = ""
    runs.to_csv(tmp_path / "runs.csv", index=False)
    got = aggregate.read_runs(tmp_path / "runs.csv")
    assert got["input_nonzero_share"].isna().all() and len(got) == len(runs)


def test_headline_when_every_run_at_the_smallest_batch_was_left_out():
    """A busy machine can leave out every run of the smallest batch size (all noisy): the headline
    says so and still reports the largest batch, instead of failing the whole analysis."""
    runs = synthetic_runs({("cpu", "seed"): (220.0, 1.4), ("cpu", "module"): (250, 1.1)})
    runs["message"], runs["quality_note"] = "", ""
    runs.loc[runs.batch_size == 1, "quality"] = "noisy"
    tables, found = analyse(runs)
    first = words.sentences(found["headline"])[0]
    assert "no run at its smallest batch size is usable" in first
    assert "At batch 4096 the best is module" in first
    assert "## The headline" in words.summary_md(found)


@pytest.mark.parametrize("module", ["collect.aggregate", "report.summary", "report.figures"])
def test_an_analysis_rule_lists_every_package_module_its_script_runs(module):
    """The analysis rules' code inputs (depends.sources, read from the source) hold every package
    module that importing the script's module really loads: an edit of any of them reruns the rule.
    (A sub-package's __init__ holds its docstring only.)"""
    code = f"import sys, mnistbench.{module}; print(*sorted(m for m in sys.modules if m.startswith('mnistbench.')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO / "workflow/scripts")
    assert proc.returncode == 0, proc.stderr
    loaded = {depends.module_path(m.removeprefix("mnistbench.")) for m in proc.stdout.split()}
    loaded = {p for p in loaded if p.is_file()}
    listed = {Path(p) for p in depends.sources(module)}
    assert depends.module_path(module) in loaded and loaded <= listed, sorted(map(str, loaded - listed))
    if module == "report.summary":  # the words' templates too: a sentence edited reruns the analysis
        templates = set((REPO / "workflow/scripts/mnistbench/report/templates").glob("*.j2"))
        assert templates and templates <= listed
