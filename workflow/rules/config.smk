# Config handling before validation: typed command-line values and one-line schema errors.
import yaml


def typed_command_line_values(config):
    """`--config batch_sizes=[1,64]` arrives as ['1', '64']: Snakemake parses lists and dicts
    given with --config by YAML's BaseLoader, which keeps every leaf a string. Re-read just
    those leaves (not config files' values) so numbers and booleans validate."""

    def typed(v):
        if isinstance(v, list):
            return [typed(x) for x in v]
        if isinstance(v, dict):
            return {k: typed(x) for k, x in v.items()}
        if isinstance(v, str):
            try:
                parsed = yaml.safe_load(v)
            except yaml.YAMLError:
                return v
            return parsed if isinstance(parsed, (int, float, bool)) else v
        return v

    def apply(cfg, cli, nested):
        for key, value in cli.items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                apply(cfg[key], value, True)
            elif nested or isinstance(
                value, (list, dict)
            ):  # top-level scalars are typed already
                cfg[key] = typed(value)

    apply(config, workflow.config_settings.config, False)


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
