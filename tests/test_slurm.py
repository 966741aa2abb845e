"""The pipeline through `--profile profiles/slurm` on a real multi-node Slurm (tests/slurm/harness.sh):
five identical cpu nodes and two GPU nodes of different GRES types (t4, a100; fake GPUs), each node
a slurmd in its own network and UTS namespace on this machine.

One cluster for the module, and the Snakemake runs every test reads (fixture `runs`): a cpu grid
through Slurm (its repeats side by side on different cpu nodes), the same grid locally, the cuda
jobs of two GPU models, and the README's Slurm command as written. Slurm's own record of every job (sacct: node, partition, requested and
allocated TRES, state, the plugin's `rule_<rule>_wildcards_...` comment) is what the tests assert on.
The cluster starts in a fresh state folder before the first test and stops after the last (the
harness signals only the PIDs in its own PID files and deletes only the namespaces and links it
made; the teardown checks that each of them is gone). The jobs read tiny synthetic MNIST from an
HTTP mirror on the cluster's bridge address, the only address of this machine the nodes reach.

Where the cluster cannot be built (no package registry, not root, not Debian, no network
namespaces), the harness exits 77 and these tests skip with its reason; on CI (CI=true) they fail
instead.
"""

import functools
import http.server
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import DATA, REPO, QuietHandler, tiny_config, with_data
from mnistbench.data import synthetic
from mnistbench.measure import machines
from mnistbench.report import summary, words

HARNESS = REPO / "tests" / "slurm" / "harness.sh"
CPU_NODES = ["cpu1", "cpu2", "cpu3", "cpu4", "cpu5"]
GPU_NODE = {"t4": "gpu1", "a100": "gpu2"}  # GRES type -> the node that has it (harness.sh)
GPU_MODELS = list(GPU_NODE)
DAEMONS = ["munged", "mariadbd", "slurmdbd", "slurmctld"] + [f"slurmd-{n}" for n in CPU_NODES + list(GPU_NODE.values())]
CPU_THREADS = 1  # each train job asks Slurm for one core (--cpus-per-task=1): light on a 2-core runner
MODES = ["module"]
BATCH_SIZES = [16, 64]
REPEATS = 2
# The grid's timed jobs (train, and profile) run side by side (timed_jobs lifted), each with a
# whole node (slurm.exclusive): no more of them than cpu nodes, so every repeat gets a node of its own.
TRAIN_JOBS = len(MODES) * len(BATCH_SIZES) * REPEATS
TIMED_JOBS = TRAIN_JOBS + 1
assert TIMED_JOBS <= len(CPU_NODES)
CUDA_TARGETS = {m: f"results/runs/cuda@{m}/mlp-16-16/module/bs16/r0.csv" for m in GPU_MODELS}
CUDA_LINE = "CUDA not available on this host for device 'cuda'"
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL"}
SACCT_FIELDS = ["JobID", "JobName", "NodeList", "Partition", "State", "ExitCode", "ReqTRES", "AllocTRES", "Comment"]
# Synthetic cuda runs for the two-machine analysis: a GPU of another node type.
GPU_MACHINE = "Intel Xeon Platinum 8480+, 8 threads; NVIDIA A100-SXM4-40GB, 40 GiB, driver 550.54, CUDA 12.4; torch {}"

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------ cluster ---
class Cluster:
    def __init__(self, statedir: Path):
        self.statedir = statedir
        # Nothing from an outer Slurm (e.g. pytest itself inside a Slurm job) may leak into ours.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = str(statedir / "etc" / "slurm.conf")

    @property
    def addr(self) -> str:
        """The address the nodes reach this machine's root namespace at (the harness's bridge)."""
        m = re.search(r"^export HARNESS_ADDR=(\S+)$", (self.statedir / "env").read_text(), re.M)
        assert m, "the harness wrote no HARNESS_ADDR"
        return m.group(1)

    def pids(self) -> dict:
        """name -> PID of the daemons this harness started (from its PID files), alive or not."""
        found = {}
        for name in DAEMONS:
            f = self.statedir / "run" / ("munge/munged.pid" if name == "munged" else f"{name}.pid")
            if f.is_file() and f.read_text().strip().isdigit():
                found[name] = int(f.read_text().strip())
        return found

    def net(self) -> list:
        """The namespaces and links the harness made (its record, STATEDIR/net), as 'KIND NAME'."""
        f = self.statedir / "net"
        return f.read_text().splitlines() if f.is_file() else []

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
                print(f"sacct of run {run_id}:\n" + jobs.to_csv(sep="|", index=False))  # shown with -rP
                return jobs
            time.sleep(1)


