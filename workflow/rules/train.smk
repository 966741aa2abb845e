rule train:
    input:
        tensors="results/preload/mnist.pt",
    output:
        row="results/runs/{device}/{mode}/bs{batch_size}/r{repeat}.csv",
        env="results/runs/{device}/{mode}/bs{batch_size}/r{repeat}.json",
    log:
        "logs/train/{device}/{mode}/bs{batch_size}_r{repeat}.log",
    wildcard_constraints:
        device=r"cpu|mps|cuda\d*",
        batch_size=r"\d+",
        repeat=r"\d+",
    conda:
        "../../environment.yml"
    threads: train_threads()
    resources:
        # Timed jobs never overlap: the default profile makes this a global limit of 1.
        timed_jobs=1,
        gpu=train_gpus,
        gpu_model=train_gpu_model,
        slurm_partition=train_partition,
        slurm_account=SLURM["account"],
        slurm_extra="--exclusive" if SLURM["exclusive"] else "",
    params:
        device=lambda wc: devs.unslug(wc.device),
        # A warm worker only where jobs run on this machine (see mnistbench/worker.py): a cluster
        # job re-reads the Snakefile in remote mode, and there it trains in its own process.
        warm=config["warm_worker"] and not workflow.remote_exec,
        socket="results/.trainer.sock",
    script:
        "../scripts/train.py"
