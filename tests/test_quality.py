"""Timings a reader can trust on a busy machine: what else ran is measured, a noisy timing is made
again and flagged, and the analysis uses only the clean ones. A real CPU hog is started partway
through a small grid; no test depends on the machine being quiet."""

import os
import shutil
import subprocess
import sys
import time

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import snakemake, tiny_config, train_request
from mnistbench.data import download, preload, synthetic
from mnistbench.measure import quality
from mnistbench.report import figures, summary, words
from mnistbench.report import tables as tbl
from mnistbench.train import trainer

Q = dict(trainer.DEFAULTS["quality"], settle_s=0)


def epoch(wall, steps, busy, own):
    return dict(wall_s=wall, steps=steps, busy_s=busy, own_cpu_s=own, other_cores=None, gpu_others=None)


def test_verdict_ok_noisy_and_few_steps():
    quiet = [epoch(1.0, 100, 1.05, 1.0) for _ in range(4)]
    assert quality.verdict(quiet, 400, 1.1, dict(quality=Q))[0] == "ok"
    busy = quiet[:2] + [epoch(1.0, 100, 2.0, 1.0) for _ in range(2)]  # a neighbour took a core for half the run
    v, note, score = quality.verdict(busy, 400, 1.1, dict(quality=Q))
    assert v == "noisy" and "1 of a core" in note and "50% of the timed steps" in note and score > 0
    v, note, _ = quality.verdict(quiet, 400, 4.5, dict(quality=Q))
    assert v == "noisy" and "q3/q1 = 4.50" in note
    v, note, _ = quality.verdict(quiet, 3, 1.0, dict(quality=Q))
    assert v == "few_steps" and "raise train_samples or epochs" in note


def test_busy_time_of_our_cpus_counts_our_own_work():
    """Whatever else runs, the cpus this process may use were busy at least as long as this
    process computed on them (to within a tick per cpu at each end)."""
    cpus = quality._cpus()
    busy, own, t0 = quality._busy_seconds(cpus), time.process_time(), time.perf_counter()
    while time.perf_counter() - t0 < 0.3:
        pass
    worked = time.process_time() - own
    assert worked > 0 and quality._busy_seconds(cpus) - busy >= worked - 2 * len(cpus) * quality._tick()


def test_short_epochs_are_judged_together_not_one_by_one():
    """/proc/stat counts 10 ms ticks: one tick over a 20 ms epoch would read as half a core, so
    epochs are judged in windows, and a window only counts as busy beyond its rounding."""
    tiny = [epoch(0.02, 10, 0.03, 0.02) for _ in range(30)]  # 0.6 s in all, 0.5 core of others
    ws = quality.windows(tiny)
    assert ws and all(w["wall_s"] >= quality.MIN_WINDOW_S for w in ws)
    assert sum(w["steps"] for w in ws) == 300 and all(w["other_cores"] == pytest.approx(0.5) for w in ws)
    assert quality.windows(tiny[:3]) == []  # 60 ms: too short to tell
    v, note, _ = quality.verdict(tiny[:3], 100, 1.0, dict(quality=Q))
    assert v == "ok" and "not measured" in note
    # A small load over a short window is within the rounding; the same load over a long one is not.
    slight = dict(Q, max_other_cpu=0.1)
    assert quality.verdict([epoch(0.1, 50, 0.115, 0.1)], 50, 1.0, dict(quality=slight))[0] == "ok"
    assert quality.verdict([epoch(10.0, 50, 11.5, 10.0)], 50, 1.0, dict(quality=slight))[0] == "noisy"


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    d = tmp_path_factory.mktemp("hog")
    md5 = synthetic.write(d / "m", n_train=4096, n_test=64)
    download.download(d / "d", [f"file://{d}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(d / "d"), d / "t.pt")
    return d / "t.pt"


def hog(seconds: float) -> list:
    """As many busy processes as this process may use cores, each ending by itself after `seconds`."""
    code = f"import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(len(os.sched_getaffinity(0)))]


@pytest.mark.slow
def test_runs_that_a_neighbour_disturbed_are_retimed_or_flagged(tensors):
    # Each run times ~0.5-1 s of batch-1 steps in two epochs, long enough to measure the machine.
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=4096, test_samples=64, warmup_steps=5, epochs=2, retime=1)
    cfg["quality"] = dict(Q)

    def run(mode):
        return trainer.train(cfg, tensors, "cpu", "mlp-16-16", mode, 1, 0, log=lambda m: None)[0]

    run("manual")  # the grid starts on whatever machine the test has
    procs = hog(120)
    try:
        time.sleep(0.5)
        disturbed = [run("manual"), run("numpy")]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)
    for row in disturbed:
        assert row["status"] == "ok"
        assert row["quality"] == "noisy" or row["attempts"] > 1, row
        assert "other processes used" in row["quality_note"], row["quality_note"]


