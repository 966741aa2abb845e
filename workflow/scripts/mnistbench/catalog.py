"""The registry of the report's figures: each one's name, the summary tables it reads, its report
category and label, and the options the figure rule passes to it, in the report's order.

figures.py draws them (one function per name); the Snakefile, the analysis and the tests read
this list. It imports neither matplotlib nor seaborn: Snakemake reads it in every invocation
(every dry run and, on a cluster, every job), and importing them costs about a second there.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Figure:
    name: str
    inputs: tuple  # summary tables it reads, results/summary/<input>.csv, in argument order
    category: str  # the report's section
    content: str  # the report's label
    options: tuple = field(default=())  # keyword options the rule passes (target, use)


FIGURES = {
    f.name: f
    for f in [
        Figure("ladder", ("ladder",), "Ladder", "the mode ladder per device"),
        Figure("throughput", ("runs", "fits"), "Throughput", "samples/s vs batch size", ("use",)),
        Figure("speedup", ("speedup",), "Speedup", "speedup heatmap"),
        Figure("breakdown", ("profile",), "Breakdown", "step-time breakdown"),
        Figure("accuracy", ("epochs", "runs"), "Accuracy", "time to accuracy", ("target", "use")),
        Figure("bandwidth", ("transfer",), "Data transfer", "copy bandwidth vs size"),
        Figure("ops", ("profile",), "Breakdown", "ops per step"),
    ]
}


def inputs() -> list[str]:
    """Every summary table some figure reads."""
    return list(dict.fromkeys(i for f in FIGURES.values() for i in f.inputs))
