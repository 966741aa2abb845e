"""The config schema as the package reads it: every key's default, and which keys a run's result
depends on. Torch-free: the Snakefile, the train jobs' clients and the analysis read it.

workflow/schemas/config.schema.yaml marks the keys that change a run's result with `x-run`:
`result` for a setting that every run of one summary shares, `host` for one that each machine may
set for itself (its cores). The mark is inherited by an object's keys, so a key added under
`training` is a run setting with no other edit: it retimes the runs when it changes and keeps runs
made with other values out of one summary. `x-modes` names the modes a setting concerns, where
it concerns only some (`training.amp_dtype`: only `amp`).
"""

import functools
from pathlib import Path

import yaml

PATH = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.yaml"


@functools.cache
def load() -> dict:
    return yaml.safe_load(PATH.read_text())


def defaults(spec: dict | None = None) -> dict:
    """The default of every key of a schema object, nested objects filled key by key, as
    Snakemake's validation fills a config."""
    spec = load() if spec is None else spec
    out = {}
    for key, sub in spec.get("properties", {}).items():
        if sub.get("type") == "object" and "properties" in sub:
            out[key] = dict(sub.get("default", {}), **defaults(sub))
        elif "default" in sub:
            out[key] = sub["default"]
    return out


def walk(node: dict | None = None, prefix: str = "", inherited: str | None = None):
    """(dotted key, its x-run scope or None, its schema) for every leaf key of the schema (or of
    `node`), in the schema's order."""
    node = load() if node is None else node
    for key, sub in node.get("properties", {}).items():
        scope = sub.get("x-run", inherited)
        if sub.get("type") == "object" and "properties" in sub:
            yield from walk(sub, f"{prefix}{key}.", scope)
        else:
            yield f"{prefix}{key}", scope, sub


def run_keys(scope: str | None = None) -> list[str]:
    """The dotted keys a run's result depends on, in the schema's order: those of `scope`
    ('result' or 'host'), or all of them."""
    return [k for k, s, _ in walk() if s and (scope is None or s == scope)]


def get(cfg: dict, key: str):
    """A dotted key's value in a config ("training.lr")."""
    v = cfg
    for part in key.split("."):
        v = v[part]
    return v


def training_options() -> dict:
    """{setting: (default, modes it concerns or None for every mode)} of every key under `training`."""
    return {
        k.removeprefix("training."): (sub.get("default"), tuple(sub["x-modes"]) if "x-modes" in sub else None)
        for k, _, sub in walk()
        if k.startswith("training.")
    }
