"""Results always match the config and the code that produced them, and bad input stops the run
with one clear line: real Snakemake runs (and dry runs) on the tiny data served over loopback."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_repo, edited, jobs, snakemake, tiny_config
from mnistbench import BenchError
from mnistbench.collect import aggregate
from mnistbench.data import download, preload, synthetic
from mnistbench.report import tables as tbl
from mnistbench.train import records, trainer

pytestmark = pytest.mark.slow


def config_lines(proc) -> list:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("config key `")]


@pytest.fixture
def finished(cpu_pipeline):
    """The shared finished run of the test data (tests that edit its code restore it)."""
    return cpu_pipeline


def n_runs(cfg) -> int:
    return len(cfg["modes"]) * len(cfg["batch_sizes"]) * cfg["repeats"]


# --- 1: every setting and the training code are rerun triggers ----------------------------------


def test_nothing_changed_nothing_reruns(finished):
    repo, wd, cfg, _ = finished
    assert jobs(snakemake(wd, cfg, "-n", repo=repo)) == []


@pytest.mark.parametrize(
    "change",
    [
        ["epochs=3"],
        ["training={lr: 0.25}"],
        ["train_samples=256"],
        ["seed=5"],
        ["warmup_steps=1"],
        ["retime=1"],
        ["quality={min_timed_steps: 3}"],
    ],
)
def test_a_changed_setting_retimes_every_run(finished, change):
    repo, wd, cfg, _ = finished
    planned = jobs(snakemake(wd, cfg, "-n", "--config", *change, repo=repo))
    assert planned.count("train") == n_runs(cfg) and planned.count("profile") == 1, planned
    assert "aggregate" in planned and "figures" in planned


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: --cores 1 changes no run's threads")
def test_fewer_cores_retime_every_run(finished):
    """A train job's threads are capped by --cores, so --cores 1 makes other measurements."""
    repo, wd, cfg, _ = finished
    planned = jobs(snakemake(wd, cfg, "-n", "--cores", "1", repo=repo))
    assert planned.count("train") == n_runs(cfg) and planned.count("profile") == 1, planned


def test_a_grid_of_pairs_that_cannot_exist_is_one_line(mirror, tmp_path):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, devices=["cpu"], modes=["cudagraph"]), "-n", check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert "`modes`" in line and "cudagraph runs only on cuda" in line and "cpu" in line, line


def test_a_new_batch_size_trains_only_its_runs(finished):
    repo, wd, cfg, _ = finished
    planned = jobs(snakemake(wd, cfg, "-n", "--config", "batch_sizes=[4,16,64,8]", repo=repo))
    assert planned.count("train") == len(cfg["modes"])  # every mode at 8; the others stay


def test_an_edit_of_the_training_code_retimes_and_an_edit_of_the_figures_does_not(finished, tmp_path):
    repo, wd, cfg, _ = finished
    for name, edit in (("train/modes.py", "\n# an edit\n"), ("train/kernel.c", "\n/* an edit */\n")):
        with edited(repo / "workflow/scripts/mnistbench" / name, edit):
            assert jobs(snakemake(wd, cfg, "-n", repo=repo)).count("train") == n_runs(cfg), name
    assert jobs(snakemake(wd, cfg, "-n", repo=repo)) == []


def test_the_same_interpreter_named_another_way_retimes_nothing(finished):
    """`.venv/bin/snakemake` runs Snakemake on `.venv/bin/python3`, `.venv/bin/python -m snakemake`
    on `.venv/bin/python`: one interpreter, two names, and a finished run stays finished."""
    repo, wd, cfg, _ = finished
    exe = Path(sys.executable)
    names = ["python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}"]
    other = next(exe.with_name(n) for n in names if n != exe.name and exe.with_name(n).exists())
    assert jobs(snakemake(wd, cfg, "-n", repo=repo, python=other)) == []


def test_runs_of_different_settings_are_never_summarised_together(finished, tmp_path):
    """Growing the grid while changing a setting, with Snakemake told to look only at file times
    (so the old runs stay) and to aggregate again: aggregate refuses, naming the key and the runs."""
    repo, done, cfg, _ = finished
    wd = tmp_path / "wd"
    shutil.copytree(done, wd)
    proc = snakemake(
        wd,
        cfg,
        "--config",
        "epochs=3",
        "batch_sizes=[4,16,64,8]",
        "--rerun-triggers",
        "mtime",
        "--forcerun",
        "aggregate",
        repo=repo,
        check=False,
    )
    assert proc.returncode != 0
    (line,) = sorted({ln for ln in proc.stderr.splitlines() if ln.startswith("error: runs made with different")})
    assert "`epochs` differs" in line and "has 2" in line and "has 3" in line
    summary = wd / "results/summary/runs.csv"  # never a summary of both
    assert not summary.exists() or set(pd.read_csv(summary).epochs) == {cfg["epochs"]}


