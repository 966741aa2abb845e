from mnistbench.collect import aggregate
from mnistbench.jobs import job

with job(snakemake) as log:
    i, p = snakemake.input, snakemake.params
    cfg = dict(snakemake.config, quality=p.quality)
    aggregate.run(
        i.rows, i.envs, i.transfer, i.profiles, i.merged, p.left_out, snakemake.output, cfg, log=log, later=p.later
    )
