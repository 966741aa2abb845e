from mnistbench import data, devices, files
from mnistbench.jobs import job
from mnistbench.worker import timed_slot

with job(snakemake) as log:
    tensors = data.load_raw(snakemake.params.root)
    data.save_tensors(tensors, snakemake.output.tensors, snakemake.output.checksum)
    log(f"saved {', '.join(f'{k} {tuple(v.shape)}' for k, v in tensors.items())}")
    rows = []
    for device in snakemake.params.devices:
        devices.check(device)  # on a cluster node, the first place that can tell
        with timed_slot(log=log):  # copies are timed too: never beside a timed run
            rows += data.measure_transfer(tensors["train_x"], device)
        log(f"measured host->{device} copies")
    files.write_rows(snakemake.output.transfer, data.TRANSFER_COLUMNS, rows)
