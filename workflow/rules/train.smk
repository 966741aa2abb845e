rule train:
    input:
        data=tensors_input(),
    output:
        row="results/runs/{device}/{network}/{mode}/bs{batch_size}/{run}.csv",
        env="results/runs/{device}/{network}/{mode}/bs{batch_size}/{run}.json",
    log:
        "logs/train/{device}/{network}/{mode}/bs{batch_size}_{run}.log",
    wildcard_constraints:
        device=TRAIN_SLUG_PATTERN,
        network=r"[A-Za-z0-9_.-]+",
        batch_size=r"\d+",
        run=RUN_PATTERN,
    conda:
        "../../environment.yml"
    threads: train_threads()
    resources:
        **TIMED_RESOURCES,
    params:
        device=device_of,
        network=network_of,
        models_at_once=models_at_once_of,
        repeat=repeat_of,
        # Rerun triggers: a run is retimed when a setting it depends on or its code changes.
        settings=RUN_SETTINGS,
        code=run_code,
        tensors=tensors_of,
        threads=train_threads(),
        torch_threads=run_threads(),
    shell:
        '"$MNISTBENCH_PYTHON" "$MNISTBENCH_TRAIN_SCRIPT" {output.row:q} {output.env:q} {log:q} {params.tensors:q}'
        " {params.device:q} {params.network:q} {wildcards.mode:q} {wildcards.batch_size} {params.repeat}"
        " {params.torch_threads} {params.models_at_once}"


# An interrupt of Snakemake alone stops the running train jobs too (mnistbench/jobs.py).
if not workflow.remote_exec:
    from mnistbench.jobs import forward_interrupts

    forward_interrupts()
