"""The docs speak of the registries as they are: every mode (in ladder order) and every config key
is documented, every figure has a caption, and the schema knows the device names devices.py does."""

import re

import yaml
from conftest import REPO
from mnistbench import devices, figures, modes


def backticked(text: str) -> list:
    """Names in backticks, each once, in the order they first appear."""
    return list(dict.fromkeys(re.findall(r"`([a-z_0-9]+)`", text)))


def row(table: str, key: str) -> str:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| `{key}` |")]
    return line


def test_every_mode_is_documented_in_ladder_order():
    cfg_doc = (REPO / "config/README.md").read_text()
    named = [m for m in backticked(row(cfg_doc, "modes").split("|")[3]) if m in modes.MODES]
    assert named == list(modes.MODES), "config/README.md's `modes` row must list every rung, in ladder order"
    readme = (REPO / "README.md").read_text()
    section = readme.split("The modes, from the beginner's code", 1)[1].split("\n\n", 1)[0]
    assert [m for m in backticked(section) if m in modes.MODES] == list(modes.MODES)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    listed = schema["properties"]["modes"]["description"].split(":", 1)[1].split("(", 1)[0]
    assert [m.strip() for m in listed.split(",")] == list(modes.MODES), "the schema's `modes` must list every rung"


def test_every_config_key_is_documented():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    doc = (REPO / "config/README.md").read_text()
    for key, spec in schema["properties"].items():
        assert f"`{key}" in doc, f"config key {key} is not in config/README.md"
        for sub in spec.get("properties", {}) if key not in ("mnist",) else ():
            assert f"`{key}.{sub}`" in doc or f"`{sub}`" in doc, f"config key {key}.{sub} is not documented"


def test_every_figure_has_a_caption_and_a_category():
    for name, f in figures.FIGURES.items():
        caption = REPO / "workflow/report" / f"{name}.rst"
        assert caption.exists(), f"figure {name} needs its caption {caption}"
        assert f"results/summary/report/{name}.rst" in caption.read_text()
        assert f.category and f.content


def test_the_schema_knows_the_device_names_of_devices_py():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    listed = schema["properties"]["devices"]["oneOf"][1]["items"]["pattern"]
    assert listed == devices.PATTERN
    for name in ("cpu", "cuda", "cuda:3", "mps"):
        assert re.match(listed, name) and re.fullmatch(devices.SLUG_PATTERN, devices.slug(name))
    assert not re.match(listed, "tpu")


def test_docs_cite_no_issue_numbers():
    for doc in ["README.md", "bench/README.md", "config/README.md", "profiles/README.md"]:
        text = (REPO / doc).read_text()
        assert not re.search(r"\bissue \d+|\(issue|#\d{1,3}\b", text, re.I), doc
