# Helpers and input functions shared by the rules: the grid, device checks, what a run depends
# on, resources. Names (modes, devices, figures) come from the package's registries.
import json
import os
import sys
from pathlib import Path

# The logic lives in the mnistbench package beside the scripts (Snakemake puts workflow/scripts on
# the path of every script job; the Snakefile needs it too).
sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))

from mnistbench import BenchError, aggregate, depends, devices as devs, ladder
from mnistbench.jobs import CONFIG_ENV, PYTHON_ENV


def resolve_modes():
    """Modes of the grid, in ladder order: `all` is every rung; a list is checked by name."""
    if config["modes"] == "all":
        return list(ladder.MODES)
    unknown = [m for m in config["modes"] if m not in ladder.MODES]
    if unknown:
        raise key_error(
            "modes",
            f"unknown mode {', '.join(map(repr, unknown))} (expected: all, or some of {', '.join(ladder.MODES)})",
        )
    return [m for m in ladder.MODES if m in config["modes"]]


def resolve_devices():
    """Devices of the grid. An explicit list is checked by check_devices_here, not here."""
    if config["devices"] == "auto":
        found, notices = devs.resolve("auto")
        for line in notices:
            print(line, file=sys.stderr)
        return found
    return list(dict.fromkeys(config["devices"]))


def check_devices_here():
    """An explicitly named device must exist here when the jobs run on this machine; on a cluster
    the submitting host may lack the GPU, so each job checks its own device and fails the same
    way. Called from `onstart` (Snakefile), before any job: only then is the executor known
    (while the Snakefile is read, `workflow.local_exec` is always True)."""
    if config["devices"] != "auto" and workflow.local_exec:
        try:
            devs.resolve(config["devices"])
        except BenchError as e:
            raise WorkflowError(str(e))


