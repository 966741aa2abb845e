"""The analyse rule: every table of the registry (catalog.TABLES), the facts they hold
(results/summary/facts.json, which the figures rule reads for its titles), results/summary.md and
the report's pages, from the summary tables alone."""

import json

import pandas as pd

from mnistbench import files
from mnistbench.collect import reference
from mnistbench.collect.aggregate import check_settings, usable, with_models_at_once
from mnistbench.config import catalog
from mnistbench.measure import machines
from mnistbench.report import copies, facts, many, tables, words


def compute(runs, transfer, prof, env, cfg, references=()) -> dict:
    """Every table, from data frames; `references`: collect/reference.Reference machines, whose
    ladder, map and crossovers stand beside this run's (their `reference` column names them)."""
    q = cfg.get("quality") or {}
    use = tuple(q.get("use", ["ok"]))
    # Every table compares runs of one model at a time except `many`, which reads them all.
    raw = with_models_at_once(runs)
    all_runs = machines.places(raw)
    runs = many.one_at_a_time(all_runs)
    bw = copies.bandwidth(transfer)
    reps = tables.replicates(runs, use)
    fit_reps = tables.fit_replicates(runs, use, reps)
    gflops = tables.place_gflops(runs, env)
    fit = tables.fits(runs, use, fit_reps, gflops)
    refs = list(references)
    theirs = {r.label: of_reference(r, use) for r in refs}

    def beside(own: pd.DataFrame, name: str) -> pd.DataFrame:
        """This run's table (`reference` empty) with every reference machine's below it."""
        parts = [own.assign(reference="")] + [theirs[r.label][name].assign(reference=r.label) for r in refs]
        return pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)

    return dict(
        runs=runs,
        usable=usable(runs, use),
        rates=tables.rates(runs, use),
        fits=fit,
        crossover=beside(tables.crossover(fit, runs, use, fit_reps), "crossover"),
        speedup=tables.speedup(runs, use, reps),
        map=beside(tables.network_map(runs, use, reps), "map"),
        ladder=beside(tables.ladder(runs, use, reps, gflops), "ladder"),
        many=many.table(all_runs, use),
        references=refs,
        bandwidth=bw,
        dataloader=copies.dataloader(runs, bw, prof, use, reps),
        profile=prof,
        environment=env,
        set_aside=tables.set_aside(raw, use),
        disagreeing=tables.disagreeing(raw, use, q.get("repeat_spread", 1.25)),
        code_notes=check_settings(raw) if "settings" in raw.columns else [],
        use=use,
    )


def of_reference(ref, use) -> dict:
    """The tables a reference machine shows beside this run's, from its own runs alone."""
    runs = many.one_at_a_time(ref.runs)
    reps = tables.replicates(runs, use)
    fit_reps = tables.fit_replicates(runs, use, reps)
    fit = tables.fits(runs, use, fit_reps)
    return dict(
        ladder=tables.ladder(runs, use, reps),
        map=tables.network_map(runs, use, reps),
        crossover=tables.crossover(fit, runs, use, fit_reps),
    )


def analyse(runs, transfer, prof, env, cfg, references=()) -> tuple[dict, dict]:
    """(every table, the facts they hold): what the tests call."""
    t = compute(runs, transfer, prof, env, cfg, references)
    return t, facts.collect(t, cfg)


def plain(o):
    """A numpy scalar as the number it holds, for facts.json."""
    return o.item() if hasattr(o, "item") else str(o)


def run(inp, out, cfg, log=print) -> None:
    runs, prof = pd.read_csv(inp.runs), pd.read_csv(inp.profile)
    refs, notes = reference.load_all(inp.get("references", []))
    t, found = analyse(runs, pd.read_csv(inp.transfer), prof, pd.read_csv(inp.environment), cfg, refs)
    found["notes"] += [dict(kind="text", text=n) for n in notes]
    for name in catalog.TABLES:  # every table of the registry (workflow/rules/report.smk)
        files.write_csv(out[name], t[name])
    files.write_text(out.facts, json.dumps(found, indent=1, default=plain) + "\n")
    files.write_text(out.summary_md, words.summary_md(found))
    for name, text in words.pages(found, t).items():  # the workflow page and one per figure
        files.write_text(out[f"rst_{name}"], text)
    for s in words.sentences(found["headline"]):
        log(s)
