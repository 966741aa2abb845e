"""Faults a user meets: a corrupt intermediate, a changed mirror list, a full disk, an interrupt.
Each ends with one line naming the cause and the fix, leaves the results consistent, and a plain
rerun completes."""

import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import as_another_machine, closed_port, jobs, make_tensors, own_workdir, snakemake, tiny_config
from mnistbench import BenchError, files
from mnistbench.data import download, preload, synthetic
from mnistbench.jobs import INTERRUPTED
from mnistbench.measure import slot
from mnistbench.train import kernel, needs, trainer

PKG = str(Path(preload.__file__).parents[2])
RUN = "results/runs/cpu/mlp-16-16/module/bs64/r0.csv"


def test_a_truncated_tensor_file_is_an_input_error_and_is_rebuilt(mirror, prepared):
    url, md5, tmp_path = *mirror, prepared
    cfg = tiny_config(url, md5, modes=["module"], batch_sizes=[64], epochs=1)
    assert "preload" not in jobs(snakemake(tmp_path, cfg, RUN))
    pt = tmp_path / "results/preload/mnist.pt"
    pt.write_bytes(pt.read_bytes()[: pt.stat().st_size // 2])
    # Read directly (as a job would): one line naming the file and the fix.
    with pytest.raises(BenchError, match=r"cannot read the preloaded data .*mnist.pt .*rerun the same snakemake"):
        preload.load_tensors(pt, "cpu")
    # A dry run says so and changes nothing; so does a run with nothing to do (nothing reads it).
    truncated = pt.read_bytes()
    proc = snakemake(tmp_path, cfg, "-n")
    assert "does not match its checksum" in proc.stderr and pt.read_bytes() == truncated
    proc = snakemake(tmp_path, cfg, RUN)
    assert "a run with nothing to do leaves it" in proc.stderr and jobs(proc) == [] and pt.read_bytes() == truncated
    # A run with a job to do makes it again first, from the downloaded files, in one line; the
    # same bytes, so the run made from it stands (no retrain).
    (before,) = csv.DictReader(open(tmp_path / RUN))  # a real CSV reader: the machine holds commas
    other = RUN.replace("/r0.", "/r1.")
    proc = snakemake(tmp_path, cfg, RUN, other)
    assert jobs(proc) == ["train"] and files.intact(pt, tmp_path / "results/preload/mnist.pt.sha256")
    assert (
        "did not match its checksum (a truncated or edited file): made again from the downloaded files; the same "
        "data, so the runs made from it stand" in proc.stderr
    )
    assert list(csv.DictReader(open(tmp_path / RUN))) == [before] and before["status"] == "ok"
    (row,) = csv.DictReader(open(tmp_path / other))
    assert row["status"] == "ok"
    # Deleted (as a user fixes a file they think corrupt): the same, in words of its own. The
    # checksum file stands for the tensors as the runs' input, so no run is planned for it.
    pt.unlink()
    proc = snakemake(tmp_path, cfg, RUN, other, "-n")
    assert "results/preload/mnist.pt is missing: a run with a job to do makes it again" in proc.stderr
    assert jobs(proc) == [] and not pt.exists()
    for ext in ("csv", "json"):  # a run to redo, so that the run has a job to do
        Path(tmp_path / other).with_suffix(f".{ext}").unlink()
    proc = snakemake(tmp_path, cfg, RUN, other)
    assert jobs(proc) == ["train"] and files.intact(pt, tmp_path / "results/preload/mnist.pt.sha256")
    assert "mnist.pt was missing: made again from the downloaded files; the same data, so the runs made" in proc.stderr
    assert list(csv.DictReader(open(tmp_path / RUN))) == [before]
    # A typo in an md5 is one line before any job, and deletes nothing: corrected, nothing is
    # downloaded, preloaded or retrained again.
    name = "t10k-labels-idx1-ubyte.gz"
    typo = dict(cfg, mnist=dict(cfg["mnist"], md5=dict(md5, **{name: "0" * 32})))
    raw = sorted((tmp_path / "results/data/MNIST/raw").iterdir())
    proc = snakemake(tmp_path, typo, RUN, check=False)
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("config key `")]
    assert proc.returncode != 0 and line.startswith(f"config key `mnist.md5.{name}`: {'0' * 32} is not the md5 of")
    assert "downloaded and verified earlier (a typo?): correct it" in line
    assert sorted((tmp_path / "results/data/MNIST/raw").iterdir()) == raw
    assert jobs(snakemake(tmp_path, cfg, RUN, "results/preload/mnist.pt", "-n")) == []


def test_a_changed_mirror_list_reruns_nothing(mirror, prepared):
    """The data downloaded from the loopback mirror stays when the list names only a dead one."""
    url, md5, tmp_path = *mirror, prepared
    assert "download_mnist" not in jobs(snakemake(tmp_path, tiny_config(url, md5), "download_mnist", "-n"))
    dead = dict(mirrors=[f"http://127.0.0.1:{closed_port()}/"], md5=md5)
    proc = snakemake(tmp_path, tiny_config(url, md5, mnist=dead), "download_mnist")
    assert "download_mnist" not in jobs(proc)
    assert len(list((tmp_path / "results/data/MNIST/raw").glob("*-ubyte"))) == 4


def test_verified_archives_are_used_before_any_mirror(tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=50, n_test=20)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    raw = tmp_path / "d/MNIST/raw"
    for p in raw.glob("*-ubyte"):  # what Snakemake deletes before it reruns the download
        p.unlink()
    download.download(tmp_path / "d", [f"http://127.0.0.1:{closed_port()}/"], md5, log=lambda m: None)
    assert preload.load_raw(tmp_path / "d")["train_x"].shape == (50, 784)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB file system (tmpfs): room for a few small files, not for MNIST."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root): the full-disk cases need a real full disk")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def test_a_full_disk_during_download_names_the_path(tiny_disk, tmp_path):
    md5 = synthetic.write(tmp_path / "m", n_train=200, n_test=50)
    # The folder the files go to, never the mirror's file that was being copied.
    with pytest.raises(BenchError) as e:
        download.download(tiny_disk, [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    assert str(e.value) == files.full_disk(tiny_disk / "MNIST/raw")
    assert "put results/ on a bigger disk" in str(e.value)
    assert not [p for p in (tiny_disk / "MNIST/raw").iterdir()]  # nothing half-written


JOB = """
import sys, types
from mnistbench import files
from mnistbench.jobs import job
with job(types.SimpleNamespace(log=[sys.argv[1]])) as log:
    files.write_text(sys.argv[2], "x" * 200_000)
"""


def test_a_full_disk_during_a_job_is_one_line(tiny_disk, tmp_path):
    out = tiny_disk / "summary.md"
    proc = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path / "job.log"), str(out)],
        env=dict(os.environ, PYTHONPATH=PKG),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line == f"error: {files.full_disk(out)}"
    assert not list(tiny_disk.iterdir())  # no partial output, no temporary file


