from mnistbench.data import download
from mnistbench.jobs import job

with job(snakemake) as log:
    p = snakemake.params
    download.download(p.root, snakemake.config["mnist"]["mirrors"], p.md5, log=log)
