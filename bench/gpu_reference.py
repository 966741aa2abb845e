"""One command for the day a GPU machine is lent: install what it lacks, then measure, within a budget.

On a machine with a GPU and no network it installs what the machine's Python lacks from the
wheelhouse carried in the working tree (`bench/wheelhouse`, filled by `bench/wheelhouse.sh`),
prints the versions it got, and then runs these steps, each guarded (a step that fails or runs
past its share of the budget is recorded, and the next one still runs):

    pipeline_ends  the pipeline on the reference config (bench/gpu_reference.yaml: cpu and cuda,
                   every rung, real MNIST from the `file://` folder bench/mnist) at its smallest
                   and largest batch size only: the headline, made first so that it is there
                   whatever happens later
    gpu_tests      the compiled GPU tests (tests/test_persistent.py, the cuda cases of test_modes.py)
    pipeline       the whole reference grid, in the same working directory: it trains only the
                   batch sizes in between and summarises everything again
    sizes          the model-size preset config/sizes.yaml on cpu and cuda, where that file exists
    gpu_check      bench/gpu_check.py's tables of the reference run (`persistent` against
                   `cudagraph` and the best cpu rung at every batch size); its own small grid
                   where no pipeline made a summary

Where the grid has no batch size between its ends, the whole grid runs first, in place of
pipeline_ends.

It packs what they made (summary tables, summary.md, figures, the tests' and gpu_check's output,
every step's command, exit status, wall time and why it failed) into one archive,
OUT/reference-<gpu>.tar.gz, beside a short OUT/gpu_reference.log and a copy of steps.csv (OUT:
--out, else $OUT). The archive is rewritten after every step, so a command stopped from outside
still leaves what the finished steps made. `tar -xzf reference-<gpu>.tar.gz -C bench/` unpacks it
into bench/reference/<gpu>/.

Without a GPU (or with --cpu-only) the pipelines run on the cpu alone and the GPU tests are
skipped; --quick shrinks the grid to seconds (the tests use both). This script needs only the
standard library (and pyyaml, where present, to find the grid's ends): it runs before anything is
installed. Exit status: 0 when no step failed, 1 when one did, 130 when interrupted.

    python3 bench/gpu_reference.py [--budget MIN] [--out DIR] [--cpu-only] [--quick] [--skip STEP ...]
                                   [--configfile EXTRA ...] [--config KEY=VALUE ...]
    python3 bench/gpu_reference.py --check-data DIR    # verify a folder of MNIST .gz files, then exit
"""

import argparse
import csv
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import run_workflow  # noqa: E402  (standard library only)

CONFIG = REPO / "bench" / "gpu_reference.yaml"
WHEELHOUSE = REPO / "bench" / "wheelhouse"
DATA = REPO / "bench" / "mnist"
SIZES = REPO / "config" / "sizes.yaml"
WORKDIR = REPO / "bench" / "gpu-run"

