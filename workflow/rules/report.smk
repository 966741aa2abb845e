rule aggregate:
    input:
        rows=run_files("csv"),
        envs=run_files("json"),
    output:
        runs=report(
            "results/summary/runs.csv",
            caption="../report/runs.rst",
            category="Environment",
        ),
        summary=report(
            "results/summary/summary.csv",
            caption="../report/summary.rst",
            category="Throughput",
        ),
        epochs="results/summary/epochs.csv",
        left_out="results/summary/left_out.csv",
    log:
        "logs/aggregate.log",
    conda:
        "../../environment.yml"
    params:
        left_out=LEFT_OUT,
    script:
        "../scripts/aggregate.py"


rule figures:
    input:
        summary="results/summary/summary.csv",
        runs="results/summary/runs.csv",
        transfer="results/preload/transfer.csv",
    output:
        throughput=report(
            "results/figures/throughput.png",
            caption="../report/throughput.rst",
            category="Throughput",
            labels={"figure": "samples/s vs batch size"},
        ),
    log:
        "logs/figures.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/figures.py"
