rule download_mnist:
    output:
        expand(
            "results/data/MNIST/raw/{name}",
            name=[
                "train-images-idx3-ubyte",
                "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte",
                "t10k-labels-idx1-ubyte",
            ],
        ),
    log:
        "logs/download_mnist.log",
    conda:
        "../../environment.yml"
    params:
        root=lambda wildcards, output: Path(output[0]).parents[2],
        # The rerun trigger is the files' checksums: the script reads the mirrors from the
        # config, so a changed mirror list never deletes verified files to fetch them again.
        # In one order whatever order the config files gave: a reordering is no change.
        md5=dict(sorted(config["mnist"]["md5"].items())),
    script:
        "../scripts/download_mnist.py"


rule preload:
    input:
        rules.download_mnist.output,
    output:
        tensors=TENSORS,
        checksum="results/preload/mnist.pt.sha256",
        transfer=report(
            "results/preload/transfer.csv",
            caption="../report/transfer.rst",
            category="Data transfer",
        ),
    log:
        "logs/preload.log",
    conda:
        "../../environment.yml"
    resources:
        # It times host->device copies for every device of the grid, so on a cluster it needs
        # the GPU partition when cuda is among them.
        gpu=1 if PRELOAD_NEEDS_GPU else 0,
        slurm_partition=SLURM["gpu_partition" if PRELOAD_NEEDS_GPU else "cpu_partition"],
    params:
        root=lambda wildcards, input: Path(input[0]).parents[2],
        devices=DEVICES,
        code=depends.fingerprint("data.preload", scripts=("preload.py",)),
    script:
        "../scripts/preload.py"


# An md5 that contradicts an archive downloaded and verified earlier (a typo, most often): one
# line before any job, so that no job deletes the verified data to fetch it again.
if not workflow.remote_exec:
    contradicted_md5(
        Path(rules.download_mnist.output[0]).parent, config["mnist"]["md5"]
    )


# A tensor file that is missing or no longer matches its checksum (e.g. truncated): said when the
# workflow is read (a dry run changes nothing); a run makes it again before its first job (remake).
DAMAGED = not workflow.remote_exec and damaged(
    rules.preload.output.tensors, rules.preload.output.checksum
)
if DAMAGED:
    print(
        f"{rules.preload.output.tensors} {DAMAGE[DAMAGED][0]}: a run with a job to do makes it "
        "again from the downloaded files before its first job; a run with nothing to do leaves "
        "it, as nothing then reads it",
        file=sys.stderr,
    )