# MNIST's four files, with the md5 of their uncompressed content: a recompressed copy (whose .gz
# md5 differs from the official one in config/config.yaml) is still the official data.
MNIST_CONTENT_MD5 = {
    "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}

# The steps after the install, in the order they run: the headline (the pipeline at the grid's
# smallest and largest batch size) first, then the GPU tests, then the whole grid, which trains
# only the batch sizes in between. A step may run until the budget's end less the reserves of the
# steps after it that will run; the whole grid reserves nothing, so it gets whatever the others
# leave, and the tests are sure of RESERVE_S of their TESTS_CAP_S. Seconds of a 16-core H200
# machine (bench/README.md, "The day a GPU is lent").
ORDER = ["pipeline_ends", "gpu_tests", "pipeline", "sizes", "gpu_check"]
RESERVE_S = {"gpu_tests": 60, "sizes": 120, "gpu_check": 20}  # gpu_check: reading the tables
TESTS_CAP_S = 120
GPU_CHECK_OWN_S = 100  # gpu_check's own grid (persistent and cudagraph at 1 and 4096)
PACK_RESERVE_S = 10
INSTALL_CAP_S = 180
GRACE_S = 15  # between the interrupt a step gets at its deadline and the kill
LEAST_S = 10  # a step with less time than this is skipped, not started

# Only proves the command works end to end (the tests use it): seconds of training on the cpu.
QUICK = dict(
    modes=["manual", "module"],
    batch_sizes=[8, 16, 64],
    repeats=2,
    epochs=1,
    train_samples=512,
    test_samples=64,
    warmup_steps=2,
    min_timed_s=0.05,
    retime=0,  # no wait for a busy machine (a test's) to settle
    quality=dict(use=["ok", "noisy", "few_steps"]),
)

# The versions printed and recorded: every package a step imports.
PACKAGES = (
    "torch triton torchvision snakemake jsonschema pandas numpy seaborn matplotlib pillow pyyaml psutil "
    "pytest pytest-xdist nvidia-ml-py"
).split()
# What each step cannot run without (distribution names), for the one line a missing one gets.
NEEDS = {
    "gpu_tests": "torch triton pytest pytest-xdist pyyaml numpy".split(),
    "pipeline": "torch torchvision snakemake jsonschema pandas seaborn matplotlib pillow pyyaml psutil".split(),
    "gpu_check": "torch pandas pyyaml snakemake".split(),
}

PROBE = r"""
import importlib, importlib.metadata as md, json, os, platform, sys
out = dict(python=platform.python_version(), executable=sys.executable, cores=os.cpu_count(), packages={}, broken={})
for name in NAMES:
    try:
        out["packages"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["packages"][name] = None
for name, module in MODULES.items():
    if out["packages"].get(name):
        try:
            importlib.import_module(module)
        except Exception as e:
            out["broken"][name] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
try:
    with open("/proc/cpuinfo") as f:
        out["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
except OSError:
    out["cpu"] = None
try:
    import torch
    out["cuda"] = torch.cuda.is_available()
    out["torch_cuda"] = torch.version.cuda
    if out["cuda"]:
        out["gpu"] = torch.cuda.get_device_name(0)
        out["gpu_count"] = torch.cuda.device_count()
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
except Exception as e:
    out["cuda"] = False
    out["torch_error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
print("PROBE " + json.dumps(out))
"""
MODULES = {
    "torch": "torch",
    "triton": "triton",
    "torchvision": "torchvision",
    "snakemake": "snakemake",
    "jsonschema": "jsonschema",
    "pandas": "pandas",
    "nvidia-ml-py": "pynvml",
}


@dataclass
class Step:
    """One step's record: what ran, how it ended and, where it did not succeed, why."""

    name: str
    command: list = field(default_factory=list)
    status: str = "pending"  # ok, failed, timed_out, interrupted, skipped
    exit_status: int | None = None
    wall_s: float = 0.0
    timeout_s: float | None = None
    started: str = ""
    reason: str = ""
    log: str = ""


class Reporter:
    """Prints a line and keeps it in OUT/gpu_reference.log as it goes, so that a command stopped
    from outside still leaves its log."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w")

    def __call__(self, line: str = "") -> None:
        stamp = time.strftime("%H:%M:%S")
        print(line, flush=True)
        self.file.write(f"{stamp} {line}\n")
        self.file.flush()


class Budget:
    def __init__(self, seconds: float):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def mnist_md5(folder: Path) -> dict:
    """{file: md5 of the .gz} of the four MNIST files in `folder`, after checking that each holds
    the official content (a recompressed copy does); raises ValueError saying what is wrong."""
    out = {}
    for name, content in MNIST_CONTENT_MD5.items():
        path = folder / name
        if not path.is_file():
            raise ValueError(f"{path} is missing (the four MNIST .gz files belong in {folder})")
        raw = path.read_bytes()
        try:
            got = hashlib.md5(gzip.decompress(raw)).hexdigest()
        except (OSError, EOFError) as e:
            raise ValueError(f"{path} is not a whole gzip file ({e})") from None
        if got != content:
            raise ValueError(f"{path} does not hold MNIST's {name.removesuffix('.gz')} (content md5 {got})")
        out[name] = hashlib.md5(raw).hexdigest()
    return out


ERROR = re.compile(r"error|exception|failed|refus|missing|not found|no module|killed|traceback", re.I)
# Lines that say a job or command failed without saying why: the why is before them.
NOISE = re.compile(
    r"^(=+|-+|\[.*\]|Complete log.*|Shutting down.*|Exiting because.*|RuleException:?|WorkflowError:?)$"
    r"|CalledProcessError|returned non-zero exit status|At least one job did not complete"
)


def last_error(lines: list) -> str:
    """The last line that looks like an error (with the line after it where it ends in ':', as
    "WorkflowError in file ..., line 18:" does before its message)."""
    for i in range(len(lines) - 1, -1, -1):
        if ERROR.search(lines[i]) and not NOISE.search(lines[i]):
            line = lines[i]
            if line.endswith(":") and i + 1 < len(lines):
                line = f"{line} {lines[i + 1]}"
            return line[:400]
    return ""


def reason_of(log: Path, workdir: Path | None = None) -> str:
    """The line of a step's output that says why it failed. Where a Snakemake job failed: the
    rule, and the last error line of the job's log or, where that has none, of what was printed
    before Snakemake's report; else the last error line, else the last line."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    failed = [i for i, x in enumerate(lines) if x.startswith("Error in rule ")]
    if failed:
        first = failed[0]
        rule = lines[first].removeprefix("Error in rule ").rstrip(":")
        job_log = next((x.split()[1] for x in lines[first : first + 8] if x.startswith("log: ")), None)
        why = ""
        if job_log and workdir is not None and (workdir / job_log).is_file():
            why = last_error([x.strip() for x in (workdir / job_log).read_text(errors="replace").splitlines()])
        why = why or last_error(lines[:first])
        more = f" (and {len(failed) - 1} more job(s))" if len(failed) > 1 else ""
        return f"rule {rule} failed{more}: {why}"[:400]
    return last_error(lines) or (lines[-1][:400] if lines else "")


def interruptible() -> None:
    """In a step's process before it starts its command: the interrupt that stop() sends is
    heard. This script started in the background by a shell (or by any parent that ignores
    SIGINT) would pass SIGINT on ignored, and every step stopped at its deadline would then wait
    GRACE_S for the kill instead of ending itself (Snakemake cancelling its jobs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop(proc: subprocess.Popen) -> None:
    """Interrupt a step's whole process group (Snakemake then cancels its jobs, pytest writes its
    report), and kill what is left after GRACE_S."""
    for sig, wait in ((signal.SIGINT, GRACE_S), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(step: Step, cmd: list, timeout: float, env: dict, log_path: Path, say, shown=None, workdir=None) -> Step:
    """Run one step's command with its output in `log_path`, stopped after `timeout` seconds;
    `shown` is the command as the record and the log show it (default: the command); `workdir`,
    a pipeline's, where its jobs' logs are."""
    step.command = [str(c) for c in (shown or cmd)]
    step.timeout_s = round(timeout)
    step.log = log_path.name
    step.started = datetime.now(UTC).isoformat(timespec="seconds")
    say(f"[{step.name}] {shlex.join(step.command)}  (at most {timeout:.0f} s)")
    t0 = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"$ {shlex.join(step.command)}\n")
        log.flush()
        try:
            proc = subprocess.Popen(
                [str(c) for c in cmd],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=interruptible,  # this script runs no threads: safe before exec
            )
        except OSError as e:
            step.status, step.reason = "failed", f"could not start: {e}"
            return step
        try:
            step.exit_status = proc.wait(timeout=max(timeout, 1))
            timed_out = False
        except subprocess.TimeoutExpired:
            stop(proc)
            step.exit_status, timed_out = proc.returncode, True
        except KeyboardInterrupt:  # this command was interrupted or terminated: the step goes first
            stop(proc)
            step.status, step.exit_status = "interrupted", proc.returncode
            step.reason, step.wall_s = "interrupted from outside", round(time.monotonic() - t0, 1)
            raise
    step.wall_s = round(time.monotonic() - t0, 1)
    if timed_out:
        step.status, step.reason = "timed_out", f"stopped after {timeout:.0f} s (its share of the budget)"
    elif step.exit_status == 0:
        step.status = "ok"
    else:
        step.status = "failed"
        step.reason = f"exit {step.exit_status}: {reason_of(log_path, workdir)}"
    return step


def skip(step: Step, why: str, say) -> Step:
    step.status, step.reason, step.command = "skipped", why, [str(c) for c in step.command]
    say(f"[{step.name}] skipped: {why}")
    return step


def pins() -> dict:
    """{name: version} of requirements.txt, the versions the project is tested with."""
    out = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            out[name.strip().lower()] = version.strip()
    return out


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def installs(gpu_expected: bool) -> list:
    """(why, pip arguments) of each install this machine's Python needs before the steps run."""
    p, todo, core = pins(), [], []
    for name in ("snakemake", "jsonschema"):
        if not have(name):
            core.append(f"{name}=={p[name]}")
    if gpu_expected and not have("pynvml"):
        core.append("nvidia-ml-py")  # the run-quality check of a GPU (who else used it)
    if core:
        todo.append(("snakemake and jsonschema (the pipeline, the config's validation)", core))
    if not have("torchvision"):
        # The one in the wheelhouse pairs with the GPU image's torch, which must stay: no deps.
        todo.append(("torchvision (the download and preload rules)", ["--no-deps", "torchvision"]))
    try:
        pandas = importlib.metadata.version("pandas")
    except importlib.metadata.PackageNotFoundError:
        pandas = None
    if pandas is None or pandas.split(".")[0] != p["pandas"].split(".")[0]:
        # The analysis is written and tested with the pinned major release; numpy stays the machine's.
        todo.append((f"pandas {p['pandas']} (the machine has {pandas or 'none'})", [f"pandas=={p['pandas']}"]))
    return todo


