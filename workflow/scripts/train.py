import os

from mnistbench.jobs import job
from mnistbench.records import write_outputs

with job(snakemake) as log:
    p, w = snakemake.params, snakemake.wildcards
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    args = (cfg, os.path.abspath(snakemake.input.tensors), p.device, w.mode, int(w.batch_size), int(w.repeat))
    if p.warm:
        # Locally, a warm worker trains: this job then costs no Python/torch start-up.
        from mnistbench import worker

        keys = ("config", "data", "device", "mode", "batch_size", "repeat")
        request = dict(zip(keys, args), log=os.path.abspath(snakemake.log[0]))
        row, record = worker.train(request, p.socket)
        log(f"{row['status']}: {row['message']} (warm worker)")
    else:
        from mnistbench import train

        row, record = train.train(*args, log=log)
    write_outputs(row, record, snakemake.output.row, snakemake.output.env)
