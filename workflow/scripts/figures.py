from mnistbench import figures
from mnistbench.jobs import job

with job(snakemake) as log:
    figures.throughput(snakemake.input.summary, snakemake.input.runs, snakemake.output.throughput)
    log(f"wrote {snakemake.output.throughput}")
