"""The pipeline through `--profile profiles/slurm` on a real single-node Slurm (tests/slurm/harness.sh).

One cluster for the module: started in a fresh state folder before the first test, stopped after
the last (the harness signals only the PIDs in its own PID files; the teardown checks that each of
them is gone). Slurm's own record of every job (sacct: partition, requested and allocated TRES,
state, the plugin's `rule_<rule>_wildcards_...` comment) is what the tests assert on.

Where Slurm cannot be installed (no package registry, not root, not Debian), the harness exits 77
and these tests skip with its reason; on CI (CI=true) they fail instead.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, snakemake, tiny_config

HARNESS = REPO / "tests" / "slurm" / "harness.sh"
DAEMONS = ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"]
CPU_THREADS = 1  # each train job asks Slurm for one core (--cpus-per-task=1): light on a 2-core runner
MODES = ["manual", "module"]
BATCH_SIZES = [64]
CUDA_TARGET = "results/runs/cuda/module/bs8/r0.csv"
CUDA_LINE = "CUDA not available on this host for device 'cuda'"
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL"}
SACCT_FIELDS = ["JobID", "JobName", "Partition", "State", "ExitCode", "ReqTRES", "AllocTRES", "Comment"]

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------ cluster ---
class Cluster:
    def __init__(self, statedir: Path):
        self.statedir = statedir
        # Nothing from an outer Slurm (e.g. pytest itself inside a Slurm job) may leak into ours.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = str(statedir / "etc" / "slurm.conf")

    def pids(self) -> dict:
        """name -> PID of the daemons this harness started (from its PID files), alive or not."""
        found = {}
        for name in DAEMONS:
            f = self.statedir / "run" / ("munge/munged.pid" if name == "munged" else f"{name}.pid")
            if f.is_file() and f.read_text().strip().isdigit():
                found[name] = int(f.read_text().strip())
        return found

    def logs(self) -> str:
        """Tails of the daemons' logs, for failure messages."""
        out = []
        for f in sorted((self.statedir / "log").rglob("*.log")) + sorted((self.statedir / "log").glob("*.err")):
            lines = f.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {f}\n" + "\n".join(lines))
        return "\n".join(out)

    def sacct(self, run_id: str, since: str) -> pd.DataFrame:
        """Slurm's accounting record of every job named `run_id` (the plugin names all jobs of one
        Snakemake run with the run's UUID), one row per job allocation (-X)."""
        cmd = [
            "sacct",
            "-X",
            "-n",
            "--parsable2",
            "-a",
            "--name",
            run_id,
            "-S",
            since,
            "-E",
            "now",
            "-o",
            ",".join(SACCT_FIELDS),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=self.env)
        assert proc.returncode == 0, f"sacct failed: {proc.stderr}"
        rows = [line.split("|", len(SACCT_FIELDS) - 1) for line in proc.stdout.splitlines() if line.strip()]
        return pd.DataFrame(rows, columns=SACCT_FIELDS)

    def final_jobs(self, run_id: str, since: str, n: int, timeout=60) -> pd.DataFrame:
        """sacct's rows for the run once it shows `n` jobs, all in a final state (slurmctld reports
        to slurmdbd asynchronously, so the record may trail what Snakemake saw by a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.sacct(run_id, since)
            done = len(jobs) >= n and jobs.State.map(lambda s: s.split()[0] in FINAL_STATES).all()
            if done or time.monotonic() > deadline:
                return jobs
            time.sleep(1)


def harness(action: str, statedir: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(HARNESS), action, str(statedir)], capture_output=True, text=True, timeout=timeout
    )


def alive(pid: int, name: str) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == name
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster():
    # Not under tmp_path: munged runs as user munge and cannot enter pytest's 0700 tmp folders;
    # a short path also keeps MariaDB's socket path under the 107-byte limit.
    statedir = Path(tempfile.mkdtemp(prefix="mnb-slurm-", dir="/tmp"))
    cl = Cluster(statedir)
    start = None
    try:
        # A fresh CI machine installs the packages first (apt-get): allow for a slow mirror.
        start = harness("start", statedir, timeout=1500)
        if start.returncode == 77:
            lines = [line for line in start.stderr.splitlines() if line.strip()]
            reason = lines[-1].removeprefix("harness: SKIP: ") if lines else "harness exited 77"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI must run the Slurm tests, but the harness skipped: {reason}")
            pytest.skip(f"Slurm not available: {reason}")
        if start.returncode != 0:
            pytest.fail(f"harness start failed ({start.returncode}):\n{start.stdout}\n{start.stderr}\n{cl.logs()}")
        yield cl
    finally:
        if start is None or start.returncode != 77:
            started = cl.pids()
            stop = harness("stop", statedir, timeout=300)
            left = {name: pid for name, pid in started.items() if alive(pid, name)}
            assert stop.returncode == 0, f"harness stop failed ({stop.returncode}):\n{stop.stderr}"
            assert not left, f"daemons still running after harness stop: {left}\n{stop.stderr}"
            links = [p for p in Path("/etc/slurm").glob("*.conf") if p.is_symlink() and str(statedir) in os.readlink(p)]
            assert not links, f"harness stop left links into the state folder: {links}"
        shutil.rmtree(statedir, ignore_errors=True)  # ~200 MB, mostly MariaDB's files


# ----------------------------------------------------------------------------------- running ---
def slurm_snakemake(cl: Cluster, workdir: Path, cfg: dict, *args, config_name="config.yaml"):
    """`snakemake --profile profiles/slurm` in `workdir`, as a user runs it (the workflow's default
    profile is picked up too), with a 2 s first status check instead of 10 s to keep the test short.
    Returns (process, text of stdout + stderr)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / config_name).write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        *args,
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / config_name),
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--slurm-init-seconds-before-status-checks",
        "2",
    ]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900, env=cl.env)
    return proc, proc.stdout + proc.stderr


