from mnistbench import analysis
from mnistbench.jobs import job

with job(snakemake) as log:
    analysis.run(snakemake.input, snakemake.output, snakemake.config, snakemake.input.merged, log=log)