@pytest.mark.slow
def test_a_run_with_few_timed_steps_says_so(tensors):
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=512, test_samples=64, warmup_steps=2, epochs=1, retime=2)
    cfg["quality"] = dict(Q)
    row, record = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "manual", 128, 0, log=lambda m: None)
    assert row["quality"] == "few_steps" and row["attempts"] == 1 and "raise train_samples" in row["quality_note"]
    assert len(record["attempts"]) == 1 and "evidence" in record["attempts"][0]


@pytest.mark.slow
def test_a_retime_that_fails_keeps_the_earlier_timing(tensors, monkeypatch):
    """Out of memory (or another runtime error) in a retime must not throw away the timing before it."""
    import torch
    from mnistbench.train import runner

    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=512, test_samples=64, warmup_steps=2, epochs=2, retime=2)
    cfg["quality"] = dict(Q, max_spread=0.5)  # q3/q1 >= 1 always: every timing is noisy, so a retime follows
    build, calls = runner.build, []

    def second_fails(*args, **kw):
        calls.append(args)
        if len(calls) == 2:
            raise torch.OutOfMemoryError("CUDA out of memory (raised by this test)")
        return build(*args, **kw)

    monkeypatch.setattr(runner, "build", second_fails)
    row, record = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "manual", 16, 0, log=lambda m: None)
    assert row["status"] == "ok" and row["attempts"] == 2 and row["samples_per_s"] > 0, row
    assert [a["status"] for a in record["attempts"]] == ["ok", "oom"]
    assert row["quality"] == "noisy" and "attempt 2: oom" in row["quality_note"], row["quality_note"]


def test_the_pipeline_warns_about_few_steps_before_it_starts(mirror, tmp_path):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, batch_sizes=[8, 256]), "-n")
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning: every run at batch size")]
    assert "batch size 256" in line and "train_samples or epochs" in line


@pytest.mark.slow
def test_each_repeat_index_trains_in_its_own_process(tensors, tmp_path, monkeypatch):
    from mnistbench.train import worker

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    shutil.copy(tensors, tmp_path / "t.pt")  # a worker reads only files of the working directory
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, retime=0, train_samples=256, test_samples=64, warmup_steps=1, epochs=1)
    req = train_request(cfg, tmp_path / "t.pt", "manual", 64)
    pid = {}
    for r in (0, 1, 0):
        _, record = worker.train(dict(req, repeat=r), worker.socket_for(r))
        pid.setdefault(r, set()).add(record["environment"]["pid"])
    assert len(pid[0]) == 1 and pid[0] != pid[1]  # r0 twice in one process, r1 in another


# --- the analysis uses the clean runs ---------------------------------------------------------------


def runs_with_a_noisy_one():
    from test_analysis import GRID, synthetic_runs

    runs = synthetic_runs({("cpu", "module"): (50.0, 1.0)}, sizes=GRID, repeats=3)
    runs["message"], runs["quality_note"] = "", ""
    hit = runs.index[(runs.batch_size == 16) & (runs.repeat == 1)]
    runs.loc[hit, "step_time_median_s"] *= 30  # the neighbour's 30x
    runs.loc[hit, "samples_per_s"] /= 30
    runs.loc[hit, "quality"] = "noisy"
    runs.loc[hit, "quality_note"] = "other processes used 0.9 of a core during 60% of the timed steps"
    return runs


def test_noisy_runs_stay_out_of_medians_and_are_listed():
    runs = runs_with_a_noisy_one()
    tables, found = summary.analyse(
        runs,
        pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds"]),
        pd.DataFrame(columns=["host", "mode", "status"]),
        pd.DataFrame(),
        {},
    )
    med = tbl.medians(runs).set_index("batch_size")["step_time_median_s"]
    assert med.loc[16] == pytest.approx(66e-6, rel=0.1)  # the noisy repeat did not count
    ex = tables["set_aside"]
    assert len(ex) == 1 and ex.iloc[0]["batch_size"] == 16 and "0.9 of a core" in ex.iloc[0]["reason"]
    md = words.summary_md(found)
    assert "## Set aside from the analysis" in md and "0.9 of a core" in md
    answer = words.pages(found, tables)["answer"]
    assert "Set aside from the analysis" in answer and "repeat 1" in answer


def test_repeats_that_disagree_are_named():
    runs = runs_with_a_noisy_one()
    runs["quality"] = "ok"  # now the 30x repeat counts: its combination's repeats disagree
    tables, found = summary.analyse(
        runs,
        pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds"]),
        pd.DataFrame(columns=["host", "mode", "status"]),
        pd.DataFrame(),
        {},
    )
    d = tables["disagreeing"]
    assert list(d.batch_size) == [16] and d.iloc[0]["repeat_spread"] > 20
    assert "Repeats that disagree" in words.summary_md(found)


def test_figures_draw_left_out_points_hollow():
    runs = runs_with_a_noisy_one()
    fig = figures.throughput(runs, tbl.fits(runs))
    hollow = [ln for ln in fig.axes[0].lines if ln.get_gid() == "excluded"]
    assert len(hollow) == 1 and hollow[0].get_markerfacecolor() == "none"
    assert list(hollow[0].get_xdata()) == [16]
    plt.close("all")
