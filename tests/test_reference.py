"""A reference machine (a GPU run committed under bench/reference/<name>/) is shown beside this
run's results, labelled with its hardware, software and date, and never merged into them; with
none, nothing is shown and nothing is made up. On a synthetic reference folder made here."""

import json
import os

import pandas as pd
import pytest
from conftest import copy_repo, snakemake, tiny_config
from mnistbench.collect import reference
from mnistbench.config import catalog
from mnistbench.report import figures, summary, words
from mnistbench.train import records
from snakemake.iocontainers import Namedlist
from test_machines import EPYC, H100, rows

GRID = [1, 4, 16, 64, 256, 1024, 4096]
XEON_H100 = H100  # the reference's GPU node (its cpu is a Xeon)


def reference_folder(root, name="h100-box", columns=records.COLUMNS):
    """bench/reference/<name>/summary/ of a GPU machine: cpu and cuda runs of one host, with the
    environment beside them, as bench/gpu_reference.py unpacks them."""
    cpu = rows(XEON_H100.split("; ")[0] + "; torch 2.11.0", ["gpu01"], modes=("module",), sizes=GRID, repeats=3)
    cuda = rows(XEON_H100, ["gpu01"], device="cuda", modes=("module",), sizes=GRID, repeats=3, seed=5)
    runs = pd.concat([cpu, cuda], ignore_index=True).assign(start_utc="2026-12-05T10:00:00.000+00:00")
    folder = root / name / "summary"
    folder.mkdir(parents=True)
    runs.reindex(columns=columns).to_csv(folder / "runs.csv", index=False)
    env = dict(host="gpu01", device="cuda", device_name="NVIDIA H100 80GB HBM3", torch="2.11.0", cuda="13.0")
    pd.DataFrame([dict(env, python="3.12.3", git_commit="0123456789abcdef")]).to_csv(
        folder / "environment.csv", index=False
    )
    return folder / "runs.csv"


def own_runs():
    """This run: a cpu-only machine."""
    return rows(EPYC, ["vm"], modes=("module", "kernel"), sizes=GRID, repeats=3)


def analyse(refs):
    empty_transfer = pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds", "gb_per_s"])
    prof, env = pd.DataFrame(columns=["host", "model", "mode", "status"]), pd.DataFrame(columns=["host", "device"])
    return summary.analyse(own_runs(), empty_transfer, prof, env, {"quality": {"use": ["ok"]}}, refs)


def test_a_reference_gpu_stands_beside_a_cpu_only_run_labelled(tmp_path):
    (ref,), notes = reference.load_all([reference_folder(tmp_path)])
    assert notes == [] and ref.label == "reference h100-box (NVIDIA H100 80GB HBM3, 80 GiB, 2026-12-05)"
    assert "torch 2.11.0" in ref.about and "commit 0123456789ab" in ref.about and "from 2026-12-05" in ref.about
    tables, found = analyse([ref])
    md = words.summary_md(found)
    head = md.split("## The headline", 1)[1].split("\n## ", 1)[0]
    assert "On vm, cpu, mlp-16-16:" in head and "reference" not in head  # this run's headline is this run's
    section = md.split(f"## Reference machine: {ref.label}", 1)[1].split("\n## ", 1)[0]
    assert "not merged into this run's numbers" in section and ref.about in section
    # Its own crossover, from its own runs: 300 + 0.01·b < 40 + 2·b from b = 131 on, so from 256.
    assert "cuda's best mode beats the cpu's from batch 256" in section
    assert f"On {ref.label}, cuda, mlp-16-16:" in section
    # Its rows stand in the tables beside this run's, marked; this run's keep an empty mark.
    lad = tables["ladder"]
    assert set(lad["reference"]) == {"", ref.label} and set(lad.loc[lad["reference"] == "", "place"]) == {"vm"}
    assert set(tables["map"].loc[tables["map"]["reference"] == ref.label, "device"]) == {"cpu", "cuda"}
    # The figures: the ladder's reference row after this run's, the map a panel for each.
    fig = figures.ladder(lad)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["batch 1 — vm", "batch 4096 — vm", f"batch 1 — {ref.label}", f"batch 4096 — {ref.label}"]
    fig = figures.map_(tables["map"], title=words.title(found, "map"))
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [
        "no accelerator ran: the cpu's best mode, samples/s — vm",
        f"best cuda over best cpu — {ref.label}",
    ]
    title = " ".join(fig._suptitle.get_text().split())  # this run's first network, not the reference's
    assert title.startswith("mlp-16-16 (52.7 kFLOP per sample): no accelerator ran on vm") and ref.label not in title
    pages = words.pages(found, tables)
    assert ref.label in pages["ladder"] and ref.label in pages["map"]


