from mnistbench.jobs import job
from mnistbench.report import figures

with job(snakemake) as log:
    p = snakemake.params
    figures.render(snakemake.input, snakemake.output, dpi=p.dpi, style=p.style, target=p.target, use=p.use, log=log)
