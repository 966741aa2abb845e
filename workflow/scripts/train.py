import os
import sys

from mnistbench.jobs import job
from mnistbench.records import write_outputs
from mnistbench.worker import socket_for, timed_slot

with job(snakemake) as log:
    w = snakemake.wildcards
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    args = dict(
        cfg=cfg,
        data_path=os.path.abspath(snakemake.input.tensors),
        device=snakemake.params.device,
        mode=w.mode,
        batch_size=int(w.batch_size),
        repeat=int(w.repeat),
    )
    if cfg["warm_worker"]:
        # Locally, a warm worker trains (and writes the job's log): this job then costs no
        # Python/torch start-up.
        from mnistbench import worker

        request = dict(args, log_path=os.path.abspath(snakemake.log[0]))
        others = [socket_for(r) for r in range(cfg["repeats"]) if r != args["repeat"]]
        row, record = worker.train(request, socket_for(args["repeat"]), siblings=others)
        print(f"{row['status']}: {row['message']} (warm worker)", file=sys.stderr)
    else:
        from mnistbench import train

        with timed_slot(log=log):
            row, record = train.train(**args, log=log)
    write_outputs(row, record, snakemake.output.row, snakemake.output.env)
