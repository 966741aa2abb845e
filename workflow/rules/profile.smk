# Where a step's time goes and how many ops it dispatches: torch.profiler on a few steps of every
# network x mode of a device, at the smallest and the largest batch size. It needs nothing from the train
# jobs (only the preloaded tensors), and it takes the same `timed_jobs` slot as a train job, so it
# never runs while a timed run is being measured (the profiler loads the cpu and the GPU).
# Locally the first repeat's warm worker profiles (torch and the compiler imported there already).
PROFILED = [devs.slug(d) for d in DEVICES if any(g == d for g, *_ in GRID)]


rule profile:
    input:
        data=tensors_input(),
    output:
        "results/profile/{device}.csv",
    log:
        "logs/profile/{device}.log",
    wildcard_constraints:
        device=devs.SLUG_PATTERN,
    conda:
        "../../environment.yml"
    threads: train_threads()
    resources:
        **TIMED_RESOURCES,
    params:
        device=device_of,
        networks=[s.network.name for s in NETWORKS.values()],
        modes=lambda wc: [
            m
            for m in MODES
            if any(devs.slug(d) == wc.device and g == m for d, _, g, _ in GRID)
        ],
        batch_sizes=sorted({min(BATCH_SIZES), max(BATCH_SIZES)}),
        settings=RUN_SETTINGS,
        code=PROFILE_CODE,
        tensors=tensors_of,
        threads=train_threads(),
        torch_threads=run_threads(),
    script:
        "../scripts/profile_steps.py"