def test_each_run_records_its_settings_and_code(finished):
    _, wd, cfg, _ = finished
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    settings = [json.loads(s) for s in runs.settings]
    assert all(s["epochs"] == cfg["epochs"] and s["training.lr"] == 0.5 for s in settings)
    assert runs.code.nunique() == 1 and len(runs.code.iloc[0]) == 16


def test_check_settings_names_the_key_and_allows_grid_axes():
    base = pd.DataFrame(
        [
            dict(
                host="a",
                mode="manual",
                device="cpu",
                batch_size=8,
                settings=json.dumps({"epochs": 2, "cpu_threads": 0}),
                code="x",
                model="mlp-16-16",
                model_digest="",
            ),
            dict(
                host="a",
                mode="module",
                device="cpu",
                batch_size=64,
                settings=json.dumps({"epochs": 2, "cpu_threads": 0}),
                code="x",
                model="mlp-16-16",
                model_digest="",
            ),
            dict(
                host="b",
                mode="module",
                device="cuda",
                batch_size=64,
                settings=json.dumps({"epochs": 2, "cpu_threads": 8}),
                code="y",
                model="mlp-16-16",
                model_digest="",
            ),
        ]
    )
    notes = aggregate.check_settings(base)  # grid axes and a host's own thread count may differ
    assert notes and "different versions of the training code" in notes[0]
    bad = base.copy()
    bad.loc[1, "settings"] = json.dumps({"epochs": 3, "cpu_threads": 0})
    with pytest.raises(BenchError, match="`epochs` differs"):
        aggregate.check_settings(bad)
    bad = base.copy()
    bad.loc[1, "code"] = "z"
    with pytest.raises(BenchError, match="host a were made by different code"):
        aggregate.check_settings(bad)
    # A user's module: its runs on every host must come from one version of its file.
    mine = base.assign(model="net.py:Net", model_digest="a" * 64)
    assert aggregate.check_settings(mine) == notes
    mine.loc[2, "model_digest"] = "b" * 64
    with pytest.raises(BenchError, match="runs of model net.py:Net were made from different versions of its file"):
        aggregate.check_settings(mine)


# --- 2: indexed GPUs ----------------------------------------------------------------------------


@pytest.mark.parametrize("devices", [["cuda:1"], ["cuda:0", "cuda:1"]])
def test_indexed_gpus_reach_every_path_by_their_slug(mirror, tmp_path, devices):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, devices=devices, modes=["manual", "cudagraph"]), "-n")
    out = proc.stdout + proc.stderr
    for d in devices:
        slug = d.replace(":", "")
        assert f"results/profile/{slug}.csv" in out and f"results/runs/{slug}/mlp-16-16/cudagraph/bs64/r0.csv" in out
    assert "results/runs/cuda:" not in out and "results/profile/cuda:" not in out
    assert "MissingInputException" not in out


# --- 3: merge_runs is checked -------------------------------------------------------------------


@pytest.mark.parametrize("what", ["missing", "columns", "empty", "binary", "types"])
def test_a_bad_merge_file_stops_the_run_with_one_line(mirror, tmp_path, what):
    url, md5 = mirror
    f = tmp_path / "other" / "runs.csv"
    f.parent.mkdir()
    good = pd.DataFrame([{c: 1 for c in records.COLUMNS}])
    if what == "columns":
        good.drop(columns=["samples_per_s", "quality"]).to_csv(f, index=False)
    elif what == "empty":
        f.write_text("")
    elif what == "binary":
        f.write_bytes(bytes(range(256)) * 4)
    elif what == "types":
        good.assign(batch_size="sixty-four").to_csv(f, index=False)
    proc = snakemake(tmp_path / "wd", tiny_config(url, md5, merge_runs=[str(f)]), "-n", check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert "merge_runs" in line and str(f) in line and "Traceback" not in proc.stderr
    hint = {
        "missing": "no such file",
        "columns": "missing columns: quality",
        "empty": "not a CSV",
        "binary": "not a CSV",
        "types": "batch_size",
    }[what]
    assert hint in line
    assert not (tmp_path / "wd" / "results").exists()


# --- 5: a blown-up run is not ok ------------------------------------------------------------------


def test_a_blown_up_run_is_diverged_and_left_out(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=128, n_test=32)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=128, test_samples=32, warmup_steps=1, epochs=1, retime=0)
    cfg["training"] = dict(cfg["training"], lr=1e6)
    row, _ = trainer.train(cfg, tmp_path / "t.pt", "cpu", "mlp-16-16", "module", 8, 0, log=lambda m: None)
    assert row["status"] == "diverged" and "lower training.lr" in row["message"], row["message"]
    assert row["final_loss"] > 10 * row["initial_loss"]

    runs = pd.DataFrame([row])
    assert tbl.medians(runs).empty and len(tbl.set_aside(runs)) == 1


