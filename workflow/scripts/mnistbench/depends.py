"""What a run's result depends on, as Snakemake's rerun triggers of the jobs that train or time
and as the record each run keeps: its settings from the config, and a fingerprint of the code
that trains and times it. Torch-free: the Snakefile computes both for every invocation.
"""

import ast
import hashlib
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Modules that only read finished runs: editing them must not retime anything (the figures and the
# analysis rerun on their own). Every other source file of the package trains or times a run.
READS_RESULTS = {
    "aggregate.py",
    "analysis.py",
    "catalog.py",
    "words.py",
    "figures.py",
    "profiling.py",
    "synthetic.py",
    "jobs.py",
    "machines.py",
}
# Config keys a run's result depends on (nested keys with a dot). cpu_threads belongs to a host:
# it may differ between merged machines; the others may not differ within one summary.
SETTINGS = (
    "epochs",
    "train_samples",
    "test_samples",
    "warmup_steps",
    "min_timed_s",
    "seed",
    "target_accuracy",
    "retime",
    "model.loss",
    "model.init",
    "model.lr",
    "model.amp_dtype",
    "quality.max_other_cpu",
    "quality.max_busy_share",
    "quality.max_spread",
    "quality.min_timed_steps",
)
HOST_SETTINGS = ("cpu_threads",)


def settings(cfg: dict) -> dict:
    """The run's settings from the config, flat: {'epochs': 4, 'model.lr': 0.5, ...}."""
    out = {}
    for key in SETTINGS + HOST_SETTINGS:
        v = cfg
        for part in key.split("."):
            v = v[part]
        out[key] = v
    return out


def code_fingerprint() -> str:
    """Hash of the source that trains and times a run (the package minus READS_RESULTS, and the
    train job's script): it changes exactly when a run's code does."""
    h = hashlib.sha256()
    files = sorted(f for f in PACKAGE.iterdir() if f.suffix in (".py", ".c") and f.name not in READS_RESULTS)
    for f in [*files, PACKAGE.parent / "train.py"]:
        if f.exists():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def settings_json(cfg: dict) -> str:
    return json.dumps(settings(cfg), sort_keys=True)


def sources(*modules: str) -> list[str]:
    """The package's source files that these modules run: each module's file and, transitively,
    every package module it imports (read from the source, nothing is imported). The code inputs
    of a rule whose script imports these modules, so that an edit of any of them reruns it."""
    seen, todo = {}, list(modules)
    while todo:
        name = todo.pop()
        path = PACKAGE / f"{name}.py"
        if name in seen or not path.exists():
            continue
        seen[name] = str(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "mnistbench":
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mnistbench."):
                todo.append(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                todo += [a.name.split(".")[1] for a in node.names if a.name.startswith("mnistbench.")]
    return sorted(seen.values())
