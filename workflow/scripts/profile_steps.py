from mnistbench import profiling
from mnistbench.files import write_rows
from mnistbench.jobs import job

with job(snakemake) as log:
    p = snakemake.params
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    rows = profiling.profile_device(cfg, snakemake.input.tensors, p.device, p.modes, p.batch_sizes, log=log)
    write_rows(snakemake.output[0], profiling.COLUMNS, rows)
