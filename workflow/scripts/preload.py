import csv
import os

from mnistbench import data, devices
from mnistbench.jobs import job

with job(snakemake) as log:
    tensors = data.load_raw(snakemake.params.root)
    data.save_tensors(tensors, snakemake.output.tensors)
    log(f"saved {', '.join(f'{k} {tuple(v.shape)}' for k, v in tensors.items())}")
    rows = []
    for device in snakemake.params.devices:
        devices.check(device)  # on a cluster node, the first place that can tell
        rows += data.measure_transfer(tensors["train_x"], device)
        log(f"measured host->{device} copies")
    tmp = snakemake.output.transfer + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["host", "device", "memory", "samples", "bytes", "seconds", "gb_per_s"])
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, snakemake.output.transfer)
