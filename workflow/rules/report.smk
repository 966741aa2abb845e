# The analysis after training: tables, the why, figures and the report's run-specific text.
# Nothing here depends on a train job's code, only on the summary CSVs, so editing a figure or
# an analysis reruns these rules and never a timed run:
#   snakemake --cores all                      # after editing report/figures.py or a `figures` option
#   snakemake --report results/report.html
# The code a rule's script runs, the package modules it imports included, is a param of the rule
# (depends.fingerprint): an edit of any reruns it.
# Other machines' results/summary/runs.csv (their epochs/environment/transfer/profile tables
# next to it come along), merged by host in `aggregate`.
from mnistbench.config import catalog
from mnistbench.collect import reference

MERGE = config["merge_runs"]
# Reference machines shown beside this run's results (their runs.csv; mnistbench/collect/reference.py).
# Files of the project, not of the run: named from the working directory, as Snakemake's records
# name every input, and ancient (a clone's checkout gives them new times), their content the
# analysis' rerun trigger (a param): a project moved or cloned anew plans nothing for them.
REFERENCES = (
    [ancient(os.path.relpath(p)) for p in reference.runs_files()]
    if config["reference"]
    else []
)
# The registries: name, category and label of every figure and of every analysis table.
FIGURES = list(catalog.FIGURES)
FIGURE_OUTPUTS = {
    f.name: report(
        f"results/figures/{f.name}.png",
        caption=f"../report/{f.name}.rst",
        category=f.category,
        labels={"type": "figure", "content": f.content},
    )
    for f in catalog.FIGURES.values()
}
# The text beside each figure (its caption includes it), written by `analyse`.
FIGURE_PAGES = {f"rst_{name}": f"results/summary/report/{name}.rst" for name in FIGURES}
# The registry of the analysis tables: results/summary/<name>.csv, captioned by <name>_table.rst.
TABLE_OUTPUTS = {
    t.name: report(
        f"results/summary/{t.name}.csv",
        caption=f"../report/{t.name}_table.rst",
        category=t.category,
        labels={"type": "table", "content": t.content},
    )
    for t in catalog.TABLES.values()
}


rule aggregate:
    input:
        rows=run_files("csv"),
        envs=run_files("json"),
        transfer="results/preload/transfer.csv",
        profiles=expand("results/profile/{device}.csv", device=PROFILED),
        merged=MERGE,
    output:
        runs=report(
            "results/summary/runs.csv",
            caption="../report/runs.rst",
            category="Environment",
            labels={"type": "table", "content": "every run"},
        ),
        summary=report(
            "results/summary/summary.csv",
            caption="../report/summary.rst",
            category="Throughput",
            labels={"type": "table", "content": "medians per combination"},
        ),
        environment=report(
            "results/summary/environment.csv",
            caption="../report/environment.rst",
            category="Environment",
            labels={"type": "table", "content": "environment per host"},
        ),
        profile=report(
            "results/summary/profile.csv",
            caption="../report/profile.rst",
            category="Breakdown",
            labels={"type": "table", "content": "profiled steps"},
        ),
        epochs="results/summary/epochs.csv",
        transfer="results/summary/transfer.csv",
        left_out="results/summary/left_out.csv",
    log:
        "logs/aggregate.log",
    conda:
        "../../environment.yml"
    params:
        code=depends.fingerprint("collect.aggregate", scripts=("aggregate.py",)),
        left_out=LEFT_OUT,
        quality=config["quality"],
        later=later_outputs,
    script:
        "../scripts/aggregate.py"


rule analyse:
    input:
        runs="results/summary/runs.csv",
        transfer="results/summary/transfer.csv",
        environment="results/summary/environment.csv",
        profile="results/summary/profile.csv",
        references=REFERENCES,
    output:
        **FIGURE_PAGES,
        **TABLE_OUTPUTS,
        summary_md="results/summary.md",
        rst_answer="results/summary/report/answer.rst",
        facts="results/summary/facts.json",
    log:
        "logs/analyse.log",
    conda:
        "../../environment.yml"
    params:
        code=depends.fingerprint("report.summary", scripts=("analyse.py",)),
        references=depends.digest(REFERENCES),
        config=report_config(),
    script:
        "../scripts/analyse.py"


rule figures:
    input:
        **{name: f"results/summary/{name}.csv" for name in catalog.inputs()},
        facts="results/summary/facts.json",
    output:
        **FIGURE_OUTPUTS,
    log:
        "logs/figures.log",
    conda:
        "../../environment.yml"
    params:
        code=depends.fingerprint("report.figures", scripts=("figures.py",)),
        dpi=config["figures"]["dpi"],
        style=config["figures"]["style"],
        target=config["target_accuracy"],
        use=config["quality"]["use"],
    script:
        "../scripts/figures.py"