def install(step: Step, a, work: Path, logs: Path, say, budget: Budget) -> tuple[str, dict]:
    """(python, environment) that the steps run with: this Python where it has everything, else a
    venv on top of it (--system-site-packages: the machine's torch, triton and numpy stay, only
    what is missing comes from the wheelhouse), else, where this Python cannot make a venv (no
    ensurepip), a --target folder on PYTHONPATH."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    gpu_expected = not a.cpu_only and gpu_present()
    todo = installs(gpu_expected)
    if not todo:
        skip(step, f"nothing to install: {sys.executable} has every package the steps need", say)
        return sys.executable, env
    venv = work / "venv"
    python = venv / "bin" / "python"
    if python.exists():  # made by an earlier call on this machine: pip only for what it still lacks
        ask = [str(python), __file__, "--list-installs"] + ([] if gpu_expected else ["--cpu-only"])
        listed = subprocess.run(ask, capture_output=True, text=True)
        if listed.returncode == 0:
            todo = json.loads(listed.stdout)
        if not todo:
            skip(step, f"nothing to install: the venv {venv} of an earlier call has every package", say)
            return str(python), env
    if not any(a.wheelhouse.glob("*.whl")):
        step.status = "failed"
        step.reason = (
            f"{a.wheelhouse} holds no wheels, and this Python lacks: {'; '.join(w for w, _ in todo)}. "
            "Fill it with bench/wheelhouse.sh on a machine with a network and carry it"
        )
        say(f"[install] failed: {step.reason}")
        return sys.executable, env
    log = logs / "install.log"
    t0 = time.monotonic()
    if not python.exists():
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], capture_output=True, text=True
        )
        with open(log, "a") as f:
            f.write(f"$ {sys.executable} -m venv --system-site-packages {venv}\n{made.stdout}{made.stderr}")
        if made.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
    target = None
    if python.exists():
        base = [str(python), "-m", "pip", "install"]
        say(f"[install] into the venv {venv} (on top of {sys.executable}'s packages)")
    else:
        target = work / "site"
        base = [sys.executable, "-m", "pip", "install", "--target", str(target), "--upgrade"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))
        python = Path(sys.executable)
        say(f"[install] {sys.executable} cannot make a venv here: into {target}, on PYTHONPATH")
    base += ["--no-index", "--find-links", str(a.wheelhouse), "--disable-pip-version-check"]
    failures = []
    for why, args in todo:
        sub = Step(f"install {why}")
        run(sub, base + args, min(INSTALL_CAP_S, budget.left()), env, log, say)
        say(f"[install] {why}: {sub.status}{': ' + sub.reason if sub.reason else ''}")
        step.command += [*sub.command, ";"]
        if sub.status != "ok":
            failures.append(f"{why}: {sub.reason}")
    step.command = step.command[:-1]
    step.log, step.wall_s = log.name, round(time.monotonic() - t0, 1)
    step.status, step.exit_status = ("failed", 1) if failures else ("ok", 0)
    step.reason = "; ".join(failures)
    return str(python), env


def gpu_present() -> bool:
    """Whether an NVIDIA driver sees a GPU here, without torch (the install decides on it)."""
    return any(Path("/proc/driver/nvidia/gpus").glob("*")) or Path("/dev/nvidia0").exists()


def probe(step: Step, python: str, env: dict, logs: Path, say) -> dict:
    """The versions the steps will run with, printed; a missing package is one line naming what needs it."""
    code = PROBE.replace("NAMES", repr(PACKAGES)).replace("MODULES", repr(MODULES))
    shown = [python, "-c", "<probe of versions and devices>"]
    run(step, [python, "-c", code], 120, env, logs / "versions.log", say, shown)
    lines = (logs / "versions.log").read_text(errors="replace").splitlines()
    found = [x for x in lines if x.startswith("PROBE ")]
    if not found:
        step.status = "failed"
        step.reason = step.reason or "the probe printed nothing"
        return {}
    info = json.loads(found[-1][6:])
    say(
        f"python {info['python']} ({info['executable']}), {info['cores']} cores ({info.get('cpu')}); "
        + (
            f"GPU: {info.get('gpu')} (x{info.get('gpu_count')}, sm {info.get('capability')}, CUDA {info.get('torch_cuda')})"
            if info.get("cuda")
            else f"no GPU visible to torch{' (' + info['torch_error'] + ')' if info.get('torch_error') else ''}"
        )
    )
    say("  " + ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v))
    missing = []
    for name, version in info["packages"].items():
        users = [s for s, needs in NEEDS.items() if name in needs]
        if version is None and users:
            missing.append(name)
            say(f"  missing: {name} (needed by {', '.join(users)})")
        elif name in info["broken"]:
            missing.append(name)
            say(f"  broken: {name} {version} does not import: {info['broken'][name]}")
    info["lacking"] = missing
    return info


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def copy_results(src: Path, dest: Path) -> list:
    """The summary tables, summary.md and figures a pipeline wrote under src/results (the names the
    analysis gives them, no run paths) into dest, in place of any copied before; the names copied."""
    copied = []
    shutil.rmtree(dest / "summary", ignore_errors=True)
    shutil.rmtree(dest / "figures", ignore_errors=True)
    (dest / "summary.md").unlink(missing_ok=True)
    for pattern, sub in (("results/summary/*.csv", "summary"), ("results/figures/*.png", "figures")):
        for f in sorted(src.glob(pattern)):
            (dest / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / sub / f.name)
            copied.append(f"{sub}/{f.name}")
    if (src / "results/summary.md").exists():
        shutil.copy2(src / "results/summary.md", dest / "summary.md")
        copied.append("summary.md")
    return copied


def batch_sizes_of(configfiles: list, config: list) -> list | None:
    """The batch sizes a pipeline with these config files and --config items runs (as Snakemake
    merges them: the last that names them), or None where pyyaml is not here to read them."""
    try:
        import yaml
    except ImportError:
        return None
    sizes = None
    for f in [REPO / "config" / "config.yaml", *configfiles]:
        sizes = (yaml.safe_load(Path(f).read_text()) or {}).get("batch_sizes", sizes)
    for item in config:
        key, _, value = item.partition("=")
        if key.strip() == "batch_sizes":
            sizes = yaml.safe_load(value)
    ok = isinstance(sizes, list) and sizes and all(isinstance(b, int) for b in sizes)
    return sorted(set(sizes)) if ok else None


RECORD = ["step", "status", "exit_status", "wall_s", "timeout_s", "started", "reason", "log", "command"]
ARCHIVE_LIMIT = 15 * 2**20  # the device tool brings back files of up to 16 MiB


def write_records(steps: list, ref: Path) -> None:
    (ref / "commands.json").write_text(json.dumps([asdict(s) for s in steps], indent=1) + "\n")
    with open(ref / "steps.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RECORD)
        for s in steps:
            w.writerow([s.name, *(getattr(s, k) for k in RECORD[1:-1]), shlex.join(s.command)])


def pack(steps: list, ref: Path, out: Path, name: str) -> Path:
    """reference/<name>/ as OUT/reference-<name>.tar.gz (written whole, then moved into place), and
    a copy of steps.csv beside it. Should the jobs' logs of a failed pipeline make it too large to
    come back, it goes without them."""
    write_records(steps, ref)
    archive = out / f"reference-{name}.tar.gz"
    tmp = archive.with_name(archive.name + ".part")
    for keep in (lambda t: t, lambda t: None if t.name.endswith("-logs") and t.isdir() else t):
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(ref, arcname=f"reference/{name}", filter=keep)
        if tmp.stat().st_size <= ARCHIVE_LIMIT:
            break
    os.replace(tmp, archive)
    shutil.copy2(ref / "steps.csv", out / "steps.csv")
    return archive


def interrupted(signum, frame):
    """SIGTERM (a command past its limit) ends the run as Ctrl-C does: the running step's processes
    are stopped, and what the finished steps made is packed."""
    raise KeyboardInterrupt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=7.0, help="minutes for every step together (default 7)")
    p.add_argument("--out", type=Path, help="where the archive and the log go (default $OUT, else WORKDIR/out)")
    p.add_argument("--workdir", type=Path, default=WORKDIR, help="the venv and the pipelines (default bench/gpu-run)")
    p.add_argument("--reference", type=Path, default=CONFIG, help="the reference config (bench/gpu_reference.yaml)")
    p.add_argument("--configfile", nargs="*", default=[], help="more config files, after the reference config")
    p.add_argument("--config", nargs="*", default=[], help="KEY=VALUE for the pipelines, as snakemake --config")
    p.add_argument("--data", type=Path, default=DATA, help="folder of the four MNIST .gz files (bench/mnist)")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="bench/wheelhouse")
    p.add_argument("--sizes", type=Path, default=SIZES, help="the model-size preset, run where it exists")
    p.add_argument("--cpu-only", action="store_true", help="devices [cpu] (automatic where torch sees no GPU)")
    p.add_argument("--quick", action="store_true", help="a tiny grid: proves the command works")
    p.add_argument("--cores", default="all")
    p.add_argument("--name", help="the result's folder name (default: the GPU's name as a slug, else cpu)")
    p.add_argument("--skip", nargs="*", default=[], choices=ORDER, help="steps not to run")
    p.add_argument("--check-data", type=Path, metavar="DIR", help="only verify the MNIST files in DIR")
    p.add_argument("--list-installs", action="store_true", help=argparse.SUPPRESS)  # what this Python lacks, as JSON
    a = p.parse_args(argv)

    if a.list_installs:
        print(json.dumps(installs(gpu_expected=not a.cpu_only and gpu_present())))
        return 0

    if a.check_data:
        try:
            md5 = mnist_md5(a.check_data)
        except ValueError as e:
            sys.exit(f"error: {e}")
        for name, digest in md5.items():
            print(f"{name}: {(a.check_data / name).stat().st_size} bytes, md5 {digest}, content is MNIST's")
        return 0

    signal.signal(signal.SIGTERM, interrupted)
    budget = Budget(a.budget * 60)
    work = a.workdir.resolve()
    out = (a.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else work / "out")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    say = Reporter(out / "gpu_reference.log")
    # The folder is named after the GPU once the probe has seen it; until then it is .staging.
    shutil.rmtree(work / "reference", ignore_errors=True)
    ref = work / "reference" / ".staging"
    (ref / "logs").mkdir(parents=True)
    say(f"gpu_reference: budget {budget.seconds:.0f} s, working in {work}, results to {out}")
    steps, name = [], None
    try:
        step = Step("install")
        steps.append(step)
        python, env = install(step, a, work, ref / "logs", say, budget)
        step = Step("versions")
        steps.append(step)
        info = probe(step, python, env, ref / "logs", say)
        (ref / "versions.json").write_text(json.dumps(info, indent=1) + "\n")
        gpu = bool(info.get("cuda")) and not a.cpu_only
        needed = {n for s, needs in NEEDS.items() if gpu or s != "gpu_tests" for n in needs}
        if lacking := [n for n in info.get("lacking", []) if n in needed]:
            step.status, step.exit_status = "failed", 1
            step.reason = "missing or broken: " + ", ".join(lacking)
        if not gpu:
            why = "--cpu-only" if a.cpu_only else "torch sees no GPU here"
            say(f"cpu-only ({why}): the pipelines run on the cpu")
        name = a.name or (slug(info["gpu"]) + ("" if gpu else "-cpu-only") if info.get("gpu") else "cpu")
        ref = ref.rename(ref.with_name(name))
        out.mkdir(parents=True, exist_ok=True)
        pack(steps, ref, out, name)
        measure(a, steps, ref, out, name, work, python, dict(env, MPLBACKEND="Agg"), gpu, budget, say)
    except KeyboardInterrupt:
        say("interrupted: packing what the finished steps made")
        name = name or "interrupted"
        if ref.name != name:
            ref = ref.rename(ref.with_name(name))
    archive = pack(steps, ref, out, name)
    bad = [s for s in steps if s.status in ("failed", "timed_out", "interrupted")]
    say(f"{'step':<14} {'status':<11} {'exit':>4} {'wall s':>7}  reason")
    for s in steps:
        status = "-" if s.exit_status is None else s.exit_status
        say(f"{s.name:<14} {s.status:<11} {status:>4} {s.wall_s:>7}  {s.reason}")
    say(f"archive {archive} ({archive.stat().st_size / 1e6:.2f} MB): tar -xzf {archive.name} -C bench/")
    say(f"done in {budget.seconds - budget.left():.0f} s of {budget.seconds:.0f}; {len(bad)} step(s) did not succeed")
    if any(s.status == "interrupted" for s in steps):
        return 130
    return 1 if bad else 0


def measure(a, steps, ref, out, name, work, python, env, gpu, budget, say) -> None:
    """The steps after the install, in ORDER (the whole grid first where it has no batch sizes
    between its ends), each within its share of the budget."""
    # The config files the pipelines read, in order: the reference grid, the data's mirror, the
    # caller's files, the quick grid; the size preset's pipeline then its preset; last the devices.
    cfgdir = ref / "config"
    cfgdir.mkdir()
    shutil.copy2(a.reference, cfgdir / a.reference.name)
    files = [cfgdir / a.reference.name]
    try:
        md5 = mnist_md5(a.data)
        data = dict(mnist=dict(mirrors=[a.data.resolve().as_uri() + "/"], md5=md5))
        (cfgdir / "data.json").write_text(json.dumps(data, indent=1) + "\n")
        files.append(cfgdir / "data.json")
        say(f"MNIST from {a.data}: its content checked, the md5 of its .gz files given to the pipelines")
    except ValueError as e:
        say(f"no MNIST folder to use ({e}): the pipelines use the mirrors of their configs")
    for i, extra in enumerate(map(Path, a.configfile)):
        shutil.copy2(extra, cfgdir / f"extra{i}-{extra.name}")
        files.append(cfgdir / f"extra{i}-{extra.name}")
    if a.quick:
        (cfgdir / "quick.json").write_text(json.dumps(QUICK, indent=1) + "\n")
        files.append(cfgdir / "quick.json")
    devices = cfgdir / "devices.json"
    devices.write_text(json.dumps({} if gpu else dict(devices=["cpu"])) + "\n")
    sizes = a.sizes if a.sizes.exists() else None
    batch_sizes = batch_sizes_of(files, a.config)
    ends = sorted({batch_sizes[0], batch_sizes[-1]}) if batch_sizes else None

    why_not = {s: "--skip" for s in a.skip}
    if not gpu:
        why_not.setdefault("gpu_tests", "no GPU: the compiled GPU tests need cuda")
    if sizes is None:
        why_not.setdefault("sizes", f"{a.sizes} does not exist (no model-size preset yet)")
    if batch_sizes is None:
        why_not.setdefault("pipeline_ends", "no pyyaml here to read the grid: the whole grid at once")
    elif ends == batch_sizes:
        why_not.setdefault("pipeline_ends", f"the grid's batch sizes {batch_sizes} are its ends")
    order = list(ORDER)
    if "pipeline_ends" in why_not and "pipeline" not in why_not:  # then the whole grid is the headline
        order.remove("pipeline")
        order.insert(order.index("gpu_tests"), "pipeline")

    def guarded(step_name: str, cmd: list, cap: float, workdir=None) -> Step:
        """Run a step within its share of what is left, or skip it where too little is left."""
        step = Step(step_name)
        steps.append(step)
        later = [s for s in order[order.index(step_name) + 1 :] if s not in why_not]
        timeout = min(cap, budget.left() - PACK_RESERVE_S - sum(RESERVE_S.get(s, 0) for s in later))
        if timeout - GRACE_S < LEAST_S:
            skip(step, f"no time left in the budget ({budget.left():.0f} s left)", say).command = [str(c) for c in cmd]
        else:
            run(step, cmd, timeout - GRACE_S, env, ref / "logs" / f"{step_name}.log", say, workdir=workdir)
            say(f"[{step_name}] {step.status} in {step.wall_s} s" + (f": {step.reason}" if step.reason else ""))
        pack(steps, ref, out, name)
        return step

    def pipeline(step_name: str, wd: Path, configfiles: list, config: list, dest: Path) -> None:
        wd.mkdir(parents=True, exist_ok=True)
        if any((wd / ".snakemake" / "locks").glob("*")):  # left by a run stopped at its deadline
            unlock = run_workflow.command(wd, a.cores, (), configfiles, config, "--unlock", python=python)
            subprocess.run(unlock, env=env, capture_output=True, cwd=REPO)
        flags = ("--keep-going", "--rerun-incomplete")
        cmd = run_workflow.command(wd, a.cores, (), configfiles, config, *flags, python=python)
        step = guarded(step_name, cmd, 1e9, wd)
        # The archive keeps the summary of the last pipeline that finished: a stopped or failed one
        # may have left a mixture, which is kept only where there is nothing else.
        if step.status == "ok" or not (dest / "summary.md").exists():
            if copied := copy_results(wd, dest):
                say(f"[{step_name}] {len(copied)} tables, summaries and figures into the archive")
        else:
            say(f"[{step_name}] the archive keeps the summary of the pipeline before it")
        if step.status not in ("ok", "skipped") and (wd / "logs").exists():
            # Why a job failed is in its own log: the job logs come along when the step did not succeed.
            shutil.copytree(wd / "logs", ref / f"{step_name}-logs", dirs_exist_ok=True)

    ref_wd = work / "pipeline"
    tests = [python, "-m", "pytest", "-n", "8", "-p", "no:cacheprovider", "-q", f"--junitxml={ref / 'tests.xml'}"]
    tests += ["tests/test_persistent.py", "tests/test_modes.py", "-k", "cuda or persistent"]
    check = [python, str(REPO / "bench" / "gpu_check.py")]
    own = ["--workdir", str(work / "gpu_check")]
    if gpu:  # the question persistent answers
        own += ["--modes", "persistent", "cudagraph", "--batch-sizes", "1", "4096", "--devices", "[cuda]"]
    else:
        own += ["--quick", "--devices", "[cpu]"]

    def sizes_step():
        shutil.copy2(sizes, cfgdir / f"sizes-{sizes.name}")
        wd = work / "sizes"
        if (ref_wd / "results/preload").exists() and not (wd / "results/preload").exists():
            run_workflow.with_data_of(ref_wd, wd)  # the same data, downloaded and preloaded once
        pipeline("sizes", wd, [*files, cfgdir / f"sizes-{sizes.name}", devices], a.config, ref / "sizes")

    def check_step():
        if (ref / "summary" / "summary.csv").exists():
            guarded("gpu_check", check + ["--summary", str(ref / "summary")], 60)
        elif budget.left() - PACK_RESERVE_S < GPU_CHECK_OWN_S:
            steps.append(skip(Step("gpu_check", command=check + own), "no summary to read, no time for a grid", say))
        else:
            guarded("gpu_check", check + own, GPU_CHECK_OWN_S + 60)

    ends_config = [*a.config, f"batch_sizes={json.dumps(ends, separators=(',', ':'))}"]
    actions = {
        "pipeline_ends": lambda: pipeline("pipeline_ends", ref_wd, [*files, devices], ends_config, ref),
        "gpu_tests": lambda: guarded("gpu_tests", tests, TESTS_CAP_S),
        "pipeline": lambda: pipeline("pipeline", ref_wd, [*files, devices], a.config, ref),
        "sizes": sizes_step,
        "gpu_check": check_step,
    }
    commands = {"gpu_tests": tests, "gpu_check": check}
    for step_name in order:
        if step_name in why_not:
            steps.append(skip(Step(step_name, command=commands.get(step_name, [])), why_not[step_name], say))
            if step_name == "pipeline" and not (ref / "summary.md").exists():
                copy_results(ref_wd, ref)  # a second call that skips the pipelines packs the first one's
        else:
            actions[step_name]()


if __name__ == "__main__":
    sys.exit(main())
