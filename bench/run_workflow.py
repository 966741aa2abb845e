"""The command line that runs the project's Snakemake workflow for a bench script (standard
library only: scripts that only time the pipeline need no torch)."""

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def command(workdir, cores="all", targets=(), configfiles=(), config=(), *flags, python=None) -> list[str]:
    """`python -m snakemake` on the repository's Snakefile in `workdir`, with this Python or
    `python`. Targets come before --configfile and --config, which take every word after them."""
    cmd = [str(python or sys.executable), "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    cmd += ["--directory", str(workdir)]
    cmd += ["--cores", str(cores), *flags, *map(str, targets)]
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    if config:
        cmd += ["--config", *config]
    return cmd


def with_data_of(first, wd) -> Path:
    """wd, holding the MNIST files that the run in `first` downloaded and verified and the tensors it
    preloaded (file times kept, so Snakemake finds them up to date): for runs that compare training,
    where the same download and preload again would only add to the wall time."""
    for part in ("results/data", "results/preload"):
        shutil.copytree(Path(first) / part, Path(wd) / part)
    return Path(wd)
