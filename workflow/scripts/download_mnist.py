from mnistbench import data
from mnistbench.jobs import job

with job(snakemake) as log:
    p = snakemake.params
    data.download(p.root, snakemake.config["mnist"]["mirrors"], p.md5, log=log)
