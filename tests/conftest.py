"""Shared fixtures: a tiny learnable MNIST served over loopback HTTP, and a Snakemake runner."""

import collections
import contextlib
import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning, in the test processes and in every process they
# start (set before torch loads its OpenMP runtime, which reads it once). The suite's processes
# share the cores; a thread spinning at a barrier holds a core that another process has work for
# (the suite without the Slurm tests ran in 224-227 s this way against 249-292 s on a 2-core
# machine). No test times a step against a target, and a run lists the OMP_ variables it ran
# with in its record (`env`).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import yaml  # noqa: E402
from mnistbench.data import download, preload, synthetic  # noqa: E402
from snakemake_fork import Client  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FORKED = Client()  # this test process's Snakemake fork server (conftest.snakemake)


def pytest_collection_modifyitems(items):
    """`pytest -m fast`, the edit loop: every test that neither is marked slow nor runs Snakemake
    on the loopback mirror (every pipeline test reads its data from `mirror`).

    The suite runs in parallel processes (pytest-xdist, `-n auto` in pytest.ini); the shared
    pipeline (`cpu_pipeline`) is made once for all of them."""
    for item in items:
        if "slow" not in item.keywords and "mirror" not in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.fast)


def pytest_configure(config):
    """Each test process trains under its own timed-run slot (measure/slot.py): the slot keeps a
    machine's timed runs apart so that their timings are comparable, and the tests compare none
    across processes; one slot for the whole suite would make the processes wait on each other."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ["MNISTBENCH_TIMED_SLOT"] = f"/tmp/mnistbench-timed-test-{os.getuid()}-{os.getpid()}-{name}.lock"


def pytest_unconfigure(config):
    FORKED.close()
    with contextlib.suppress(OSError):
        os.unlink(os.environ["MNISTBENCH_TIMED_SLOT"])


# Modules whose tests share what their module-scoped fixtures make (one cluster, one finished
# pipeline, one run of the Triton interpreter, the pipeline over the users' modules): each runs
# whole in one test process, which makes it once (spread over two, both would make it).
WHOLE_MODULES = {"test_slurm.py", "test_pipeline.py", "test_persistent.py", "test_models.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's load balancing, test by test, except that a module of WHOLE_MODULES goes
    to one process with all its tests."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            module = nodeid.split("::", 1)[0]
            return module if Path(module).name in WHOLE_MODULES else nodeid

    return Scheduling(config, log)


@pytest.fixture(scope="session")
def mirror(tmp_path_factory):
    """(url, md5): the four gzip IDX files of a small synthetic MNIST on a loopback HTTP server."""
    folder = tmp_path_factory.mktemp("mirror")
    md5 = synthetic.write(folder, n_train=600, n_test=200)
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/", md5
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tensors(folder: Path, n_train: int, n_test: int) -> Path:
    """A preload tensor file of a small synthetic MNIST, made by the real download and preload code."""
    md5 = synthetic.write(folder / "m", n_train=n_train, n_test=n_test)
    download.download(folder / "d", [f"file://{folder}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(folder / "d"), folder / "t.pt")
    return folder / "t.pt"


def train_request(cfg: dict, data_path, mode: str, batch_size: int, **more) -> dict:
    """What a train job asks a warm worker (worker.REQUEST): one run of the seed's network, one
    model at a time, repeat 0 unless `more` says otherwise."""
    req = dict(cfg=cfg, data_path=str(data_path), device="cpu", network="mlp-16-16", mode=mode)
    return dict(req, batch_size=batch_size, **dict(dict(repeat=0, models_at_once=1), **more))


def tiny_config(url, md5, **overrides) -> dict:
    cfg = dict(
        devices="auto",
        modes=["manual", "autograd", "module"],
        batch_sizes=[8, 64],
        repeats=1,
        epochs=2,
        train_samples=512,
        test_samples=200,
        warmup_steps=2,
        min_timed_s=0,  # tiny grids: the extra timing epochs are tested on their own
        # Every timing verdict usable and no retime: a test of what the pipeline does must neither
        # wait for a busy machine to settle nor lose a combination to a noisy timing (the retime
        # and the verdicts are tested on their own, in test_quality.py).
        retime=0,
        quality=dict(use=["ok", "noisy", "few_steps"]),
        mnist=dict(mirrors=[url], md5=md5),
    )
    cfg.update(overrides)
    return cfg


def snakemake(
    workdir: Path, cfg: dict, *args, check=True, repo=REPO, python=sys.executable
) -> subprocess.CompletedProcess:
    """Run the real snakemake on the repository's Snakefile (or a copy's) in `workdir` with config
    `cfg`: `python -m snakemake ...`, or with this interpreter, the same command line in a process
    forked from one that has imported Snakemake already (tests/snakemake_fork.py)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    argv = [
        "--snakefile",
        str(repo / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--cores",
        "2",
        *args,
    ]
    if str(python) == sys.executable:
        proc = FORKED.run(argv, cwd=workdir, timeout=1800)
    else:
        cmd = [str(python), "-m", "snakemake", *argv]
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


def job_stats(proc) -> collections.Counter:
    """Snakemake's own count of the jobs a run ran (or, with -n, would run), per rule: its 'Job
    stats' table; empty when there was nothing to do."""
    out = proc.stdout + proc.stderr
    m = re.search(r"^Job stats:\n.*?\n-+\s+-+\n(.*?)^total\s", out, re.M | re.S)
    if m is None:
        assert "Nothing to be done" in out, f"no 'Job stats' table in the output of snakemake:\n{out[-6000:]}"
        return collections.Counter()
    return collections.Counter({rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", m.group(1), re.M)})


def jobs(proc) -> list:
    """The rules of the jobs a snakemake run ran (or, with -n, would run), one entry per job."""
    return sorted(job_stats(proc).elements())


def copy_repo(dest: Path) -> Path:
    """A copy of the workflow, for tests that edit its code."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "environment.yml", "workflow", "config", "profiles"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=skip)
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def shared_folder(tmp_path_factory) -> Path:
    """A folder every test process of this session sees: pytest's base temporary folder, or with
    parallel processes (pytest-xdist) the folder that holds each process's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


DATA = ("results/data", "results/preload", ".snakemake/metadata")


@pytest.fixture(scope="session")
def mnist_data(mirror, tmp_path_factory) -> Path:
    """A working directory that holds the loopback mirror's data, downloaded and preloaded for
    the cpu by the workflow's own rules, made once for the whole session (as `finished_pipeline`):
    the pipelines of the tests start from it (`with_data`) instead of downloading again."""
    root = shared_folder(tmp_path_factory)
    wd = root / "mnist_data"
    with open(root / "mnist_data.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (wd / "done").exists():
            url, md5 = mirror
            snakemake(wd, tiny_config(url, md5, devices=["cpu"]), "results/preload/mnist.pt")
            (wd / "done").touch()
    return wd


def with_data(mnist_data: Path, wd: Path, parts=DATA) -> Path:
    """wd, holding the session's downloaded and preloaded data with Snakemake's records of them
    (file times kept), so that a run there finds them up to date. Its config must name the same
    mirror data (`tiny_config`: the synthetic files, from any mirror) and devices (cpu). `parts`:
    fewer of DATA, e.g. without results/preload for a run that must preload itself."""
    for part in parts:
        shutil.copytree(mnist_data / part, wd / part, symlinks=True)
    return wd


@pytest.fixture(scope="session")
def finished_pipeline(mirror, mnist_data, tmp_path_factory):
    """The shared pipeline of `cpu_pipeline`, made once for the whole session: the first test
    process that needs it makes it while holding a lock; the others wait and read what it made."""
    root = shared_folder(tmp_path_factory)
    made = root / "cpu_pipeline.json"
    with open(root / "cpu_pipeline.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            url, md5 = mirror
            repo, wd = copy_repo(root / "cpu_pipeline_repo"), with_data(mnist_data, root / "cpu_pipeline")
            cfg = tiny_config(
                url, md5, devices=["cpu"], modes=["manual", "module", "dataloader"], batch_sizes=[4, 16, 64]
            )
            proc = snakemake(wd, cfg, repo=repo)
            snakemake(wd, cfg, "--report", "results/report.html", repo=repo)
            run = dict(repo=str(repo), wd=str(wd), cfg=cfg, stdout=proc.stdout, stderr=proc.stderr)
            made.write_text(json.dumps(run))
    run = json.loads(made.read_text())
    proc = subprocess.CompletedProcess([], 0, run["stdout"], run["stderr"])
    return Path(run["repo"]), Path(run["wd"]), run["cfg"], proc, root / "cpu_pipeline.edits"


@pytest.fixture
def cpu_pipeline(finished_pipeline):
    """(repo, workdir, config, process): one finished pipeline with its report, cpu only, three
    modes and three batch sizes, from a copy of the workflow; shared by every test that reads or
    replans a finished run, in every test process. A test that edits its code restores it
    (`edited`), while no other test uses the pipeline; one that adds results or changes outputs
    works in `own_workdir`."""
    global _readers
    with open(finished_pipeline[4], "w") as readers:
        fcntl.flock(readers, fcntl.LOCK_SH)  # taken by every test that uses it; an edit waits for them
        _readers = readers
        try:
            yield finished_pipeline[:4]
        finally:
            _readers = None


_readers = None  # this process's shared lock on the pipeline, while a test uses it


def as_another_machine(runs, host: str):
    """This run's rows as another machine's own runs: renamed, and started an hour later (a copy
    under another name alone is refused, aggregate.run_keys)."""
    import pandas as pd

    out = runs.assign(host=host)
    for c in ("start_utc", "end_utc"):
        t = pd.to_datetime(out[c], utc=True, errors="coerce") + pd.Timedelta(hours=1)
        out[c] = t.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ").where(t.notna(), out[c])
    return out


def own_workdir(pipeline, dest: Path) -> Path:
    """A copy of a finished pipeline's working directory, file times kept, so that nothing is out
    of date in it: a test that adds results or redraws works there, on the same workflow. The
    warm workers' private folder (their sockets and key) stays behind: a copy starts its own."""
    shutil.copytree(pipeline[1], dest / "wd", symlinks=True, ignore=shutil.ignore_patterns(".trainer"))
    return dest / "wd"


@pytest.fixture
def prepared(mnist_data, tmp_path):
    """tmp_path as a working directory that holds the session's downloaded and preloaded data and
    nothing else (`with_data`): a test that trains runs of its own, on the loopback mirror's data,
    starts there instead of downloading and preloading again."""
    return with_data(mnist_data, tmp_path)


@contextlib.contextmanager
def edited(path: Path, addition: str):
    """`path` with `addition` at its end, then put back as it was, its file times included, so
    that the shared pipeline's workflow looks unchanged afterwards."""
    if _readers is not None:  # the shared pipeline's code: only while no other test uses it
        fcntl.flock(_readers, fcntl.LOCK_EX)
    before, times = path.read_bytes(), path.stat()
    try:
        path.write_bytes(before + addition.encode())
        yield path
    finally:
        path.write_bytes(before)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
        if _readers is not None:
            fcntl.flock(_readers, fcntl.LOCK_SH)
