"""The docs speak of the registries as they are: every mode (in the ladder's order) and every config
key is documented, every figure and analysis table has a caption, and the schema knows the device
names devices.py does."""

import re

import yaml
from conftest import REPO
from mnistbench.config import catalog, devices


def backticked(text: str) -> list:
    """Names in backticks, each once, in the order they first appear."""
    return list(dict.fromkeys(re.findall(r"`([a-z_0-9]+)`", text)))


def row(table: str, key: str) -> str:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| `{key}` |")]
    return line


def test_every_mode_is_documented_in_ladder_order():
    cfg_doc = (REPO / "config/README.md").read_text()
    named = [m for m in backticked(row(cfg_doc, "modes").split("|")[3]) if m in catalog.MODES]
    assert named == list(catalog.MODES), "config/README.md's `modes` row must list every mode, in the ladder's order"
    readme = (REPO / "README.md").read_text()
    section = readme.split("The modes, from the beginner's code", 1)[1].split("\n\n", 1)[0]
    assert [m for m in backticked(section) if m in catalog.MODES] == list(catalog.MODES)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    listed = schema["properties"]["modes"]["description"].split(":", 1)[1].split("(", 1)[0]
    assert [m.strip() for m in listed.split(",")] == list(catalog.MODES), "the schema's `modes` must list every mode"


def documented_keys(doc: str) -> dict:
    """config/README.md's table: each key named in a row's first cell -> that row's default cell."""
    keys = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`"):
            for key in re.findall(r"`([a-z_0-9.]+)`", cells[0]):
                keys[key] = cells[1]
    return keys


def schema_keys(schema: dict) -> dict:
    """Every config key (a nested one as `parent.child`, one level deep) -> its default."""
    out = {}
    for key, spec in schema["properties"].items():
        subs = spec.get("properties", {})
        for sub, sub_spec in subs.items():
            out[f"{key}.{sub}"] = sub_spec.get("default")
        if not subs:
            out[key] = spec.get("default")
    return out


def test_every_config_key_is_documented_in_its_own_row_with_its_default():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    documented = documented_keys((REPO / "config/README.md").read_text())
    keys = schema_keys(schema)
    assert sorted(set(keys) - set(documented)) == [], "config keys without a row in config/README.md"
    assert sorted(set(documented) - set(keys)) == [], "config/README.md documents keys the schema lacks"
    for key, cell in documented.items():
        single = re.fullmatch(r"`([^`]*)`", cell)
        if single:  # a row of one key and one value (not "the official mirrors", not "`110`, `whitegrid`")
            assert yaml.safe_load(single.group(1)) == keys[key], f"config/README.md's default of `{key}`: {cell}"


def test_every_figure_has_a_caption_and_a_category():
    for name, f in catalog.FIGURES.items():
        caption = REPO / "workflow/report" / f"{name}.rst"
        assert caption.exists(), f"figure {name} needs its caption {caption}"
        assert f"results/summary/report/{name}.rst" in caption.read_text()
        assert f.category and f.content


def test_every_analysis_table_has_a_caption_and_no_caption_is_orphaned():
    report = REPO / "workflow/report"
    for name, t in catalog.TABLES.items():
        assert (report / f"{name}_table.rst").exists(), f"table {name} needs its caption {name}_table.rst"
        assert t.category and t.content
    # Every *_table.rst captions a table of the registry (a renamed table leaves none behind).
    tables = {p.name.removesuffix("_table.rst") for p in report.glob("*_table.rst")}
    assert tables == set(catalog.TABLES)


def test_the_readme_lists_every_figure_of_the_registry_in_its_order():
    readme = (REPO / "README.md").read_text()
    (row,) = [ln for ln in readme.splitlines() if ln.startswith("| 5 | `figures` |")]
    assert backticked(row.split("|")[3]) == list(catalog.FIGURES), (
        "README.md's figures row names the registry, in order"
    )


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


# A number with its 95 % interval as summary.md writes it: "63× (43–85×)", "135 k (93.5–137 k)".
WITH_INTERVAL = re.compile(r"\d[\d.,]*(?: [kMG])?×? \(\d[\d.,]*(?: [kMG])?×?–\d[\d.,]*(?: [kMG])?×?\)")
REFERENCE = "### The reference run"


def test_the_docs_quote_the_reference_run_as_its_summary_has_it():
    """One set of numbers for the project's named run: every number with an interval in README.md
    and in bench/README.md's section on that run is in its committed summary
    (bench/reference/summary.md), verbatim, and the README shows its ladder figure."""
    summary = (REPO / "bench/reference/summary.md").read_text()
    bench = (REPO / "bench/README.md").read_text()
    assert REFERENCE in bench, f"bench/README.md has a section '{REFERENCE}'"
    section = bench.split(REFERENCE, 1)[1].split("\n#", 1)[0]
    for doc, text in [("README.md", (REPO / "README.md").read_text()), ("bench/README.md", section)]:
        quoted = WITH_INTERVAL.findall(text)
        assert len(quoted) >= 3, f"{doc} quotes the reference run's headline with its intervals: {quoted}"
        missing = [q for q in quoted if q not in summary]
        assert not missing, f"{doc} quotes numbers that bench/reference/summary.md does not have: {missing}"
    readme = (REPO / "README.md").read_text()
    assert "(bench/reference/ladder.png)" in readme, "the README shows the reference run's ladder figure"
    assert (REPO / "bench/reference/ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
