from mnistbench import profiling
from mnistbench.jobs import job
from mnistbench.records import write_rows

with job(snakemake) as log:
    p = snakemake.params
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    rows = profiling.profile_device(cfg, snakemake.input.tensors, p.device, p.modes, p.batch_sizes, log=log)
    write_rows(snakemake.output[0], profiling.COLUMNS, rows)
