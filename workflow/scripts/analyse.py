from mnistbench.jobs import job
from mnistbench.report import analysis

with job(snakemake) as log:
    analysis.run(snakemake.input, snakemake.output, snakemake.config, log=log)
