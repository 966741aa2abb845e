import os

from mnistbench.files import write_rows
from mnistbench.jobs import job
from mnistbench.measure.slot import timed_slot
from mnistbench.train.records import PROFILE_COLUMNS
from mnistbench.train.worker import socket_for

with job(snakemake) as log:
    p = snakemake.params
    cfg = dict(snakemake.config, cpu_threads=p.torch_threads)
    args = dict(
        cfg=cfg, device=p.device, networks=list(p.networks), modes=list(p.modes), batch_sizes=list(p.batch_sizes)
    )
    if cfg["warm_worker"]:
        # Locally, the first repeat's warm worker profiles: torch and the compiler are imported
        # there already, and this job imports no torch. It takes the machine's timed slot as for
        # a train run.
        from mnistbench.train import worker

        request = dict(args, data_path=os.path.abspath(p.tensors), log_path=os.path.abspath(snakemake.log[0]))
        rows = worker.profile(request, socket_for(0))
    else:
        # A timed job like a train job: it takes the machine's timed slot (idle warm workers then
        # stay up, instead of tearing down beside it and starting again afterwards).
        from mnistbench.train import profiling

        with timed_slot(log=log):
            rows = profiling.profile_device(**args, data_path=p.tensors, log=log)
    write_rows(snakemake.output[0], PROFILE_COLUMNS, rows)