def warn_few_steps():
    """One line per batch size whose runs will time fewer steps than the quality check needs."""
    q = config["quality"]
    for b in BATCH_SIZES:
        per_epoch = config["train_samples"] // b
        total = per_epoch * config["epochs"]
        warmup = min(config["warmup_steps"], max(per_epoch // 2, 1), max(total - 1, 0))
        if per_epoch and total - warmup < q["min_timed_steps"]:
            print(
                f"warning: every run at batch size {b} times only {total - warmup} steps (fewer than "
                f"quality.min_timed_steps = {q['min_timed_steps']}), so its rows will say few_steps: "
                "raise train_samples or epochs",
                file=sys.stderr,
            )


def check_merge_runs():
    for path in config["merge_runs"]:
        try:
            aggregate.check_source(path)
        except BenchError as e:
            raise key_error("merge_runs", str(e))


DEVICES = resolve_devices()
MODES = resolve_modes()
BATCH_SIZES = config["batch_sizes"]
REPEATS = list(range(config["repeats"]))
# Device x mode pairs that cannot exist are left out of the DAG (and listed in the summary).
PAIRS = [(d, m) for d in DEVICES for m in MODES if ladder.exists(m, d)]
LEFT_OUT = [
    (d, m, ladder.why_not(m, d))
    for d in DEVICES
    for m in MODES
    if not ladder.exists(m, d)
]
if not PAIRS:
    raise key_error(
        "modes",
        "no device x mode pair of this grid can exist ("
        + "; ".join(dict.fromkeys(why for _, _, why in LEFT_OUT))
        + "): add a mode that runs on "
        + ", ".join(DEVICES),
    )
SLUGS = {devs.slug(d): d for d in DEVICES}
check_merge_runs()


def run_files(ext):
    return [
        f"results/runs/{s}/{m}/bs{b}/r{r}.{ext}"
        for d, m in PAIRS
        for s in train_slugs(d)
        for b in BATCH_SIZES
        for r in REPEATS
    ]


# What a run's result depends on, as rerun triggers of the jobs that train or time: the settings
# (changing one retimes every run) and a fingerprint of the code that trains and times (editing
# the analysis or the figures retimes nothing).
RUN_SETTINGS = depends.settings_json(config)
RUN_CODE = depends.code_fingerprint()


# A warm worker only where jobs run on this machine (see mnistbench/worker.py): a cluster job
# re-reads the Snakefile in remote mode, and there it trains in its own process. Set in the config
# the job reads, not in the train rule's params: a change of params would re-time every run.
config["warm_worker"] = config["warm_worker"] and not workflow.remote_exec
# Train jobs run as commands (workflow/scripts/train.py), not as scripts, and read the config from
# the environment that every job inherits from this process.
os.environ[CONFIG_ENV] = json.dumps(config)
# They run on the Python that runs Snakemake, as its scripts do (under a conda, container or
# module environment, on that environment's), named in the environment too: as a param it would
# be a rerun trigger, and `.venv/bin/snakemake` and `.venv/bin/python -m snakemake` name one
# interpreter two ways.
os.environ[PYTHON_ENV] = (
    "python" if workflow.deployment_settings.deployment_method else sys.executable
)
TRAIN_SCRIPT = Path(workflow.basedir) / "workflow" / "scripts" / "train.py"


# The package's modules are inputs of the rules that import them (depends.sources for the analysis
# rules): Snakemake's code trigger sees only the thin script, so without them an edit to
# mnistbench/figures.py would rerun nothing.
PKG = Path(workflow.basedir) / "workflow" / "scripts" / "mnistbench"


def train_threads():
    """Cores a timed job (train, profile) takes: cpu_threads, or every core of the machine (so a
    timed job never shares the cpu with another job when running locally), capped by --cores as
    Snakemake caps them. Also a rerun trigger of those jobs (other threads are another
    measurement), passed as a constant: a params function of `threads` is not stored with the
    outputs."""
    wanted = config["cpu_threads"] or os.cpu_count()
    try:
        return min(wanted, workflow.cores)
    except WorkflowError:
        # No --cores (e.g. a cluster profile): each job gets what it asks for.
        return wanted


def run_threads():
    """Threads a timed job gives torch (devices.torch_threads): cpu_threads, or every core it
    holds but one. A rerun trigger of those jobs, as the cores they hold are."""
    return devs.torch_threads(config["cpu_threads"], train_threads())


def forget_corrupt(tensors, checksum):
    """Remove a tensor file that no longer matches its checksum (nothing in it can be trusted):
    it is then missing, and Snakemake rebuilds it before any job reads it."""
    from mnistbench.files import intact

    if (
        os.path.exists(tensors)
        and os.path.exists(checksum)
        and not intact(tensors, checksum)
    ):
        print(
            f"{tensors} does not match its checksum: the preload rule rebuilds it",
            file=sys.stderr,
        )
        os.unlink(tensors)


def run_code(wildcards):
    """The code a run depends on: the package, and for the kernel the compiler that builds it."""
    if wildcards.mode == "kernel":
        from mnistbench.kernel import identity

        return f"{RUN_CODE} {identity()}"
    return RUN_CODE


def later_outputs(wildcards):
    """What the analysis and the figures make from the summary: removed when aggregate refuses."""
    return [str(f) for f in [*rules.analyse.output, *rules.figures.output]]


def device_of(wildcards):
    s = wildcards.device.split("@")[0]
    return SLUGS.get(s, devs.unslug(s))


def needs_gpu(wildcards):
    return devs.spec(device_of(wildcards)).needs_gpu


# Cluster resources (read by the Slurm executor, ignored locally): only GPU jobs ask for a GPU,
# and they go to the GPU partition; see profiles/README.md.
SLURM = config["slurm"]
PRELOAD_NEEDS_GPU = any(devs.spec(d).needs_gpu for d in DEVICES)
GPU_MODELS = SLURM["gpu_models"] or [m for m in [SLURM["gpu_model"]] if m]
# A train job's device folder: the device's slug, and after "@" where it runs when a device runs
# in several places: a GPU model (two or more in slurm.gpu_models), or `gpu` for the cpu's runs on
# the GPU partition (slurm.cpu_on_gpu_partition).
TRAIN_SLUG_PATTERN = rf"(?:{devs.SLUG_PATTERN})(?:@[A-Za-z0-9_.-]+)?"


def train_slugs(device):
    s = devs.slug(device)
    if devs.spec(device).needs_gpu and len(GPU_MODELS) > 1:
        return [f"{s}@{m}" for m in GPU_MODELS]
    if devs.is_host(device) and SLURM["cpu_on_gpu_partition"]:
        return [s, f"{s}@gpu"]
    return [s]


def placed(wildcards):
    """The part of the device folder after "@" ("" for the device's only place)."""
    return wildcards.device.partition("@")[2]


def train_gpus(wildcards):
    return 1 if needs_gpu(wildcards) else 0


def train_partition(wildcards):
    on_gpu = needs_gpu(wildcards) or placed(wildcards)
    return SLURM["gpu_partition"] if on_gpu else SLURM["cpu_partition"]


def train_gpu_model(wildcards):
    if not needs_gpu(wildcards):
        return ""
    return placed(wildcards) or (GPU_MODELS[0] if len(GPU_MODELS) == 1 else "")


# What a timed job (train, profile) asks for. Timed jobs never overlap: the default profile
# makes `timed_jobs` a global limit of 1.
TIMED_RESOURCES = dict(
    timed_jobs=1,
    gpu=train_gpus,
    gpu_model=train_gpu_model,
    slurm_partition=train_partition,
    slurm_account=SLURM["account"],
    slurm_extra="--exclusive" if SLURM["exclusive"] else "",
)