WAIT = """
import sys, time, types
from mnistbench.jobs import job
with job(types.SimpleNamespace(log=[sys.argv[1]])) as log:
    log("started")
    time.sleep(60)
    log("finished")
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])  # what Ctrl-C and Snakemake send
def test_a_signalled_job_says_interrupted_in_one_line(tmp_path, sig):
    # Started with SIGINT ignored, as a shell starts a background command: the job still stops.
    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT, str(tmp_path / "job.log")],
        env=dict(os.environ, PYTHONPATH=PKG),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.stderr.readline().strip() == "started"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert err.splitlines() == [INTERRUPTED] and proc.returncode == 130
    assert "finished" not in (tmp_path / "job.log").read_text()


def test_an_interrupt_of_snakemake_alone_stops_the_run(mirror, prepared):
    """SIGINT to the Snakemake process only (not its process group): the running train job stops
    (its warm worker's run with it) and writes nothing; a plain rerun completes."""
    url, md5, tmp_path = *mirror, prepared
    cfg = tiny_config(url, md5, modes=["seed"], batch_sizes=[1], train_samples=256, epochs=40)
    run = "results/runs/cpu/mlp-16-16/seed/bs1/r0.csv"
    log = tmp_path / "logs/train/cpu/mlp-16-16/seed/bs1_r0.log"
    (tmp_path / "config.yaml").write_text(__import__("yaml").safe_dump(cfg))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(Path(PKG).parents[1] / "Snakefile")]
    cmd += ["--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", run]
    smk = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (log.exists() and "epoch 1/" in log.read_text()):
        assert time.monotonic() < deadline and smk.poll() is None, smk.communicate()
        time.sleep(0.1)
    smk.send_signal(signal.SIGINT)
    _, err = smk.communicate(timeout=120)
    assert smk.returncode != 0
    assert "Traceback" not in err, err
    time.sleep(1)
    assert not (tmp_path / run).exists() and "epoch 40/40" not in log.read_text()
    assert INTERRUPTED in log.read_text().splitlines()
    snakemake(tmp_path, cfg, run)  # a plain rerun completes (no IncompleteFilesException)
    assert (tmp_path / run).exists()


def test_a_compiler_that_does_not_run_leaves_the_kernel_out_with_its_message(monkeypatch):
    monkeypatch.setenv("CC", "/bin/false")
    assert needs.why_not("kernel", "cpu") == "kernel needs a C compiler that runs (/bin/false --version: exit status 1)"


