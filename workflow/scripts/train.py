"""One train job: trains its combination (locally in a warm worker, on a cluster in this process)
and writes the row and the record. The train rule runs it as a command, not as a Snakemake
`script:`: a script job first imports Snakemake (about 0.1 s), and a default grid has 108 jobs.

    python workflow/scripts/train.py ROW RECORD LOG TENSORS DEVICE NETWORK MODE BATCH_SIZE REPEAT THREADS K

NETWORK: a `models` entry; THREADS: the torch threads its rule planned (devices.torch_threads);
K: the copies of the network it trains at once (`models_at_once`).

The config comes from the environment (mnistbench/jobs.py, `CONFIG_ENV`), where the Snakefile
puts it for every job it starts.
"""

import os
import sys
from types import SimpleNamespace

from mnistbench.jobs import config_from_env, job
from mnistbench.measure.slot import timed_slot
from mnistbench.train.records import write_outputs
from mnistbench.train.worker import socket_for

row_path, record_path, log_path, tensors, device, network, mode, batch_size, repeat, threads, k = sys.argv[1:]
with job(SimpleNamespace(log=[log_path])) as log:
    cfg = dict(config_from_env(), cpu_threads=int(threads))
    args = dict(
        cfg=cfg,
        data_path=os.path.abspath(tensors),
        device=device,
        network=network,
        mode=mode,
        batch_size=int(batch_size),
        repeat=int(repeat),
        models_at_once=int(k),
    )
    if cfg["warm_worker"]:
        # Locally, a warm worker trains (and writes the job's log): this job then costs no
        # Python/torch start-up.
        from mnistbench.train import worker

        request = dict(args, log_path=os.path.abspath(log_path))
        others = [socket_for(r) for r in range(cfg["repeats"]) if r != args["repeat"]]
        row, record = worker.train(request, socket_for(args["repeat"]), siblings=others)
        print(f"{row['status']}: {row['message']} (warm worker)", file=sys.stderr)
    else:
        from mnistbench.train import trainer

        with timed_slot(log=log):
            row, record = trainer.train(**args, log=log)
    write_outputs(row, record, row_path, record_path)
