from mnistbench import train
from mnistbench.jobs import job

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    row, record = train.train(
        cfg, snakemake.input.tensors, p.device, w.mode, int(w.batch_size), int(w.repeat), log=log
    )
    train.write_outputs(row, record, snakemake.output.row, snakemake.output.env)
