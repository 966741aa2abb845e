# Config handling before and right after validation: values typed as the schema says, one-line
# errors, and the checks a schema cannot express (names from the package's registries).
import difflib
import logging
import os
import shutil
import sys
from pathlib import Path

import yaml

BOOLEANS = {
    "true": True,
    "yes": True,
    "on": True,
    "false": False,
    "no": False,
    "off": False,
}


# Less free space than this where the workflow writes (its working directory, results/) and a
# run cannot even record that it started: Snakemake's own log and lock files would fail first.
MIN_FREE_BYTES = 1 << 20


def check_space(*folders):
    """A disk with no space left stops the run before Snakemake writes anything, in one line. The
    line still goes to Snakemake's log file, which cannot be written: that failure stays silent
    (logging.raiseExceptions), instead of a logging traceback per message."""
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        free = shutil.disk_usage(folder).free
        if free < MIN_FREE_BYTES:
            sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))
            from mnistbench.files import full_disk

            logging.raiseExceptions = False
            where = os.path.realpath(folder)
            raise WorkflowError(
                full_disk(where).replace("(the disk is full)", f"({free} bytes free)")
            )


def check_writable(*tops):
    """Every folder the jobs write into (the working directory and the folders under `tops`:
    results/, logs/) must be writable, or Snakemake fails on the first output it removes or makes
    with a traceback, or (where the files themselves cannot be written: a read-only mount) while
    it plans, with its own many lines about write-protected output: one line naming the folder
    and the fix instead. Called when the Snakefile is read, before Snakemake plans, so a dry run
    says it too. A symlinked results/ is followed."""
    bad = [] if os.access(".", os.W_OK) else ["."]
    for top in tops:
        for folder, _, _ in os.walk(top):
            if not os.access(folder, os.W_OK):
                bad.append(folder)
    if bad:
        more = f" (and {len(bad) - 1} more folders)" if len(bad) > 1 else ""
        # A read-only mount is no matter of permissions: chmod cannot fix it.
        if os.statvfs(bad[0]).f_flag & os.ST_RDONLY:
            fix = "mount it writable"
        else:
            fix = f"make it writable (chmod -R u+w {' '.join(tops)})"
        raise WorkflowError(
            f"the folder {os.path.abspath(bad[0])}{more} is not writable: {fix} or run where "
            "you can write, and rerun"
        )


def check_config_file(path):
    """A config file that is not YAML, or not a mapping of keys, named in one line (Snakemake's
    own message names no file)."""
    if not os.path.exists(path):
        return
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        where = getattr(e, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise WorkflowError(
            f"config file {path} is not YAML{at}: fix its syntax, or restore it from the repository"
        ) from None
    if not isinstance(loaded, dict):
        raise WorkflowError(
            f"config file {path} is not a mapping of config keys (it holds a {type(loaded).__name__}): "
            "write it as `key: value` lines (every key: config/README.md)"
        )


def typed(value, schema):
    """`value` with its string leaves typed as `schema` says. Snakemake reads `--config` lists,
    dicts and booleans as strings ('false', ['1', '64']), and YAML 1.1 reads 1e-3 as a string;
    both are ordinary ways to write a number or a boolean, so they are accepted."""
    if not isinstance(schema, dict):
        return value
    for alternative in schema.get("oneOf", []):
        if isinstance(value, list) and alternative.get("type") == "array":
            return typed(value, alternative)
    kind = schema.get("type")
    if kind == "array" and isinstance(value, list):
        return [typed(v, schema.get("items", {})) for v in value]
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: typed(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, str):
        text = value.strip()
        try:
            if kind == "boolean" and text.lower() in BOOLEANS:
                return BOOLEANS[text.lower()]
            if kind == "integer":
                return int(text)
            if kind == "number":
                return float(text)
        except ValueError:
            pass  # left as it is: validation names the key
    return value


def typed_config(config, schema_path):
    schema = yaml.safe_load((Path(workflow.basedir) / schema_path).read_text())
    for key, value in typed(dict(config), schema).items():
        config[key] = value


def config_error(e):
    """A schema violation as one line naming the key and the fix, not the schema dump."""
    bad = e.__context__  # the jsonschema ValidationError that Snakemake wrapped
    if not hasattr(bad, "absolute_path"):
        return e
    key = ".".join(map(str, bad.absolute_path)) or "(top level)"
    if bad.validator == "additionalProperties":
        return unknown_keys(key, bad.instance, bad.schema.get("properties", {}))
    hint = bad.schema.get("description") if isinstance(bad.schema, dict) else None
    expected = f" (expected: {hint})" if hint else ""
    return WorkflowError(
        f"config key `{key}`: {bad.message}{expected}; fix it in your config file or --config"
    )


# Keys an earlier version of the config had, and their name now: named in the line about them.
RENAMED = {"model": "training"}


def unknown_keys(where, instance, known):
    """An unknown key (a typo, most often) named with the closest known key of its object."""
    prefix = "" if where == "(top level)" else f"{where}."
    parts = []
    for k in sorted(map(str, set(instance) - set(known))):
        close = difflib.get_close_matches(k, list(known), n=1, cutoff=0.6)
        if f"{prefix}{k}" in RENAMED:
            hint = f"it is now `{RENAMED[prefix + k]}`"
        elif close:
            hint = f"did you mean `{prefix}{close[0]}`?"
        else:
            hint = f"known keys here: {', '.join(known)}"
        parts.append(f"`{prefix}{k}` is unknown ({hint})")
    return WorkflowError(
        f"config key {'; '.join(parts)}; fix it in your config file or --config "
        "(every key: config/README.md)"
    )


def key_error(key, message):
    return WorkflowError(
        f"config key `{key}`: {message}; fix it in your config file or --config"
    )
