# Config handling before and right after validation: values typed as the schema says, one-line
# errors, and the checks a schema cannot express (names from the package's registries).
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
    hint = bad.schema.get("description") if isinstance(bad.schema, dict) else None
    expected = f" (expected: {hint})" if hint else ""
    return WorkflowError(
        f"config key `{key}`: {bad.message}{expected}; fix it in your config file or --config"
    )


def key_error(key, message):
    return WorkflowError(
        f"config key `{key}`: {message}; fix it in your config file or --config"
    )
