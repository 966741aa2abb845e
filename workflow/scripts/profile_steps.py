import csv
import os

from mnistbench import profiling
from mnistbench.jobs import job

with job(snakemake) as log:
    p = snakemake.params
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    rows = profiling.profile_device(cfg, snakemake.input.tensors, p.device, p.modes, p.batch_sizes, log=log)
    tmp = snakemake.output[0] + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=profiling.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, snakemake.output[0])
