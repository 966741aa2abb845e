from mnistbench.jobs import job
from mnistbench.report import summary

with job(snakemake) as log:
    # The config keys the analysis reads, and only those: the rule's params (catalog.REPORT_KEYS).
    summary.run(snakemake.input, snakemake.output, snakemake.params.config, log=log)
