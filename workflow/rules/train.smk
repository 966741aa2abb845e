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
        **TIMED_RESOURCES,
    params:
        device=lambda wc: devs.unslug(wc.device),
    script:
        "../scripts/train.py"
