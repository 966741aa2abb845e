from mnistbench import analysis
from mnistbench.jobs import job

with job(snakemake) as log:
    analysis.run(snakemake.input, snakemake.output, snakemake.config, log=log)
