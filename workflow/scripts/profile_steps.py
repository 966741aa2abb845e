from mnistbench import profiling
from mnistbench.files import write_rows
from mnistbench.jobs import job
from mnistbench.worker import timed_slot

with job(snakemake) as log:
    p = snakemake.params
    cfg = dict(snakemake.config, cpu_threads=snakemake.threads)
    # A timed job like a train job: it takes the machine's timed slot (idle warm workers then stay
    # up, instead of tearing down beside it and starting again afterwards).
    with timed_slot(log=log):
        rows = profiling.profile_device(cfg, snakemake.input.tensors, p.device, p.modes, p.batch_sizes, log=log)
    write_rows(snakemake.output[0], profiling.COLUMNS, rows)
