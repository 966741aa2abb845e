"""mnist-device-bench: one small MNIST model, trained on every device x mode x batch size, timed honestly.

The Snakemake workflow (Snakefile, workflow/) drives this package; every piece also runs without
Snakemake (see `python -m mnistbench.train --help`).
"""


class BenchError(Exception):
    """A problem the user can fix. Its message is one line naming the cause and the fix."""