def test_without_a_reference_nothing_is_shown(tmp_path):
    assert reference.runs_files(tmp_path / "none") == []
    tables, found = analyse([])
    md = words.summary_md(found)
    assert "Reference machine" not in md and "reference" not in " ".join(words.pages(found, tables)["ladder"])
    assert set(tables["ladder"]["reference"]) == {""}


def test_a_reference_of_another_version_is_named_in_a_note_not_shown(tmp_path):
    old = [c for c in records.COLUMNS if c not in ("model", "flop_per_sample")]
    notes = reference.load_all([reference_folder(tmp_path, "old-gpu", columns=old)])[1]
    (note,) = notes
    assert note.startswith("reference old-gpu not shown:") and "missing columns: model" in note


def test_the_analysis_rule_reads_its_references_and_says_what_it_could_not(tmp_path):
    """analysis.run as the rule calls it: the reference's runs.csv among its inputs."""
    own = own_runs().reindex(columns=records.COLUMNS)
    for name, df in [
        ("runs", own),
        ("transfer", pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds", "gb_per_s"])),
    ]:
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    pd.DataFrame(columns=records.PROFILE_COLUMNS).to_csv(tmp_path / "profile.csv", index=False)
    pd.DataFrame(columns=["host", "device"]).to_csv(tmp_path / "environment.csv", index=False)
    good = reference_folder(tmp_path / "refs")
    bad = reference_folder(tmp_path / "refs", "old-gpu", columns=[c for c in records.COLUMNS if c != "model"])
    inp = Namedlist(fromdict={n: str(tmp_path / f"{n}.csv") for n in ("runs", "transfer", "profile", "environment")})
    inp.references = [str(good), str(bad)]  # as report.smk names them
    out = {name: str(tmp_path / "out" / f"{name}.csv") for name in catalog.TABLES}
    out.update({f"rst_{name}": str(tmp_path / "out" / f"{name}.rst") for name in [*figures.FIGURES, "answer"]})
    out = Namedlist(
        fromdict=dict(out, summary_md=str(tmp_path / "out/summary.md"), facts=str(tmp_path / "out/facts.json"))
    )
    (tmp_path / "out").mkdir()
    summary.run(inp, out, {"quality": {"use": ["ok"]}}, log=lambda m: None)
    md = (tmp_path / "out/summary.md").read_text()
    assert "## Reference machine: reference h100-box" in md and "reference old-gpu not shown" in md
    assert set(pd.read_csv(tmp_path / "out/ladder.csv")["reference"].fillna("")) == {
        "",
        "reference h100-box (NVIDIA H100 80GB HBM3, 80 GiB, 2026-12-05)",
    }


@pytest.mark.parametrize("show", [True, False])
def test_the_report_reads_the_references_committed_beside_the_workflow(mirror, tmp_path, show):
    """bench/reference/<name>/summary/runs.csv beside the workflow is an input of the analysis
    (named from the working directory, so that a moved project names it alike; its content is a
    param, so an edit of it redraws), unless `reference: false`."""
    repo = copy_repo(tmp_path / "repo")
    path = reference_folder(repo / "bench" / "reference")
    cfg = tiny_config(*mirror, devices=["cpu"], reference=show)
    proc = snakemake(tmp_path / "wd", cfg, "-n", repo=repo)
    (analyse_job,) = [
        block
        for block in proc.stdout.split("\n\n")
        if block.strip().startswith(("rule analyse", "[")) and "rule analyse:" in block
    ]
    assert (os.path.relpath(path, tmp_path / "wd") in analyse_job) == show, analyse_job
    assert json.loads(json.dumps(cfg))["reference"] == show
