# The analysis after training: tables, the why, figures and the report's run-specific text.
# Nothing here depends on a train job's code, only on the summary CSVs, so editing a figure or
# an analysis reruns these rules and never a timed run:
#   snakemake --cores all                      # after editing figures.py or a `figures` option
#   snakemake --report results/report.html
# The package modules are inputs of the rules that import them (PKG: common.smk).
# Other machines' results/summary/runs.csv (their epochs/environment/transfer/profile tables
# next to it come along), merged by host in `aggregate`.
MERGE = config["merge_runs"]
FIGURES = ["throughput", "speedup", "breakdown", "ops", "accuracy", "bandwidth"]


rule aggregate:
    input:
        rows=run_files("csv"),
        envs=run_files("json"),
        transfer="results/preload/transfer.csv",
        profiles=expand("results/profile/{device}.csv", device=PROFILED),
        merged=MERGE,
        code=str(PKG / "aggregate.py"),
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
        left_out=LEFT_OUT,
    script:
        "../scripts/aggregate.py"


rule analyse:
    input:
        runs="results/summary/runs.csv",
        transfer="results/summary/transfer.csv",
        environment="results/summary/environment.csv",
        profile="results/summary/profile.csv",
        code=[str(PKG / "analysis.py"), str(PKG / "aggregate.py")],
    output:
        fits=report(
            "results/summary/fits.csv",
            caption="../report/fits.rst",
            category="Throughput",
            labels={"type": "table", "content": "fits a + b·batch"},
        ),
        crossover=report(
            "results/summary/crossover.csv",
            caption="../report/crossover.rst",
            category="Speedup",
            labels={"type": "table", "content": "crossover batch size"},
        ),
        speedup=report(
            "results/summary/speedup.csv",
            caption="../report/speedup_table.rst",
            category="Speedup",
            labels={"type": "table", "content": "speedup per mode x batch"},
        ),
        dataloader=report(
            "results/summary/dataloader.csv",
            caption="../report/dataloader.rst",
            category="Data transfer",
            labels={"type": "table", "content": "DataLoader transfer share"},
        ),
        bandwidth=report(
            "results/summary/bandwidth.csv",
            caption="../report/bandwidth_table.rst",
            category="Data transfer",
            labels={"type": "table", "content": "copy latency and bandwidth"},
        ),
        summary_md="results/summary.md",
        rst_answer="results/summary/report/answer.rst",
        rst_throughput="results/summary/report/throughput.rst",
        rst_speedup="results/summary/report/speedup.rst",
        rst_breakdown="results/summary/report/breakdown.rst",
        rst_accuracy="results/summary/report/accuracy.rst",
        rst_bandwidth="results/summary/report/bandwidth.rst",
        rst_ops="results/summary/report/ops.rst",
    log:
        "logs/analyse.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/analyse.py"


rule figures:
    input:
        runs="results/summary/runs.csv",
        epochs="results/summary/epochs.csv",
        transfer="results/summary/transfer.csv",
        fits="results/summary/fits.csv",
        speedup="results/summary/speedup.csv",
        profile="results/summary/profile.csv",
        code=[
            str(PKG / "figures.py"),
            str(PKG / "analysis.py"),
            str(PKG / "aggregate.py"),
        ],
    output:
        throughput=report(
            "results/figures/throughput.png",
            caption="../report/throughput.rst",
            category="Throughput",
            labels={"type": "figure", "content": "samples/s vs batch size"},
        ),
        speedup=report(
            "results/figures/speedup.png",
            caption="../report/speedup.rst",
            category="Speedup",
            labels={"type": "figure", "content": "speedup heatmap"},
        ),
        breakdown=report(
            "results/figures/breakdown.png",
            caption="../report/breakdown.rst",
            category="Breakdown",
            labels={"type": "figure", "content": "step-time breakdown"},
        ),
        ops=report(
            "results/figures/ops.png",
            caption="../report/ops.rst",
            category="Breakdown",
            labels={"type": "figure", "content": "ops per step"},
        ),
        accuracy=report(
            "results/figures/accuracy.png",
            caption="../report/accuracy.rst",
            category="Accuracy",
            labels={"type": "figure", "content": "time to accuracy"},
        ),
        bandwidth=report(
            "results/figures/bandwidth.png",
            caption="../report/bandwidth.rst",
            category="Data transfer",
            labels={"type": "figure", "content": "copy bandwidth vs size"},
        ),
    log:
        "logs/figures.log",
    conda:
        "../../environment.yml"
    params:
        dpi=config["figures"]["dpi"],
        style=config["figures"]["style"],
        target=config["target_accuracy"],
    script:
        "../scripts/figures.py"
