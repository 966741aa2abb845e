# mnist-device-bench: why does my model train slower on the GPU than on the CPU?
# Thin entry point; the rules live in workflow/rules, the logic in the mnistbench package.
from snakemake.utils import min_version, validate

min_version("8.0")


include: "workflow/rules/config.smk"


check_space(".", "results")
if not workflow.remote_exec:
    check_writable("results", "logs")
check_config_file("config/config.yaml")


configfile: "config/config.yaml"


typed_config(config, "workflow/schemas/config.schema.yaml")
try:
    validate(config, "workflow/schemas/config.schema.yaml")
except WorkflowError as e:
    raise config_error(e) from None


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/report.smk"


if not workflow.remote_exec:
    warn_few_steps()


onstart:
    check_devices_here()
    if not workflow.remote_exec:
        remake(
            rules.preload.output.tensors,
            rules.preload.output.checksum,
            Path(rules.download_mnist.output[0]).parents[2],
        )


# Every run's files are targets too: Snakemake does not rebuild a missing input of an output that
# is present, so a run whose files were deleted (to redo it) is retrained by a plain rerun, and
# aggregate, now older than it, follows. The preloaded data is the runs' input through its
# checksum file (tensors_input): a removed tensor file is made again before a run's first job.
rule all:
    default_target: True
    input:
        rules.preload.output.checksum,
        run_files("csv"),
        run_files("json"),
        "results/summary/runs.csv",
        "results/summary/summary.csv",
        expand("results/summary/{name}.csv", name=catalog.TABLES),
        "results/summary.md",
        expand("results/figures/{name}.png", name=FIGURES),
