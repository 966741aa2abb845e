# Helpers and input functions shared by the rules: the grid, device checks, what a run depends
# on, resources. Names (modes, tables, figures, devices) come from the package's registries.
import json
import os
import sys
from pathlib import Path

# The logic lives in the mnistbench package beside the scripts (Snakemake puts workflow/scripts on
# the path of every script job; the Snakefile needs it too).
sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))

from mnistbench import BenchError
from mnistbench.collect import aggregate
from mnistbench.config import catalog, depends, devices as devs, networks, schema
from mnistbench.jobs import CONFIG_ENV, PIPELINE_ENV, PYTHON_ENV, pipeline_token
from mnistbench.jobs import TRAIN_SCRIPT_ENV
from mnistbench.train import needs


def resolve_modes():
    """Modes of the grid, in the ladder's order: `all` is every mode; a list is checked by name."""
    if config["modes"] == "all":
        return list(catalog.MODES)
    unknown = [m for m in config["modes"] if m not in catalog.MODES]
    if unknown:
        raise key_error(
            "modes",
            f"unknown mode {', '.join(map(repr, unknown))} (expected: all, or some of {', '.join(catalog.MODES)})",
        )
    return [m for m in catalog.MODES if m in config["modes"]]


def resolve_networks():
    """{results folder: networks.Spec} of the grid's networks, in the config's order: each `models`
    entry checked, and no two sharing a folder. A user's module file is only hashed here (no
    torch): a file that cannot be trained is each of its runs' status."""
    specs = {}
    for name in config["models"]:
        try:
            s = networks.build(config, name)
        except networks.BadNetwork as e:
            raise key_error("models", str(e))
        other = specs.get(s.network.slug)
        if other is not None:
            raise key_error(
                "models",
                f"{other.network.name} and {name} would share the results folder {s.network.slug}: "
                "rename one file or class",
            )
        specs[s.network.slug] = s
    return specs


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


def check_batch_sizes():
    """A run trains whole batches only: a batch larger than the training samples trains nothing."""
    n = config["train_samples"]
    big = [b for b in BATCH_SIZES if b > n]
    if big:
        raise key_error(
            "batch_sizes",
            f"batch size {', '.join(map(str, big))} is larger than train_samples = {n}, so a run "
            f"would train no whole batch: lower the batch size to at most {n} or raise train_samples "
            "(at most 60000)",
        )


def check_merge_runs():
    for path in config["merge_runs"]:
        try:
            aggregate.check_source(path)
        except BenchError as e:
            raise key_error("merge_runs", str(e))


DEVICES = resolve_devices()
MODES = resolve_modes()
NETWORKS = resolve_networks()
BATCH_SIZES = config["batch_sizes"]
MODELS_AT_ONCE = config["models_at_once"]
REPEATS = list(range(config["repeats"]))
check_batch_sizes()
# Device x network x mode x K combinations that cannot exist are left out of the DAG (and
# listed, with the reason, in the summary).
WHY_NOT = {
    (d, net, m, k): needs.why_not(m, d, s, k)
    for d in DEVICES
    for net, s in NETWORKS.items()
    for m in MODES
    for k in MODELS_AT_ONCE
}
GRID = [key for key, why in WHY_NOT.items() if why is None]
LEFT_OUT = [
    (d, NETWORKS[net].network.name, m, k, why)
    for (d, net, m, k), why in WHY_NOT.items()
    if why is not None
]
if not GRID:
    # Where only the machine stands in the way (no compiler that builds the kernel, no Triton),
    # the fix is the machine's, not the config's.
    LACKING = {
        why: needs.FIXES[catalog.MODES[m].needs]
        for (d, net, m, k), why in WHY_NOT.items()
        if why is not None and why == needs.lacking(m)
    }
    if LACKING:
        raise WorkflowError(
            "no device x network x mode x models_at_once of this grid can run on this machine: "
            + "; ".join(f"{why}: {fix}" for why, fix in LACKING.items())
        )
    raise key_error(
        "modes",
        "no device x network x mode x models_at_once of this grid can exist ("
        + "; ".join(dict.fromkeys(why for *_, why in LEFT_OUT))
        + "): add a mode that runs on "
        + ", ".join(DEVICES),
    )
SLUGS = {devs.slug(d): d for d in DEVICES}
check_merge_runs()