def harness(action: str, statedir: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(HARNESS), action, str(statedir)], capture_output=True, text=True, timeout=timeout
    )


def alive(pid: int, name: str) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == name.split("-")[0]
    except OSError:
        return False


def exists(kind_name: str) -> bool:
    kind, name = kind_name.split()
    if kind == "netns":
        return name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


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
            started, net = cl.pids(), cl.net()
            stop = harness("stop", statedir, timeout=300)
            left = {name: pid for name, pid in started.items() if alive(pid, name)}
            assert stop.returncode == 0, f"harness stop failed ({stop.returncode}):\n{stop.stderr}"
            assert not left, f"daemons still running after harness stop: {left}\n{stop.stderr}"
            assert not [x for x in net if exists(x)], f"harness stop left namespaces or links: {net}\n{stop.stderr}"
            links = [p for p in Path("/etc/slurm").glob("*.conf") if p.is_symlink() and str(statedir) in os.readlink(p)]
            assert not links, f"harness stop left links into the state folder: {links}"
        shutil.rmtree(statedir, ignore_errors=True)  # ~200 MB, mostly MariaDB's files


@pytest.fixture(scope="module")
def node_mirror(cluster, tmp_path_factory):
    """(url, md5): tiny synthetic MNIST over HTTP on the cluster's bridge address, where the
    download job (on a cpu node, in its own network namespace) can reach it."""
    folder = tmp_path_factory.mktemp("node_mirror")
    md5 = synthetic.write(folder, n_train=600, n_test=200)
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer((cluster.addr, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{cluster.addr}:{server.server_port}/", md5
    server.shutdown()
    server.server_close()


# ----------------------------------------------------------------------------------- running ---
STATUS_CHECK = ["--slurm-init-seconds-before-status-checks", "2"]


def slurm_command(workdir: Path, cfg: dict, *args, config_name="config.yaml", command=None) -> list:
    """`snakemake --profile profiles/slurm` in `workdir`, as a user runs it (the workflow's default
    profile is picked up too), with a 2 s first status check instead of 10 s to keep the test short.
    `command`: the command line to run instead (from the repository's root), e.g. the README's."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / config_name).write_text(yaml.safe_dump(cfg))
    command = command or [sys.executable, "-m", "snakemake", "--profile", str(REPO / "profiles" / "slurm")]
    where = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    return [*command, *args, *where, "--configfile", str(workdir / config_name), *STATUS_CHECK]


def local_command(workdir: Path, cfg: dict) -> list:
    """The local run of conftest.snakemake (no profile, --cores 2), to start without waiting for it."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    where = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    return [sys.executable, "-m", "snakemake", *where, "--configfile", str(workdir / "config.yaml"), "--cores", "2"]


class Started:
    """A command running in the background (from the repository's root), its output in a file."""

    def __init__(self, cmd: list, env: dict, log: Path):
        self.cmd, self.log, self.t0 = cmd, log, time.time()
        with open(log, "w") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)

    def finish(self, timeout=900) -> tuple[int, str]:
        """(exit status, stdout + stderr) once it ends."""
        rc = self.proc.wait(timeout=timeout)
        self.seconds = self.log.stat().st_mtime - self.t0  # its last output, not when we looked
        return rc, self.log.read_text(errors="replace")

    def stop(self):
        """Interrupt it if it still runs (Snakemake then cancels its Slurm jobs)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def readme_command() -> list:
    """The Slurm example of README.md ("On a Slurm cluster"), as the argument list a shell makes."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## On a Slurm cluster\n+```sh\n(.*?)\n```", text, re.M | re.S)
    assert m, "README.md has no sh block under '## On a Slurm cluster'"
    lines = [line for line in m.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 1, f"the README's Slurm example should be one command: {lines}"
    return shlex.split(lines[0])


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
    """'rule_train_wildcards_cpu_mlp-16-16_module_64_r0' -> 'train' (the plugin's job comment)."""
    return re.match(r"rule_(.*?)(?:_wildcards_|$)", comment).group(1)


def result_files(root: Path) -> list:
    """The results (the local warm workers' private folder, .trainer, is none)."""
    found = (root / "results").rglob("*")
    return sorted(str(p.relative_to(root)) for p in found if p.is_file() and ".trainer" not in p.parts)


def failed_run(cl: Cluster, wd: Path, started: Started, t0: str) -> dict:
    """A run expected to fail on the CUDA-less nodes: its output, and sacct's rows of the jobs it
    submitted (None if it submitted none)."""
    rc, out = started.finish()
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    jobs = cl.final_jobs(run_id_of(out), t0, n=len(submitted)) if submitted else None
    return dict(wd=wd, cmd=started.cmd, returncode=rc, out=out, submitted=submitted, jobs=jobs)


@pytest.fixture(scope="module")
def runs(cluster, node_mirror, mirror, mnist_data, tmp_path_factory):
    """Every run the tests read, on one cluster, side by side: the Slurm runs mostly wait for
    their jobs and for the plugin's status checks.

    - cpu: the whole pipeline, devices [cpu], through Slurm. Its timed jobs (train, profile) run
      side by side (`--resources timed_jobs=...`, the README's way of lifting the limit), each
      with a node of its own (slurm.exclusive): the repeats of a combination run on two nodes.
    - local: the same config locally (`--cores 2`), from the session's downloaded and preloaded
      data (conftest.with_data).
    - cuda: only the cuda train jobs of one combination, once per GPU model (slurm.gpu_models),
      in a folder that holds the session's preloaded data (and mtime triggers keep the changed
      `devices` from re-running preload).
    - readme: README.md's Slurm example, run exactly as written from the repository's root, in a
      folder that holds the session's downloaded data only, with what a test must add: the folders,
      a config file with the tiny grid, the mirror and two GPU models, and the 2 s first status
      check.
    """
    url, md5 = node_mirror
    assert md5 == mirror[1]  # the loopback mirror's files, which conftest.mnist_data downloaded
    cfg = tiny_config(
        url,
        md5,
        devices=["cpu"],
        modes=MODES,
        batch_sizes=BATCH_SIZES,
        repeats=REPEATS,
        cpu_threads=CPU_THREADS,
        slurm=dict(exclusive=True),
    )
    # Not exclusive: a cuda job then leaves its node's other GPU to the README run's preload.
    two_models = dict(gpu_models=GPU_MODELS)
    logs = tmp_path_factory.mktemp("logs")
    names = ("slurm_cpu", "local_cpu", "cuda", "readme")
    wd, local, cuda_wd, readme_wd = (tmp_path_factory.mktemp(name) for name in names)
    # Only the cpu run downloads and preloads through Slurm; the others start from the session's
    # data, the README run without the preloaded tensors (it submits preload, to a GPU node).
    with_data(mnist_data, local)
    with_data(mnist_data, cuda_wd)
    with_data(mnist_data, readme_wd, parts=[p for p in DATA if p != "results/preload"])
    started = []

    def start(name, cmd):
        started.append(Started(cmd, cluster.env, logs / f"{name}.log"))
        return started[-1]

    try:
        t0 = since()
        cpu = start("cpu", slurm_command(wd, cfg, "--resources", f"timed_jobs={TIMED_JOBS}"))
        local_run = start("local", local_command(local, cfg))
        cuda_cfg = dict(cfg, devices=["cpu", "cuda"], slurm=two_models)
        args = [*CUDA_TARGETS.values(), "--rerun-triggers", "mtime", "--resources", f"timed_jobs={len(GPU_MODELS)}"]
        cuda = start("cuda", slurm_command(cuda_wd, cuda_cfg, *args, config_name="cuda.yaml"))
        cmd = slurm_command(readme_wd, dict(cfg, slurm=two_models), config_name="readme.yaml", command=readme_command())
        readme = start("readme", cmd)

        rc, out = cpu.finish()
        assert rc == 0, f"snakemake via Slurm failed ({rc}):\n{out[-10000:]}\n{cluster.logs()}"
        planned = job_stats(out)
        jobs = cluster.final_jobs(run_id_of(out), t0, n=sum(planned.values()) - planned["all"])
        tables = {name: pd.read_csv(wd / name) for name in result_files(wd) if name.endswith(".csv")}
        cpu_run = dict(cfg=cfg, wd=wd, out=out, jobs=jobs, files=result_files(wd), tables=tables, local=local)
        cuda_run, readme_run = failed_run(cluster, cuda_wd, cuda, t0), failed_run(cluster, readme_wd, readme, t0)
        rc, out = local_run.finish()
        assert rc == 0, f"the local run failed ({rc}):\n{out[-10000:]}"
        print("seconds per run: " + ", ".join(f"{p.log.stem} {p.seconds:.0f}" for p in started))
        yield dict(cpu=cpu_run, cuda=cuda_run, readme=readme_run)
    finally:
        for p in started:
            p.stop()


@pytest.fixture(scope="module")
def cpu_run(runs):
    return runs["cpu"]


@pytest.fixture(scope="module")
def cuda_run(runs):
    return runs["cuda"]


@pytest.fixture(scope="module")
def readme_run(runs):
    return runs["readme"]


# ------------------------------------------------------------------------------------- tests ---
def test_every_job_is_a_slurm_job_that_completed(cpu_run):
    wd, out, jobs = cpu_run["wd"], cpu_run["out"], cpu_run["jobs"]
    table = jobs.to_string()
    # Slurm ran exactly the jobs Snakemake planned, one Slurm job each, all but the target rule
    # `all` (which runs nothing), and every one of them to completion.
    planned = job_stats(out)
    assert planned["all"] == 1 and planned["train"] == TRAIN_JOBS, planned
    del planned["all"]
    assert Counter(jobs.Comment.map(rule_of)) == planned, table
    train = {c for c in jobs.Comment if rule_of(c) == "train"}
    expected = {
        f"rule_train_wildcards_cpu_mlp-16-16_{m}_{b}_r{r}" for m in MODES for b in BATCH_SIZES for r in range(REPEATS)
    }
    assert train == expected, table
    assert (jobs.State == "COMPLETED").all() and (jobs.ExitCode == "0:0").all(), table
    # Snakemake submitted each of them itself, and ran nothing locally but `all`.
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
    assert sorted(submitted, key=int) == sorted(jobs.JobID, key=int), out[-6000:]
    assert re.findall(r"^localrule (\w+):", out, re.M) == ["all"], out[-6000:]
    # Each job's Slurm log is kept (slurm-keep-successful-logs), in the folder of its rule.
    for jobid, comment in zip(jobs.JobID, jobs.Comment):
        log = slurm_log(wd, jobid).relative_to(wd / ".snakemake" / "slurm_logs")
        assert log.parts[0] == f"rule_{rule_of(comment)}", log


def test_cpu_only_run_asks_for_no_gpu_and_stays_on_cpu_nodes(cpu_run):
    jobs = cpu_run["jobs"]
    table = jobs.to_string()
    assert (jobs.Partition == "cpu").all(), table
    assert jobs.NodeList.isin(CPU_NODES).all(), table
    assert not jobs.ReqTRES.str.contains("gres/gpu").any(), table
    assert not jobs.AllocTRES.str.contains("gres/gpu").any(), table
    # A train job asks for exactly its threads as cores (--cpus-per-task); with slurm.exclusive it
    # is given the whole node.
    train = jobs[jobs.Comment.str.startswith("rule_train_")]
    assert len(train) == TRAIN_JOBS, table
    assert train.ReqTRES.str.contains(rf"(?:^|,)cpu={CPU_THREADS}(?:,|$)").all(), table


def test_repeats_on_two_identical_nodes_pool_into_one_row(cpu_run):
    """Each combination's two repeats ran on two different cpu nodes (Slurm's NodeList), each run
    recorded its node as its host, and as the nodes are identical hardware the repeats pool: one
    summary row per combination with both repeats, one fit per mode."""
    jobs, tables = cpu_run["jobs"], cpu_run["tables"]
    train = jobs[jobs.Comment.str.startswith("rule_train_")].copy()
    train[["mode", "batch_size", "repeat"]] = train.Comment.str.extract(r"_cpu_mlp-16-16_(\w+?)_(\d+)_r(\d+)$").values
    for _, g in train.groupby(["mode", "batch_size"]):
        assert len(g) == REPEATS and g.NodeList.nunique() == REPEATS, train.to_string()
    runs = tables["results/summary/runs.csv"]
    placed = {(m, str(b), str(r)): n for m, b, r, n in train[["mode", "batch_size", "repeat", "NodeList"]].values}
    ran = {(m, str(b), str(r)): h for m, b, r, h in runs[["mode", "batch_size", "repeat", "host"]].values}
    assert ran == placed, "each run's host is the node Slurm ran it on"
    assert runs.machine.nunique() == 1, runs.machine.unique()  # identical nodes: one machine
    summary = tables["results/summary/summary.csv"]
    assert len(summary) == len(MODES) * len(BATCH_SIZES), summary.to_string()
    assert (summary.n_runs == REPEATS).all() and (summary.n_ok == REPEATS).all(), summary.to_string()
    for hosts in summary.host:
        assert len(hosts.split(",")) == REPEATS and set(hosts.split(",")) <= set(CPU_NODES), summary.to_string()
    fits = tables["results/summary/fits.csv"]
    assert sorted(fits["mode"]) == sorted(MODES), fits.to_string()
    assert (fits.n_points == len(BATCH_SIZES) * REPEATS).all(), fits.to_string()


def test_outputs_match_a_local_run(cpu_run):
    """Same files, and every table with the same columns and rows (keys), as a local run."""
    local = cpu_run["local"]
    assert cpu_run["files"] == result_files(local)
    tables = [name for name in result_files(local) if name.endswith(".csv")]
    assert "results/summary/runs.csv" in tables
    for name in tables:
        slurm, here = cpu_run["tables"][name], pd.read_csv(local / name)
        assert list(slurm.columns) == list(here.columns), name
        if name != "results/summary/environment.csv":  # one row per host: a node each, here one
            assert len(slurm) == len(here), name
    env = cpu_run["tables"]["results/summary/environment.csv"]
    train = cpu_run["jobs"][cpu_run["jobs"].Comment.str.startswith("rule_train_")]
    assert sorted(env.host) == sorted(set(train.NodeList)) and env.n_runs.sum() == TRAIN_JOBS, env.to_string()
    runs = cpu_run["tables"]["results/summary/runs.csv"]
    keys = ["device", "mode", "batch_size", "repeat"]
    assert runs[keys].sort_values(keys).values.tolist() == (
        pd.read_csv(local / "results/summary/runs.csv")[keys].sort_values(keys).values.tolist()
    )
    assert (runs.status == "ok").all(), runs[keys + ["status", "message"]].to_string()
    assert (runs.threads == CPU_THREADS).all()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA: a cuda job would succeed")
def test_each_gpu_model_lands_on_its_node_and_fails_clearly(cuda_run):
    """One cuda train job per model of slurm.gpu_models, each asking for a GPU of its type
    (--gpus=<model>:1), given it on the node that has that type, and failing there (no CUDA on
    this machine) with the project's line."""
    wd, out, submitted, jobs = cuda_run["wd"], cuda_run["out"], cuda_run["submitted"], cuda_run["jobs"]
    assert cuda_run["returncode"] != 0, out[-6000:]
    assert len(submitted) == len(GPU_MODELS), (
        "expected exactly the cuda train job of each GPU model to be submitted"
        + (
            " (the submit host rejected `devices` itself: with a cluster executor only the job may check its device)"
            if not submitted and CUDA_LINE in out
            else ""
        )
        + f":\n{out[-6000:]}"
    )
    table = jobs.to_string()
    assert sorted(jobs.JobID, key=int) == sorted(submitted, key=int), table
    for model, node in GPU_NODE.items():
        job = jobs[jobs.Comment == f"rule_train_wildcards_cuda@{model}_mlp-16-16_module_16_r0"]
        assert len(job) == 1, table
        job = job.iloc[0]
        assert job.Partition == "gpu" and job.NodeList == node, table
        for tres in (job.ReqTRES, job.AllocTRES):
            assert re.search(r"(?:^|,)gres/gpu=1(?:,|$)", tres), table
            assert re.search(rf"(?:^|,)gres/gpu:{model}=1(?:,|$)", tres), table
            assert not re.search(rf"gres/gpu:(?!{model}=)", tres), table  # no GPU of the other type
        assert job.State == "FAILED" and job.ExitCode != "0:0", table
        # The reason is the project's one clear line: in the job's Slurm log, in the rule's log,
        # and (the profile's show-failed-logs) in Snakemake's own output on the submit host.
        assert CUDA_LINE in slurm_log(wd, job.JobID).read_text(errors="replace")
        assert CUDA_LINE in (wd / f"logs/train/cuda@{model}/mlp-16-16/module/bs16_r0.log").read_text()
        assert not list((wd / "results" / "runs" / f"cuda@{model}").glob("**/*.csv"))
    assert CUDA_LINE in out, out[-6000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA: preload would succeed")
def test_the_readme_example_runs_as_written(readme_run):
    """README.md's Slurm command, as written: Snakemake plans the grid with cpu_threads=8 and a
    cuda job per GPU model, and submits the first job that needs a GPU, preload (it times
    host->device copies), to the gpu partition with one GPU; on these CUDA-less nodes it fails
    there with the project's line, and nothing that needs its output is submitted."""
    cmd, out, jobs = readme_run["cmd"], readme_run["out"], readme_run["jobs"]
    command = readme_command()
    assert command[:3] == [".venv/bin/snakemake", "--profile", "profiles/slurm"], command
    assert "devices=[cpu,cuda]" in command, command
    assert cmd[: len(command)] == command, cmd  # what a test adds comes after it
    assert readme_run["returncode"] != 0, out[-6000:]
    planned = job_stats(out)
    grid = len(MODES) * len(BATCH_SIZES) * REPEATS
    assert planned["train"] == grid * (1 + len(GPU_MODELS)), planned  # cpu, and cuda once per model
    assert len(readme_run["submitted"]) == 1 and jobs is not None, out[-6000:]
    table = jobs.to_string()
    job = jobs.iloc[0]
    assert len(jobs) == 1 and job.Comment == "rule_preload", table
    assert job.Partition == "gpu" and job.NodeList in GPU_NODE.values(), table
    assert re.search(r"(?:^|,)gres/gpu=1(?:,|$)", job.ReqTRES), table
    assert job.State == "FAILED", table
    assert CUDA_LINE in slurm_log(readme_run["wd"], job.JobID).read_text(errors="replace")
    assert CUDA_LINE in out, out[-6000:]


def test_two_machines_give_speedups_a_crossover_and_a_headline_naming_both(cpu_run):
    """The cpu runs as the cluster wrote them (cpu nodes) and synthetic cuda runs of another node
    type (the test's GPUs are fake): the GPU is compared with the cpu nodes' machine, and the
    speedup and crossover tables and the headline name both machines and their hosts."""
    cpu = cpu_run["tables"]["results/summary/runs.csv"]
    torch_version = cpu.machine.iloc[0].split(machines.SEP)[-1].removeprefix("torch ")
    gpu_machine = GPU_MACHINE.format(torch_version)
    # Known step times on both sides (the rows' hosts and machines are the cluster's): what is
    # checked is which machines are compared and how they are named, so the numbers must not
    # depend on how busy this machine was. The cpu's line a + b·B; the GPU's has a tenth of its
    # cost per sample and the fixed cost that makes the two lines cross at the middle batch size.
    mid, (a, b) = sum(BATCH_SIZES) / 2, (500e-6, 20e-6)

    def timed(rows, seconds):
        blocks = [" ".join([f"{t:.9g}"] * 16) for t in seconds]  # steady steps: every block the median
        return rows.assign(
            step_time_median_s=seconds, step_time_blocks_s=blocks, samples_per_s=rows.batch_size / seconds
        )

    cpu = timed(cpu, a + b * cpu.batch_size)
    cuda = timed(
        cpu.assign(host="gpu2", device="cuda", machine=gpu_machine, device_name=machines.short(gpu_machine)),
        a + 0.9 * b * mid + 0.1 * b * cpu.batch_size,
    )
    runs = pd.concat([cpu, cuda], ignore_index=True)
    cpu_machine = cpu.machine.iloc[0]
    assert machines.basis(runs) == {gpu_machine: cpu_machine}
    empty_transfer = pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds", "gb_per_s"])
    prof, env = pd.DataFrame(columns=["host", "mode", "status"]), pd.DataFrame(columns=["host", "device"])
    cfg = {"quality": {"use": cpu_run["cfg"]["quality"]["use"]}}
    tables, found = summary.analyse(runs, empty_transfer, prof, env, cfg)
    place = f"{machines.short(gpu_machine)} on gpu2 vs {machines.short(cpu_machine)} on {machines.hostlist(cpu.host)}"
    spd = tables["speedup"][tables["speedup"]["kind"] == "device"]
    assert len(spd) == len(MODES) * len(BATCH_SIZES) and set(spd["place"]) == {place}, spd.to_string()
    cross = tables["crossover"]
    assert list(cross["place"]) == [place] * len(MODES), cross.to_string()
    assert (cross["verdict"] == "slower below, faster above").all(), cross.to_string()
    assert cross["crossover_batch_size"].between(*BATCH_SIZES).all(), cross.to_string()
    head = " ".join(words.sentences(found["headline"]))
    assert machines.short(gpu_machine) in head and machines.short(cpu_machine) in head, head