def run_id_of(out: str) -> str:
    m = re.search(r"SLURM run ID: ([0-9a-f-]{36})", out)
    assert m, f"no 'SLURM run ID' in the output of snakemake:\n{out[-6000:]}"
    return m.group(1)


def since() -> str:
    """sacct's start of the window: a minute before now (sacct's default is midnight, which a run
    near midnight would straddle)."""
    return (datetime.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")


def slurm_log(workdir: Path, jobid: str) -> Path:
    found = list((workdir / ".snakemake" / "slurm_logs").rglob(f"{jobid}.log"))
    assert len(found) == 1, f"Slurm log of job {jobid}: {found}"
    return found[0]


def job_stats(out: str) -> Counter:
    """Snakemake's own count of the jobs it is about to run, per rule (its 'Job stats' table)."""
    m = re.search(r"^Job stats:\n.*?\n-+\s+-+\n(.*?)^total\s", out, re.M | re.S)
    assert m, f"no 'Job stats' table in the output of snakemake:\n{out[-6000:]}"
    return Counter({rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", m.group(1), re.M)})


def rule_of(comment: str) -> str:
    """'rule_train_wildcards_cpu_module_64_0' -> 'train' (the plugin's job comment)."""
    return re.match(r"rule_(.*?)(?:_wildcards_|$)", comment).group(1)


@pytest.fixture(scope="module")
def cpu_run(cluster, mirror, tmp_path_factory):
    """The whole pipeline, devices [cpu], once through Slurm and once locally (same config)."""
    url, md5 = mirror
    cfg = tiny_config(url, md5, devices=["cpu"], modes=MODES, batch_sizes=BATCH_SIZES, cpu_threads=CPU_THREADS)
    wd = tmp_path_factory.mktemp("slurm_cpu")
    t0 = since()
    proc, out = slurm_snakemake(cluster, wd, cfg)
    assert proc.returncode == 0, f"snakemake via Slurm failed ({proc.returncode}):\n{out[-10000:]}\n{cluster.logs()}"
    planned = job_stats(out)
    jobs = cluster.final_jobs(run_id_of(out), t0, n=sum(planned.values()) - planned["all"])
    local = tmp_path_factory.mktemp("local_cpu")
    snakemake(local, cfg)
    return dict(cfg=cfg, wd=wd, out=out, jobs=jobs, local=local)


# ------------------------------------------------------------------------------------- tests ---
def test_every_job_is_a_slurm_job_that_completed(cpu_run):
    wd, out, jobs = cpu_run["wd"], cpu_run["out"], cpu_run["jobs"]
    table = jobs.to_string()
    # Slurm ran exactly the jobs Snakemake planned, one Slurm job each, all but the target rule
    # `all` (which runs nothing), and every one of them to completion.
    planned = job_stats(out)
    assert planned["all"] == 1 and planned["train"] == len(MODES) * len(BATCH_SIZES), planned
    del planned["all"]
    assert Counter(jobs.Comment.map(rule_of)) == planned, table
    train = {c for c in jobs.Comment if rule_of(c) == "train"}
    assert train == {f"rule_train_wildcards_cpu_{m}_{b}_0" for m in MODES for b in BATCH_SIZES}, table
    assert (jobs.State == "COMPLETED").all() and (jobs.ExitCode == "0:0").all(), table
    # Snakemake submitted each of them itself, and ran nothing locally but `all`.
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    assert sorted(submitted, key=int) == sorted(jobs.JobID, key=int), out[-6000:]
    assert re.findall(r"^localrule (\w+):", out, re.M) == ["all"], out[-6000:]
    # Each job's Slurm log is kept (slurm-keep-successful-logs), in the folder of its rule.
    for jobid, comment in zip(jobs.JobID, jobs.Comment):
        log = slurm_log(wd, jobid).relative_to(wd / ".snakemake" / "slurm_logs")
        assert log.parts[0] == f"rule_{rule_of(comment)}", log


def test_cpu_only_run_asks_for_no_gpu_and_stays_on_cpu_partition(cpu_run):
    jobs = cpu_run["jobs"]
    table = jobs.to_string()
    assert (jobs.Partition == "cpu").all(), table
    assert not jobs.ReqTRES.str.contains("gres/gpu").any(), table
    assert not jobs.AllocTRES.str.contains("gres/gpu").any(), table
    # A train job asks for exactly its threads as cores (--cpus-per-task).
    train = jobs[jobs.Comment.str.startswith("rule_train_")]
    assert len(train) == len(MODES) * len(BATCH_SIZES), table
    assert train.ReqTRES.str.contains(rf"(?:^|,)cpu={CPU_THREADS}(?:,|$)").all(), table


def test_outputs_match_a_local_run(cpu_run):
    """Same files, and every table with the same columns and rows (keys), as a local run."""
    wd, local = cpu_run["wd"], cpu_run["local"]

    def files(root):  # the results (the local warm workers' private folder, .trainer, is none)
        found = (root / "results").rglob("*")
        return sorted(str(p.relative_to(root)) for p in found if p.is_file() and ".trainer" not in p.parts)

    assert files(wd) == files(local)
    tables = [name for name in files(local) if name.endswith(".csv")]
    assert "results/summary/runs.csv" in tables
    for name in tables:
        slurm, here = pd.read_csv(wd / name), pd.read_csv(local / name)
        assert list(slurm.columns) == list(here.columns), name
        assert len(slurm) == len(here), name
    runs = pd.read_csv(wd / "results/summary/runs.csv")
    keys = ["device", "mode", "batch_size", "repeat"]
    assert runs[keys].sort_values(keys).values.tolist() == (
        pd.read_csv(local / "results/summary/runs.csv")[keys].sort_values(keys).values.tolist()
    )
    assert (runs.status == "ok").all(), runs[keys + ["status", "message"]].to_string()
    assert (runs.threads == CPU_THREADS).all()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA: a cuda job would succeed")
def test_cuda_job_goes_to_gpu_partition_with_a_gpu_and_fails_clearly(cluster, cpu_run):
    """Only the cuda train job (preload's output is there from the cpu run; mtime triggers keep the
    changed `devices` from re-running preload): Slurm records it on the gpu partition with one GPU
    requested and allocated, and it fails on this CUDA-less node with the project's line."""
    wd, cfg = cpu_run["wd"], dict(cpu_run["cfg"], devices=["cpu", "cuda"])
    t0 = since()
    proc, out = slurm_snakemake(cluster, wd, cfg, CUDA_TARGET, "--rerun-triggers", "mtime", config_name="cuda.yaml")
    assert proc.returncode != 0, out[-6000:]
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    assert len(submitted) == 1, (
        "expected exactly the cuda train job to be submitted"
        + (
            " (the submit host rejected `devices` itself: with a cluster executor only the job may check its device)"
            if not submitted and CUDA_LINE in out
            else ""
        )
        + f":\n{out[-6000:]}"
    )
    jobs = cluster.final_jobs(run_id_of(out), t0, n=1)
    table = jobs.to_string()
    assert len(jobs) == 1, table
    job = jobs.iloc[0]
    assert job.JobID == submitted[0], table
    assert job.Comment == "rule_train_wildcards_cuda_module_8_0", table
    assert job.Partition == "gpu", table
    assert re.search(r"(?:^|,)gres/gpu=1(?:,|$)", job.ReqTRES), table
    assert re.search(r"(?:^|,)gres/gpu=1(?:,|$)", job.AllocTRES), table
    assert job.State == "FAILED" and job.ExitCode != "0:0", table
    # The reason is the project's one clear line: in the job's Slurm log, in the rule's log, and
    # (the profile's show-failed-logs) in Snakemake's own output on the submit host.
    assert CUDA_LINE in slurm_log(wd, job.JobID).read_text(errors="replace")
    assert CUDA_LINE in (wd / "logs/train/cuda/module/bs8_r0.log").read_text()
    assert CUDA_LINE in out, out[-6000:]
    assert not list((wd / "results" / "runs" / "cuda").glob("**/*.csv"))
