"""`python -m mnistbench.train`: one combination trained and timed, without Snakemake (trainer.main)."""

from mnistbench.train.trainer import main

main()
