"""Seaborn figures of the summary tables."""

import os

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes or CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def save(fig, path) -> None:
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def throughput(summary_csv, runs_csv, out) -> plt.Figure:
    """samples/s against batch size, log-log, one line per device x mode: median over repeats with
    the interquartile range as a band."""
    runs = pd.read_csv(runs_csv)
    ok = runs[runs["status"] == "ok"].copy()
    ok["device x mode"] = ok["device"] + " · " + ok["mode"]
    fig, ax = plt.subplots(figsize=(8, 5))
    sns.lineplot(
        data=ok, x="batch_size", y="samples_per_s", hue="device", style="mode",
        estimator="median", errorbar=("pi", 50), markers=True, dashes=True, ax=ax,
    )  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (median, IQR band)")
    ax.set_title("Training throughput by device and mode")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    save(fig, out)
    return fig