def test_a_compiler_that_cannot_build_the_kernel_makes_its_runs_rows_that_say_why(tmp_path, monkeypatch):
    """Whether kernel.c builds is the train job's to find (the Snakefile asks only whether the
    compiler runs, and builds nothing while it plans): its runs are `unsupported` rows naming the
    compiler's error, not failed jobs."""
    cc = tmp_path / "oldcc"
    cc.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "oldcc 1.0" && exit 0\necho "kernel.c:1: error: no vectors" >&2\nexit 1\n'
    )
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a cache of its own, where no build of kernel.c lies
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert needs.why_not("kernel", "cpu") is None
    tensors = make_tensors(tmp_path, 64, 16)
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=64, test_samples=16, warmup_steps=1, epochs=1, retime=0)
    row, _ = trainer.train(cfg, tensors, "cpu", "mlp-16-16", "kernel", 8, 0, log=lambda m: None)
    assert row["status"] == "unsupported" and row["message"].startswith(f"kernel: {cc} could not build kernel.c"), row
    assert "error: no vectors" in row["message"], row["message"]


@pytest.mark.skipif(kernel.compiler() is None, reason="no C compiler to build the kernel")
def test_the_compiler_is_a_rerun_trigger_of_kernel_runs(mirror, prepared, monkeypatch):
    url, md5, tmp_path = *mirror, prepared
    cfg = tiny_config(url, md5, modes=["module", "kernel"], batch_sizes=[64], epochs=1)
    runs = ["results/runs/cpu/mlp-16-16/kernel/bs64/r0.csv", "results/runs/cpu/mlp-16-16/module/bs64/r0.csv"]
    snakemake(tmp_path, cfg, *runs)
    monkeypatch.setenv("CC", "/bin/false")  # kernel pairs leave the grid; nothing else reruns
    planned = jobs(snakemake(tmp_path, cfg, "-n"))
    assert "aggregate" in planned and "train" not in planned
    other = tmp_path / "other-cc"
    other.write_text(f'#!/bin/sh\nexec {kernel.compiler()[0]} "$@"\n')
    other.chmod(0o755)
    monkeypatch.setenv("CC", str(other))  # another compiler: the kernel runs, and only they, rerun
    proc = snakemake(tmp_path, cfg, "-n", *runs)
    assert jobs(proc) == ["train"] and "cpu/mlp-16-16/kernel/bs64/r0.csv" in proc.stdout


def test_the_timed_slot_is_one_file_for_every_user(monkeypatch):
    monkeypatch.delenv("MNISTBENCH_TIMED_SLOT")  # the test processes' own (conftest.py)
    assert slot._slot_path().parent == Path("/tmp") and str(os.getuid()) not in slot._slot_path().name


def test_the_timed_slot_never_follows_a_planted_link(tmp_path, monkeypatch):
    lock, victim = tmp_path / "slot.lock", tmp_path / "victim"
    victim.write_text("keep me")
    lock.symlink_to(victim)
    monkeypatch.setattr(slot, "_slot_path", lambda: lock)
    with pytest.raises(BenchError, match=r"slot.lock cannot be opened safely .*remove it and rerun"):
        with slot.timed_slot(log=lambda m: None):
            pass
    assert victim.read_text() == "keep me"


def test_the_timed_slot_is_open_to_every_user_whatever_the_umask(tmp_path, monkeypatch):
    lock = tmp_path / "slot.lock"
    monkeypatch.setattr(slot, "_slot_path", lambda: lock)
    old = os.umask(0o077)
    try:
        with slot.timed_slot(log=lambda m: None):
            assert slot.busy()
    finally:
        os.umask(old)
    assert lock.stat().st_mode & 0o777 == 0o666 and not slot.busy()


def test_a_refused_aggregate_leaves_no_figures_or_fits_of_older_runs(cpu_pipeline, tmp_path):
    import pandas as pd

    repo, _, cfg, _ = cpu_pipeline
    wd = own_workdir(cpu_pipeline, tmp_path)  # a finished run whose outputs this test may remove
    made = ["results/summary.md", "results/summary/fits.csv", "results/figures/ladder.png"]
    assert all((wd / f).exists() for f in made)
    # Another machine's runs, made with other settings.
    runs = as_another_machine(pd.read_csv(wd / "results/summary/runs.csv"), "other-box")
    epochs = f'"epochs": {cfg["epochs"]}'
    runs["settings"] = [s.replace(epochs, '"epochs": 99') for s in runs["settings"]]
    assert '"epochs": 99' in runs["settings"][0]
    (tmp_path / "other").mkdir()
    runs.to_csv(tmp_path / "other/runs.csv", index=False)
    proc = snakemake(wd, dict(cfg, merge_runs=[str(tmp_path / "other/runs.csv")]), check=False, repo=repo)
    assert proc.returncode != 0
    (line,) = sorted({ln for ln in proc.stderr.splitlines() if ln.startswith("error:")})
    assert "different settings" in line and "`epochs` differs" in line
    assert not [f for f in made + ["results/summary/runs.csv"] if (wd / f).exists()]
    rerun = snakemake(wd, cfg, repo=repo)  # without that machine, a plain rerun completes
    assert all((wd / f).exists() for f in made) and "train" not in jobs(rerun)
