from mnistbench import aggregate
from mnistbench.jobs import job

with job(snakemake) as log:
    aggregate.run(snakemake.input.rows, snakemake.input.envs, snakemake.params.left_out, snakemake.output, log=log)