def test_a_run_too_short_to_learn_is_not_a_failure_but_one_whose_loss_rose_is():
    """At chance accuracy a loss that rose means a rate too high (a 4096-wide sigmoid layer at
    plain SGD's rates, measured on real MNIST: 2.32 to 2.76 in an epoch at batch 16); one that
    stayed where it was (2.32 to 2.34: one step of batch 4096, or a rate that low) trained too
    little to learn, and its timing stands."""
    assert trainer.went_wrong(2.322, 2.335, 0.126, 0.126) is None
    assert trainer.went_wrong(2.322, 1.9, 0.3, 0.126) is None
    rose = trainer.went_wrong(2.322, 2.755, 0.126, 0.126)
    assert rose == "test accuracy 0.126 is chance and the loss rose from 2.32 to 2.75; lower training.lr"
    assert trainer.went_wrong(2.322, 2.755, 0.2, 0.126) is None  # it learned something all the same
    assert "rose from 2.32 to 30" in trainer.went_wrong(2.322, 30.0, 0.126, 0.126)
    assert trainer.went_wrong(2.322, float("nan"), 0.1, 0.126) == "training loss is nan; lower training.lr"


# --- 6: ordinary ways to write a boolean or a number -----------------------------------------------


@pytest.mark.parametrize(
    "args, retimed",
    [
        (["training={lr: 5e-1}"], False),  # the finished run's lr, in e-notation: the same number
        (["training={lr: 1e-3}"], True),
        (["retime=0"], False),  # the finished run's retime, as the command line's string
        (["retime=1"], True),
    ],
)
def test_command_line_numbers_are_typed(finished, args, retimed):
    """A number written on the command line is the number it says: the finished run's own value
    retimes nothing, another value retimes every run."""
    repo, wd, cfg, _ = finished
    planned = jobs(snakemake(wd, cfg, "-n", "--config", *args, repo=repo))
    assert planned.count("train") == (n_runs(cfg) if retimed else 0), planned


def test_yaml_numbers_in_e_notation_are_numbers(finished, tmp_path):
    repo, wd, cfg, _ = finished
    (tmp_path / "extra.yaml").write_text("training:\n  lr: 5e-1\nquality:\n  max_other_cpu: 2.5e-1\n")
    assert yaml.safe_load((tmp_path / "extra.yaml").read_text())["training"]["lr"] == "5e-1"  # YAML 1.1 says string
    # The finished run's values (the defaults) in e-notation: the same numbers, nothing to retime.
    files = [str(wd / "config.yaml"), str(tmp_path / "extra.yaml")]  # a later --configfile replaces the list
    assert jobs(snakemake(wd, cfg, "-n", "--configfile", *files, repo=repo)) == []
    bad = snakemake(wd, cfg, "-n", "--config", "warm_worker=maybe", check=False, repo=repo)
    (line,) = config_lines(bad)
    assert "warm_worker" in line


# --- 7: a truncated archive with the right md5 ------------------------------------------------------


