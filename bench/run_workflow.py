"""The command line that runs the project's Snakemake workflow for a bench script (standard
library only: scripts that only time the pipeline need no torch)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def command(workdir, cores="all", targets=(), configfiles=(), config=(), *flags) -> list[str]:
    """`python -m snakemake` on the repository's Snakefile in `workdir`. Targets come before
    --configfile and --config, which take every word after them."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--cores", str(cores), *flags, *map(str, targets)]
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    if config:
        cmd += ["--config", *config]
    return cmd
