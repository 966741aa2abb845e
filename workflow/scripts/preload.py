from mnistbench import files
from mnistbench.config import devices
from mnistbench.data import preload
from mnistbench.jobs import job
from mnistbench.measure.slot import timed_slot

with job(snakemake) as log:
    tensors = preload.load_raw(snakemake.params.root)
    preload.save_tensors(tensors, snakemake.output.tensors, snakemake.output.checksum)
    log(f"saved {', '.join(f'{k} {tuple(v.shape)}' for k, v in tensors.items())}")
    rows = []
    for device in snakemake.params.devices:
        devices.check(device)  # on a cluster node, the first place that can tell
        with timed_slot(log=log):  # copies are timed too: never beside a timed run
            rows += preload.measure_transfer(tensors["train_x"], device)
        log(f"measured host->{device} copies")
    files.write_rows(snakemake.output.transfer, preload.TRANSFER_COLUMNS, rows)
