"""One look across the figures: a colour and a marker per mode (the mode registry's, catalog.py) and
per device kind (devices.py), legends and categories in ladder order, log axes labelled 1k, 10k,
1M, panels only for data that exists, a figure that says in words why it has nothing to draw, and
no figure larger than MAX_PIXELS on a side however many machines merge in.
"""

import textwrap

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from mnistbench import files  # noqa: E402
from mnistbench.config.catalog import MODES  # noqa: E402
from mnistbench.config.devices import KINDS, cpu_first, traits  # noqa: E402
from mnistbench.measure import machines  # noqa: E402
from mnistbench.report import numbers  # noqa: E402

MODE_COLOR = {m: to_rgb(info.color) for m, info in MODES.items()}
MODE_MARKER = {m: info.marker for m, info in MODES.items()}
PHASES = {  # profile column -> legend label, in stacking order
    "transfer_us": "transfer (next batch)",
    "forward_us": "forward",
    "backward_us": "backward",
    "fwd_bwd_us": "forward+backward (hand-written)",
    "optimizer_us": "optimizer",
    "whole_us": "whole step (not separable)",
    "wait_us": "device wait",
}
PHASE_COLOR = dict(zip(PHASES, sns.color_palette("Set2", len(PHASES))))
MAX_SHOWN = 60  # machines on one axis at most: the fastest and the slowest half of that
MAX_LEGEND = 8  # hosts a legend names one by one
MAX_PIXELS = 3000
ROW_IN = 0.24  # inches per machine on an axis


def device_color(device: str):
    """The device kind's colour (devices.KINDS); further devices of a kind get lighter shades."""
    base = np.array(traits(device).color)
    n = int(device.split(":")[1]) if ":" in device else 0
    return tuple(base + (1 - base) * min(0.6, 0.2 * n))  # cuda:1, cuda:2 ... lighter


def ladder_order(modes) -> list:
    present = set(modes)
    return [m for m in MODES if m in present]


def palette_colors() -> list:
    """Every colour a figure may give a mode, a device or a phase (the tests hold figures to it)."""
    devices = [f"{k}:{i}" for k in KINDS for i in range(4)]
    return list(MODE_COLOR.values()) + [device_color(d) for d in devices] + list(PHASE_COLOR.values())


def note_figure(title: str, text: str) -> plt.Figure:
    """A figure that says in words why there is nothing to plot (instead of crashing or an empty panel)."""
    fig, ax = plt.subplots(figsize=(7, 2.5))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


def log_ticks(ax, axis="y", ticks=None) -> None:
    """Log axes labelled 1, 16, 256 (given ticks) or 1k, 10k, 1M: a beginner reads numbers."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    if ticks is not None:  # batch sizes: the numbers themselves
        a.set_ticks(sorted(set(ticks)))
        a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        a.set_major_locator(LogLocator(subs=(1, 2, 5)))
        a.set_major_formatter(FuncFormatter(numbers.tick))
    a.set_minor_formatter(NullFormatter())


def grid(n_panels: int, ncols: int, size=(6.5, 4.5)):
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.remove()  # never an empty panel
    return fig, list(axes.flat[:n_panels])


def places_of(df) -> list:
    """The places of a table in the natural order of their names, reference machines' last."""
    ref = df["reference"].fillna("").astype(str) if "reference" in df.columns else pd.Series("", index=df.index)
    where = df[where_column(df)]
    return sorted(set(where), key=lambda p: (bool((ref[where == p] != "").any()), machines.natural(p)))


def where_column(df) -> str:
    """`place` where a table compares places, else `host` (copies and profiles are per host)."""
    return "place" if "place" in df.columns else "host"


def several(df) -> bool:
    """Whether a table holds more than one place of this run (then machine_figures.py draws it)."""
    if df is None or not len(df):
        return False
    own = df[df["reference"].astype(object).fillna("").astype(str) == ""] if "reference" in df.columns else df
    return own[where_column(df)].nunique() > 1


def place_panels(df) -> list:
    """(place, device) pairs, places sorted (reference machines last), the cpu first within one."""
    col = where_column(df)
    return [(p, d) for p in places_of(df) for d in cpu_first(df[df[col] == p]["device"])]


def with_data(df, columns: list, order) -> list[tuple]:
    """(combination, its rows) of each combination of `columns` in `order` that has rows in df:
    a panel only for data that exists."""
    rows = dict(list(df.groupby(columns, sort=False)))
    return [(key, rows[key]) for key in order if key in rows]


def panel_title(base: str, place, model, places, models) -> str:
    """A panel's title: `base`, then the network and the place where there are several."""
    return " — ".join([base] + ([model] if len(models) > 1 else []) + ([place] if len(places) > 1 else []))


def titled(fig, title: str) -> plt.Figure:
    """The figure's title (words.title: the first fact of its page), wrapped to the figure's width."""
    lines = textwrap.wrap(title, max(40, int(fig.get_figwidth() * 12))) or [""]
    fig.set_figheight(fig.get_figheight() + 0.2 * len(lines))  # room for the title above the panels
    fig.suptitle("\n".join(lines), fontsize=10)
    fig.tight_layout()
    return fig


def speedup_cells(ax, table: pd.DataFrame, label: str, **kw) -> None:
    """Speedups as a heatmap, log2 centred on 1 (blue: faster), each cell written as a factor."""
    annot = table.map(lambda v: "" if not np.isfinite(v) else numbers.times(v))
    sns.heatmap(np.log2(table), annot=annot, fmt="", cmap="RdBu", center=0, ax=ax, cbar_kws={"label": label},
                linewidths=0.5, **kw)  # fmt: skip


def error_bars(ax, x, y, lo, hi, color="black", width=1.2) -> None:
    """Each point's 95 % interval as a vertical bar; a point without one (one usable run) gets none."""
    have = (lo.notna() & hi.notna()).to_numpy()
    if have.any():
        y, lo, hi = y[have], lo[have], hi[have]
        err = np.array([(y - lo).clip(lower=0), (hi - y).clip(lower=0)])
        bars = ax.errorbar(np.asarray(x)[have], y, yerr=err, fmt="none", ecolor=color, elinewidth=width)
        bars.lines[2][0].set_gid("interval")


def save(fig, path, dpi=110) -> None:
    """Write a figure as PNG at `dpi`, or at the dpi that keeps its larger side within MAX_PIXELS
    (a figure of many panels shrinks, it never grows without bound)."""
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    side = max(box.width, box.height) + 0.2  # inches, with savefig's padding
    dpi = min(dpi, int((MAX_PIXELS - 2) / side))
    with files.atomic(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