def test_a_truncated_archive_is_refused_and_the_next_mirror_tried(tmp_path):
    good = tmp_path / "good"
    md5 = synthetic.write(good, n_train=50, n_test=20)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in download.FILES:
        (broken / name).write_bytes((good / name).read_bytes())
    name = "train-images-idx3-ubyte.gz"
    blob = (good / name).read_bytes()
    (broken / name).write_bytes(blob[: len(blob) // 2])
    import hashlib

    md5[name] = hashlib.md5((broken / name).read_bytes()).hexdigest()  # the mirror's md5 matches its broken file
    mirrors = [f"file://{broken}/", f"file://{good}/"]
    with pytest.raises(BenchError) as e:
        download.download(tmp_path / "d", mirrors, md5, log=lambda m: None)
    line = str(e.value)
    assert "\n" not in line and name in line and "corrupt archive" in line and f"file://{broken}/" in line
    assert f"file://{good}/{name} (md5" in line  # the next mirror was tried (its file is the real one)
    raw = tmp_path / "d/MNIST/raw"
    assert not any(p.name.startswith("train-images") for p in raw.rglob("*"))


def test_a_wrong_idx_size_is_refused(tmp_path):
    good = tmp_path / "good"
    md5 = synthetic.write(good, n_train=50, n_test=20)
    name = "t10k-labels-idx1-ubyte.gz"
    raw = gzip.decompress((good / name).read_bytes())
    (good / name).write_bytes(gzip.compress(raw[:-3], mtime=0))
    import hashlib

    md5[name] = hashlib.md5((good / name).read_bytes()).hexdigest()
    with pytest.raises(BenchError, match="header announces"):
        download.download(tmp_path / "d", [f"file://{good}/"], md5, log=lambda m: None)


# --- 8: sizes beyond MNIST's are refused before any job -------------------------------------------


@pytest.mark.parametrize("key, value", [("train_samples", 1_000_000_000), ("test_samples", 10_001)])
def test_sizes_beyond_mnist_are_a_config_error(mirror, tmp_path, key, value):
    url, md5 = mirror
    proc = snakemake(tmp_path, tiny_config(url, md5, **{key: value}), check=False)
    assert proc.returncode != 0
    (line,) = config_lines(proc)
    assert key in line and ("60 000" in line or "10 000" in line)
    assert not (tmp_path / "results").exists()


# --- 9: no stray CUDA probe message on a machine without a GPU -----------------------------------------

PROBE = """
import torch
from torch.profiler import profile
with profile():
    torch.ones(1).add_(1)
"""


def test_the_profile_job_prints_no_cuda_probe_error(finished):
    """Where the profiler on its own prints Kineto's GPU probe error (a CUDA build of torch on a
    machine without a GPU), the cpu profile job prints none."""
    _, wd, _, proc = finished
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    bare = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    if "gpuGetDeviceCount" not in bare.stdout + bare.stderr:
        pytest.skip("this machine's profiler prints no GPU probe error to suppress")
    log = (wd / "logs/profile/cpu.log").read_text()
    assert "cpu mlp-16-16 manual bs4: ok" in log
    assert "gpuGetDeviceCount" not in proc.stderr + proc.stdout + log


# --- progress and worker output ------------------------------------------------------------------


def test_warm_worker_no_trains_in_the_job(finished, mirror, prepared):
    """Every train job of the finished run handed its run to a warm worker; with warm_worker=No
    (an ordinary way to write false) the job trains in its own process."""
    _, _, _, done = finished
    assert (done.stdout + done.stderr).count("(warm worker)") == n_runs(finished[2])
    url, md5 = mirror
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["manual"], batch_sizes=[64])
    proc = snakemake(prepared, cfg, "results/runs/cpu/mlp-16-16/manual/bs64/r0.csv", "--config", "warm_worker=No")
    assert jobs(proc) == ["train"] and "(warm worker)" not in proc.stderr
    (row,) = pd.read_csv(prepared / "results/runs/cpu/mlp-16-16/manual/bs64/r0.csv").to_dict("records")
    assert row["status"] == "ok"


def test_what_a_mode_prints_reaches_the_job_log(mirror, prepared):
    """The warm worker's output (a mode's print, C code's output) goes to the job's log."""
    url, md5, tmp_path = *mirror, prepared
    repo = copy_repo(tmp_path / "repo")
    code = repo / "workflow/scripts/mnistbench/train/modes.py"
    text = code.read_text()
    marker = '    def backward(self, x, t):\n        """Fill self.g'
    assert marker in text
    code.write_text(
        text.replace(
            marker,
            marker.replace(
                "    def backward(self, x, t):\n",
                "    def backward(self, x, t):\n        print('hello from the manual mode', flush=True)\n",
            ),
            1,
        )
    )
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["manual"], batch_sizes=[64])
    assert jobs(snakemake(tmp_path, cfg, "results/runs/cpu/mlp-16-16/manual/bs64/r0.csv", repo=repo)) == ["train"]
    log = (tmp_path / "logs/train/cpu/mlp-16-16/manual/bs64_r0.log").read_text()
    assert "hello from the manual mode" in log and "epoch 2/2" in log
