"""The results folder at its edges: a disk with no space at all, folders that cannot be written,
a run whose files were deleted to redo it, a project moved with its results. Each ends with one
line naming the cause and the fix (or redoes the run, or nothing), loses nothing, and a plain
rerun completes."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, job_stats, jobs, own_workdir, snakemake, tiny_config

RUN = "results/runs/cpu/mlp-16-16/module/bs64/r0.csv"


def smk(workdir: Path, config: Path, *args, prefix=()):
    """The real snakemake on this repository in `workdir`, its config file elsewhere (a full disk
    cannot hold it), behind `prefix` (a command that runs it with fewer rights)."""
    cmd = [*prefix, sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    cmd += ["--directory", str(workdir), "--configfile", str(config), "--cores", "2", *args]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900)


@pytest.fixture
def full_disk(tmp_path):
    """A 4 MiB file system (tmpfs) filled to the last byte."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root): a disk with no space needs a real full disk")
    with open(disk / "fill", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def test_a_disk_with_no_space_at_all_is_one_line_and_a_rerun_after_freeing_it_completes(mirror, full_disk, tmp_path):
    url, md5 = mirror
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(url, md5, devices=["cpu"])))
    proc = smk(full_disk, config, "download_mnist")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "Logging error" not in out and "Traceback" not in out, out
    (line,) = [ln for ln in out.splitlines() if "no space left" in ln]
    assert line.startswith(f"no space left on the disk of {full_disk} (0 bytes free): free some space there")
    assert not (full_disk / "results").exists()
    (full_disk / "fill").unlink()
    smk(full_disk, config, "download_mnist", prefix=()).check_returncode()
    assert len(list((full_disk / "results/data/MNIST/raw").glob("*-ubyte"))) == 4


def without_root_rights():
    """A command prefix under which permission bits hold: as root (which ignores them), drop the
    capabilities that override them; as anyone else, nothing."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permission bits cannot be made to hold here")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner")


def read_only_mount(folder: Path) -> tuple:
    """A command prefix that runs a command with `folder` mounted read-only (a bind mount in a
    mount namespace of its own: nothing outside it sees the change)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no mount namespace can be made here (unshare -m)")
    mount = f'mount --bind "{folder}" "{folder}" && mount -o remount,ro,bind "{folder}" && exec "$@"'
    return ("unshare", "-m", "sh", "-c", mount, "sh")


@pytest.mark.parametrize("how", ["no write permission", "read-only mount"])
def test_a_read_only_results_folder_is_one_line_and_loses_nothing(mirror, prepared, how):
    """Folders without write permission (their files writable), or a read-only mount (where the
    files are not writable either, and Snakemake would stop while it plans): the project's one
    line, first, in a run and in a dry run."""
    url, md5, wd = *mirror, prepared
    cfg = tiny_config(url, md5, devices=["cpu"], modes=["module"], batch_sizes=[64], epochs=1)
    snakemake(wd, cfg, RUN)
    before = (wd / RUN).read_bytes()
    folders = [Path(d) for d, _, _ in os.walk(wd / "results")] if how == "no write permission" else []
    prefix = without_root_rights() if folders else read_only_mount(wd / "results")
    for d in folders:
        d.chmod(0o555)
    try:
        (wd / "config.yaml").write_text(yaml.safe_dump(dict(cfg, epochs=2)))  # a change that retimes the run
        procs = [smk(wd, wd / "config.yaml", RUN, *dry, prefix=prefix) for dry in ((), ("-n",))]
    finally:
        for d in folders:
            d.chmod(0o755)
    for proc in procs:
        assert proc.returncode != 0
        out = proc.stdout + proc.stderr
        assert "Traceback" not in out and "PermissionError" not in out and "Protected" not in out, out
        (line,) = [ln for ln in out.splitlines() if "not writable" in ln]
        fix = "mount it writable" if how == "read-only mount" else "make it writable (chmod -R u+w results logs)"
        assert line.startswith(f"the folder {wd / 'results'} (and ") and f"is not writable: {fix} or run" in line
    assert (wd / RUN).read_bytes() == before  # nothing lost
    assert "train" in jobs(snakemake(wd, dict(cfg, epochs=2), RUN))  # writable again: a plain rerun completes


def test_a_run_whose_files_were_deleted_is_redone_by_a_plain_rerun(cpu_pipeline, tmp_path):
    repo, _, cfg, _ = cpu_pipeline
    wd = own_workdir(cpu_pipeline, tmp_path)
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    run = wd / "results/runs/cpu/mlp-16-16/module/bs16/r0"
    started = pd.read_csv(f"{run}.csv")["start_utc"].iloc[0]
    for ext in ("csv", "json"):
        Path(f"{run}.{ext}").unlink()
    proc = snakemake(wd, cfg, repo=repo)
    assert jobs(proc).count("train") == 1 and "aggregate" in jobs(proc)
    assert Path(f"{run}.csv").exists() and Path(f"{run}.json").exists()
    again = pd.read_csv(wd / "results/summary/runs.csv")
    assert len(again) == len(runs)
    row = again[(again["mode"] == "module") & (again["batch_size"] == 16) & (again["repeat"] == 0)]
    assert row["start_utc"].iloc[0] != started  # the summary holds the new run, not the deleted one


def test_a_project_moved_or_cloned_anew_with_its_results_plans_nothing(cpu_pipeline, tmp_path):
    """The workflow elsewhere, every file of it written just now (a fresh clone's checkout), and
    the results with Snakemake's records copied beside it, file times kept (as `mv` or `cp -a`):
    nothing is planned, and a changed setting still retimes the runs."""
    repo, _, cfg, _ = cpu_pipeline
    clone = tmp_path / "clone"
    shutil.copytree(repo, clone, ignore=shutil.ignore_patterns("__pycache__"))
    now = time.time()
    for f in clone.rglob("*"):
        os.utime(f, (now, now))
    wd = own_workdir(cpu_pipeline, tmp_path)
    assert jobs(snakemake(wd, cfg, "-n", repo=clone)) == []
    planned = job_stats(snakemake(wd, dict(cfg, epochs=cfg["epochs"] + 1), "-n", repo=clone))
    assert planned["train"] == len(list((wd / "results/runs").rglob("*.csv"))), planned