# A run's file name in its batch size's folder: its repeat, after its K where it trains several
# copies at once (a run of one model keeps the name it always had: r0, k16-r0).
RUN_PATTERN = r"(?:k\d+-)?r\d+"


def run_name(models_at_once, repeat):
    return f"r{repeat}" if models_at_once == 1 else f"k{models_at_once}-r{repeat}"


def models_at_once_of(wildcards):
    k, _, _ = wildcards.run.rpartition("-")
    return int(k[1:]) if k else 1


def repeat_of(wildcards):
    return int(wildcards.run.rpartition("-")[2][1:])


def run_files(ext):
    return [
        f"results/runs/{s}/{net}/{m}/bs{b}/{run_name(k, r)}.{ext}"
        for d, net, m, k in GRID
        for s in train_slugs(d)
        for b in BATCH_SIZES
        for r in REPEATS
    ]


# What a run's result depends on, as rerun triggers of the jobs that train or time: the settings
# (changing one retimes every run) and a fingerprint of the code that trains and times (editing
# the analysis or the figures retimes nothing).
RUN_SETTINGS = depends.settings_json(config)
RUN_CODE = depends.code_fingerprint("train")
# The preloaded data the runs read (tensors_input says how they depend on it).
TENSORS = "results/preload/mnist.pt"
# A profile job profiles every network: a user's module file is part of what it depends on too.
PROFILE_CODE = " ".join(
    [depends.code_fingerprint("profile")]
    + [s.network.digest for s in NETWORKS.values() if s.network.digest]
)


# A warm worker only where jobs run on this machine (see mnistbench/train/worker.py): a cluster job
# re-reads the Snakefile in remote mode, and there it trains in its own process. Set in the config
# the job reads, not in the train rule's params: a change of params would re-time every run.
config["warm_worker"] = config["warm_worker"] and not workflow.remote_exec
# Train jobs run as commands (workflow/scripts/train.py), not as scripts, and read the config from
# the environment that every job inherits from this process.
os.environ[CONFIG_ENV] = json.dumps(config)
# The pipeline a warm worker serves, so that it ends when this Snakemake process does (another
# pipeline's jobs start workers of their own): set by the process that runs the jobs, not by a
# job's own Snakemake (a cluster job, a subprocess).
if not workflow.remote_exec and not workflow.subprocess_exec:
    os.environ[PIPELINE_ENV] = pipeline_token()
# They run on the Python that runs Snakemake, as its scripts do (under a conda, container or
# module environment, on that environment's), named in the environment too: as a param it would
# be a rerun trigger, and `.venv/bin/snakemake` and `.venv/bin/python -m snakemake` name one
# interpreter two ways.
os.environ[PYTHON_ENV] = (
    "python" if workflow.deployment_settings.deployment_method else sys.executable
)
# The train job's script, named in the environment too: as an input or a param its absolute path
# would be recorded, and a moved project would retime every run.
os.environ[TRAIN_SCRIPT_ENV] = str(
    Path(workflow.basedir) / "workflow" / "scripts" / "train.py"
)


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


# Why the preloaded tensor file must be made again before a job reads it, in words for now and
# for after it was made again; read only, so that a dry run changes no file.
DAMAGE = {
    "missing": ("is missing", "was missing"),
    "corrupt": (
        "does not match its checksum (a truncated or edited file)",
        "did not match its checksum (a truncated or edited file)",
    ),
}


def damaged(tensors, checksum):
    """What is wrong with the tensor file a preload made (its checksum file is there):
    "missing" or "corrupt" (no longer matching it); None where neither, or no preload.
    """
    from mnistbench.files import intact

    if not os.path.exists(checksum):
        return None
    if not os.path.exists(tensors):
        return "missing"
    return None if intact(tensors, checksum) else "corrupt"


def contradicted_md5(raw, md5):
    """Stop, in one line, where a configured md5 is not that of the archive downloaded and
    verified earlier under `raw` (read only: a dry run says it too)."""
    import hashlib

    for name, given in md5.items():
        archive = Path(raw) / name
        if archive.is_file() and hashlib.md5(archive.read_bytes()).hexdigest() != given:
            raise key_error(
                f"mnist.md5.{name}",
                f"{given} is not the md5 of {archive}, downloaded and verified earlier (a typo?): "
                f"correct it; to download other data, delete {raw} first",
            )


