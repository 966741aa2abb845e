"""What a run's result depends on, as Snakemake's rerun triggers of the jobs that train or time
and as the record each run keeps: its settings from the config (the keys the schema marks,
schema.py) and a fingerprint of the code that trains and times it (the source files its job runs,
read from their imports). Torch-free: the Snakefile computes both for every invocation.
"""

import ast
import functools
import hashlib
import json
import os
from pathlib import Path

from mnistbench.config import schema

PACKAGE = Path(__file__).resolve().parents[1]
SCRIPTS = PACKAGE.parent
# What a timed job's script hands its work to: {kind: (module, function)}. The warm worker imports
# them by name when it starts (worker.serve), so their sources are named here for the fingerprint.
TASKS = {"train": ("train.trainer", "train"), "profile": ("train.profiling", "profile_device")}
# Files a module reads besides its imports (its folder's): the report's words are Jinja2 templates,
# so an edit of a sentence reruns the analysis as an edit of its code does.
READS = {"report.words": "templates/*.j2"}
# The environment variables a run records (the `env` of its record, env.describe): the thread
# pools' settings, the vector ISA torch's own kernels and oneDNN's may use (read when torch loads;
# they pick other kernels, so other timings and other rounding), the GPUs it sees, the Slurm job.
RECORDED_ENV = ("OMP_", "MKL_", "OPENBLAS_", "ATEN_CPU_CAPABILITY", "ONEDNN_", "DNNL_", "CUDA_VISIBLE", "SLURM_JOB_ID")
# Every variable (or prefix) of the environment that changes what a run does, those it records
# included: the C compiler that builds the kernel (CC, found on PATH) and what a compiler reads,
# the temp dir the kernel is cached in, torch's, CUDA's and Triton's settings, the timed-run slot,
# the memory a run may assume free (train/memory.py).
# A warm worker serves only jobs whose environment agrees with its own on them (worker.identity).
RUN_ENV = (
    *RECORDED_ENV,
    *("CC", "CXX", "CFLAGS", "PATH", "CPATH", "C_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH"),
    *("GCC_EXEC_PREFIX", "LD_LIBRARY_PATH", "LD_PRELOAD", "TMPDIR", "TEMP", "TMP"),
    *(
        "TORCH",
        "PYTORCH_",
        "CUDA_",
        "CUBLAS_",
        "NVIDIA_TF32_OVERRIDE",
        "TRITON_",
        "MNISTBENCH_TIMED_SLOT",
        "MNISTBENCH_FREE_MEMORY",
    ),
)


def environment(environ=None) -> dict:
    """The variables of RUN_ENV that `environ` (this process's environment) sets."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(RUN_ENV)}


def settings(cfg: dict) -> dict:
    """The run's settings from the config, flat: {'epochs': 4, 'training.lr': 0.5, ...}: every key
    the schema marks as one a run's result depends on (x-run)."""
    return {key: schema.get(cfg, key) for key in schema.run_keys()}


def settings_json(cfg: dict) -> str:
    return json.dumps(settings(cfg), sort_keys=True)


def _imports(path: Path) -> list[str]:
    """The package modules a source file imports (anywhere in it, functions included)."""
    st = path.stat()
    return _imports_of(str(path), st.st_mtime_ns, st.st_size)


@functools.cache  # per file and version: the Snakefile asks for the same files' imports many times
def _imports_of(path: str, mtime_ns: int, size: int) -> list[str]:
    """The package modules a file imports, as dotted names below the package: `from mnistbench
    import files` gives "files", `from mnistbench.config import catalog` "config.catalog", `from
    mnistbench.train.modes import X` "train.modes" (a name that is no module, such as BenchError
    or X, finds no file in `sources` and is dropped there)."""
    names = []
    # Imports are statements: only statements are searched, in every block (functions, classes,
    # branches, handlers), not the expressions in them, which hold most of a module's nodes.
    todo = list(ast.parse(Path(path).read_text(), path).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mnistbench":
            below = node.module.split(".")[1:]
            names += [".".join(below)] + [".".join([*below, a.name]) for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name.removeprefix("mnistbench.") for a in node.names if a.name.startswith("mnistbench.")]
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo += [
                n for n in getattr(node, block, ()) if isinstance(n, (ast.stmt, ast.excepthandler, ast.match_case))
            ]
    return [n for n in names if n]


def module_path(name: str) -> Path:
    """The source file of a dotted module name below the package ("train.modes")."""
    return PACKAGE.joinpath(*name.split(".")).with_suffix(".py")


def sources(*modules: str, scripts: tuple = ()) -> list[str]:
    """The source files that these package modules (dotted names below the package, such as
    "collect.aggregate") and `scripts` (files of workflow/scripts) run: each file and,
    transitively, every package module it imports (read from the source, nothing is imported),
    with the C source a module of the same name builds (train/kernel.py: kernel.c). The code
    inputs of a rule whose script imports these modules, so that an edit of any reruns it."""
    seen, todo = {}, list(modules)
    for script in scripts:
        path = SCRIPTS / script
        seen[script] = str(path)
        todo += _imports(path)
    while todo:
        name = todo.pop()
        path = module_path(name)
        if name in seen or not path.exists():
            continue
        seen[name] = str(path)
        if path.with_suffix(".c").exists():
            seen[f"{name}.c"] = str(path.with_suffix(".c"))
        for f in sorted(path.parent.glob(READS.get(name, "")) if name in READS else []):
            seen[f"{name}:{f.name}"] = str(f)
        todo += _imports(path)
    return sorted(seen.values())


def digest(files) -> str:
    """Hash of the files' names and content: a rule's rerun trigger (a param) for files of the
    project that it reads. By content, not by the files' paths or times: a project moved, or
    cloned anew with its results copied in, has the same files."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).name.encode() + b"\0" + Path(f).read_bytes())
    return h.hexdigest()[:16]


def fingerprint(*modules: str, scripts: tuple = ()) -> str:
    """The digest of the source that these modules and scripts run (`sources`): a rule's rerun
    trigger for its code."""
    return digest(sources(*modules, scripts=scripts))


@functools.cache  # once per process: reading the imports of 22 files costs ~0.35 s, and a warm
# worker whose sources changed exits before it trains again (worker.fingerprint)
def code_fingerprint(task: str = "train") -> str:
    """The fingerprint of the source that a timed job of `task` runs (its script, the worker that
    serves it and the task's module, with everything they import): it changes exactly when a
    run's code does; an edit of the analysis or of the figures changes nothing here."""
    return fingerprint(TASKS[task][0], scripts=({"train": "train.py", "profile": "profile_steps.py"}[task],))
