from mnistbench import aggregate
from mnistbench.jobs import job

with job(snakemake) as log:
    i = snakemake.input
    aggregate.run(i.rows, i.envs, i.transfer, i.profiles, i.merged, snakemake.params.left_out, snakemake.output, log=log)