def tensors_input():
    """What the jobs that read the preloaded tensors (tensors_of) take as input: the
    checksum file beside them, which a preload writes after them. A tensor file deleted,
    truncated or edited is then no job's missing or newer input: it is made again in place before
    the run's first job, byte for byte the same, and the runs made from it stand (remake); a
    preload job of its own would rerun every run, as Snakemake reruns the consumers of every job
    it runs."""
    return rules.preload.output.checksum


def tensors_of(wildcards, input):
    """The tensor file of a job's input checksum file (tensors_input): what its script reads."""
    return os.path.splitext(input.data)[0]


def remake(tensors, checksum, raw):
    """Before a run's first job: a missing or corrupt tensor file (damaged) is made again in place
    from the downloaded files, as the preload rule makes it. Made again byte for byte (its sha256
    is the recorded one), it takes back the time it was first written (the checksum file's), so
    the runs made from it stand. Without the downloaded files, the file is removed and the run
    stops; the next one downloads and preloads again."""
    damage = damaged(tensors, checksum)
    if damage is None:
        return
    was = DAMAGE[damage][1]
    from mnistbench.data import preload

    recorded = Path(checksum).read_text().strip()
    written = os.stat(checksum).st_mtime_ns
    try:
        preload.save_tensors(preload.load_raw(raw), tensors, checksum)
    except BenchError as e:
        for f in (tensors, checksum):
            if os.path.exists(f):
                os.unlink(f)
        raise WorkflowError(
            f"{tensors} {was} and cannot be made again here ({e}): it and its checksum are "
            "removed; run the same command again, which downloads and preloads the data"
        )
    # save_tensors wrote the new file's sha256 beside it: no need to hash 200 MB again.
    same = Path(checksum).read_text().strip() == recorded
    if same:
        os.utime(tensors, ns=(written, written))
        os.utime(checksum, ns=(written, written))
    print(
        f"{tensors} {was}: made again from the downloaded files"
        + (
            "; the same data, so the runs made from it stand"
            if same
            else "; not the bytes the runs were made from, so they are made again"
        ),
        file=sys.stderr,
    )


def run_code(wildcards):
    """The code a run depends on: the package's that trains and times it, for the kernel the
    compiler that builds it, and a user's module file (its content's sha256)."""
    parts = [RUN_CODE, NETWORKS[wildcards.network].network.digest]
    if wildcards.mode == "kernel":
        from mnistbench.train.kernel import identity

        parts.append(identity())
    return " ".join(p for p in parts if p)


def network_of(wildcards):
    """The `models` entry of a run's results folder."""
    return NETWORKS[wildcards.network].network.name


def report_config():
    """The config keys the analysis reads (catalog.REPORT_KEYS), nested as in the config."""
    out = {}
    for key in catalog.REPORT_KEYS:
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = schema.get(config, key)
    return out


def later_outputs(wildcards):
    """What the analysis and the figures make from the summary: removed when aggregate refuses."""
    return [str(f) for f in [*rules.analyse.output, *rules.figures.output]]


def device_of(wildcards):
    s = wildcards.device.split("@")[0]
    return SLUGS.get(s, devs.unslug(s))


def needs_gpu(wildcards):
    return devs.traits(device_of(wildcards)).needs_gpu


# Cluster resources (read by the Slurm executor, ignored locally): only GPU jobs ask for a GPU,
# and they go to the GPU partition; see profiles/README.md.
SLURM = config["slurm"]
PRELOAD_NEEDS_GPU = any(devs.traits(d).needs_gpu for d in DEVICES)
GPU_MODELS = SLURM["gpu_models"] or [m for m in [SLURM["gpu_model"]] if m]
# A train job's device folder: the device's slug, and after "@" where it runs when a device runs
# in several places: a GPU model (two or more in slurm.gpu_models), or `gpu` for the cpu's runs on
# the GPU partition (slurm.cpu_on_gpu_partition).
TRAIN_SLUG_PATTERN = rf"(?:{devs.SLUG_PATTERN})(?:@[A-Za-z0-9_.-]+)?"


def train_slugs(device):
    s = devs.slug(device)
    if devs.traits(device).needs_gpu and len(GPU_MODELS) > 1:
        return [f"{s}@{m}" for m in GPU_MODELS]
    if devs.is_cpu(device) and SLURM["cpu_on_gpu_partition"]:
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
