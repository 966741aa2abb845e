"""Seaborn figures of the summary tables. Each function takes data frames and returns the figure
(the tests read its axes, lines and legend); `render` reads the CSVs and writes every PNG.

Every figure must read well with only a cpu in the data, and with several hosts merged in:
panels exist only for data that exists, and a figure without any data says so in words.
"""

import os

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from mnistbench.analysis import cpu_first  # noqa: E402

PHASES = {  # profile column -> legend label, in stacking order
    "transfer_us": "transfer (next batch)",
    "forward_us": "forward",
    "backward_us": "backward",
    "fwd_bwd_us": "forward+backward (hand-written)",
    "optimizer_us": "optimizer",
    "whole_us": "whole step (not separable)",
    "wait_us": "device wait",
}


def save(fig, path, dpi=110) -> None:
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def note_figure(title: str, text: str) -> plt.Figure:
    """A figure that says in words why there is nothing to plot (instead of crashing or an empty panel)."""
    fig, ax = plt.subplots(figsize=(7, 2.5))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


def ok_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"].copy()


def plain_log_ticks(ax, axis="y", ticks=None) -> None:
    """Log axes labelled 1, 16, 256 or 0.01, 30 instead of 10^1.2: a beginner reads numbers."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    if ticks is not None:
        a.set_ticks(sorted(set(ticks)))
    else:
        a.set_major_locator(LogLocator(subs=(1, 2, 5)))
    a.set_minor_formatter(NullFormatter())
    a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def grid(n_panels: int, ncols: int, size=(6.5, 4.5)):
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.remove()  # never an empty panel
    return fig, list(axes.flat[:n_panels])


# 1 ------------------------------------------------------------------------------------------------


def throughput(runs: pd.DataFrame, fits: pd.DataFrame) -> plt.Figure:
    """samples/s against batch size, log-log; hue = device, style = mode; median over repeats with
    the interquartile range as a band, and the fitted B / (a + b·B) as a thin dotted curve. One
    panel per host. With a single device, colour goes to the mode too (one colour would hide
    which line is which) and the device moves to the title."""
    ok = ok_runs(runs)
    title = "Training throughput by device and mode"
    if ok.empty:
        return note_figure(title, "No successful run: nothing to plot.")
    hosts = sorted(set(ok["host"]))
    devices = cpu_first(ok["device"])
    hue = "device" if len(devices) > 1 else "mode"
    if hue == "mode":
        title = f"Training throughput by mode on {devices[0]}"
    levels = devices if hue == "device" else sorted(set(ok["mode"]))
    palette = dict(zip(levels, sns.color_palette("tab10", len(levels))))
    fig, axes = grid(len(hosts), 2, size=(8, 5))
    for ax, host in zip(axes, hosts):
        h = ok[ok["host"] == host]
        sns.lineplot(
            data=h, x="batch_size", y="samples_per_s", hue=hue, hue_order=[v for v in levels if v in set(h[hue])],
            style="mode", estimator="median", errorbar=("pi", 50), markers=True, dashes=True, palette=palette, ax=ax,
        )  # fmt: skip
        lo, hi = h["batch_size"].min(), h["batch_size"].max()
        xs = np.geomspace(lo, hi, 64) if hi > lo else np.array([lo])
        for _, f in fits[(fits["host"] == host) & fits["a_us"].notna() & fits["b_us"].notna()].iterrows():
            step = (f["a_us"] + f["b_us"] * xs) * 1e-6
            (line,) = ax.plot(xs, xs / step, ls=":", lw=1.0, alpha=0.8, color=palette.get(f[hue], "grey"))
            line.set_gid("fit")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (median, IQR band)")
        plain_log_ticks(ax, "x", ticks=h["batch_size"])
        plain_log_ticks(ax, "y")
        ax.set_title(f"{title} — {host}" if len(hosts) > 1 else title)
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], ls=":", color="grey"))
        labels.append("fit: B / (a + b·B)")
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig


# 2 ------------------------------------------------------------------------------------------------


def speedup(spd: pd.DataFrame) -> plt.Figure:
    """Heatmap of speedup (mode x batch size), one panel per host x accelerator over the cpu.
    With no accelerator in the data, each mode over the reference mode on the cpu instead, so a
    cpu-only run still shows what the speedup structure is."""
    title = "Speedup"
    dev = spd[spd["kind"] == "device"]
    data, what = (dev, "over cpu, same mode") if len(dev) else (spd[spd["kind"] == "mode"], "")
    if data.empty:
        return note_figure(title, "Not enough successful runs to compare (no accelerator, one mode).")
    panels = sorted(set(zip(data["host"], data["device"])), key=lambda hd: (hd[0], hd[1] != "cpu", hd[1]))
    hosts = {h for h, _ in panels}
    fig, axes = grid(len(panels), 2, size=(1.0 + 1.1 * data["batch_size"].nunique(), 0.9 + 0.5 * data["mode"].nunique()))
    for ax, (host, device) in zip(axes, panels):
        p = data[(data["host"] == host) & (data["device"] == device)]
        table = p.pivot_table(index="mode", columns="batch_size", values="speedup", aggfunc="median")
        annot = table.map(lambda v: "" if not np.isfinite(v) else f"{v:.2g}×")
        sns.heatmap(
            np.log2(table), annot=annot, fmt="", cmap="RdBu", center=0, ax=ax,
            cbar_kws={"label": "log2 speedup (blue: faster)"}, linewidths=0.5,
        )  # fmt: skip
        ref = p["baseline_mode"].iloc[0]
        label = f"{device} {what}" if what else f"each mode over {ref}, {device}"
        ax.set_title(f"{label}" + (f" — {host}" if len(hosts) > 1 else ""))
        ax.set(xlabel="batch size", ylabel="mode")
    fig.tight_layout()
    return fig


# 3 ------------------------------------------------------------------------------------------------


def breakdown(prof: pd.DataFrame) -> plt.Figure:
    """Stacked bars: where a profiled step's time goes, per mode, at the smallest and the largest
    batch size; one row of panels per host x device."""
    title = "Step-time breakdown (torch.profiler)"
    ok = prof[prof["status"] == "ok"] if len(prof) else prof
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to break down.")
    ok = ok.copy()
    phases = [c for c in PHASES if c in ok.columns and ok[c].fillna(0).gt(0).any()]
    colors = dict(zip(PHASES, sns.color_palette("Set2", len(PHASES))))
    rows = sorted(set(zip(ok["host"], ok["device"])), key=lambda hd: (hd[0], hd[1] != "cpu", hd[1]))
    hosts = {h for h, _ in rows}
    sizes = sorted(set(ok["batch_size"]))
    n_modes = ok["mode"].nunique()
    fig, axes = plt.subplots(len(rows), len(sizes), figsize=(6 * len(sizes), (1.4 + 0.4 * n_modes) * len(rows) + 0.8), squeeze=False)
    for (host, device), row in zip(rows, axes):
        for ax, b in zip(row, sizes):
            p = ok[(ok["host"] == host) & (ok["device"] == device) & (ok["batch_size"] == b)]
            p = p.set_index("mode").reindex(sorted(set(ok["mode"]))).dropna(how="all", subset=phases)
            left = np.zeros(len(p))
            for c in phases:
                v = p[c].fillna(0).to_numpy()
                ax.barh(p.index, v, left=left, color=colors[c], label=PHASES[c])
                left += v
            ax.invert_yaxis()  # modes top to bottom in reading order
            ax.set(xlabel="µs per step (profiled)", ylabel="mode")
            ax.set_title(f"{device}, batch {b}" + (f" — {host}" if len(hosts) > 1 else ""))
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.grid(False, axis="y")
            ax.grid(True, axis="x", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle(title)
    fig.tight_layout()
    # The phase legend under the panels, where it cannot cover a bar or the title.
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), bbox_to_anchor=(0.5, 0.0), fontsize=8)
    return fig


# 4 ------------------------------------------------------------------------------------------------


def accuracy(epochs: pd.DataFrame, runs: pd.DataFrame, target=None) -> plt.Figure:
    """Test accuracy after each epoch against cumulative training time (time to accuracy): hue =
    mode, style = device, one panel per batch size (and host); median over the repeats."""
    title = "Test accuracy against training time"
    ok = ok_runs(runs)[["host", "device", "mode", "batch_size", "repeat"]]
    e = epochs.merge(ok, on=["host", "device", "mode", "batch_size", "repeat"]) if len(epochs) else epochs
    if e.empty:
        return note_figure(title, "No successful run with per-epoch records.")
    med = e.groupby(["host", "device", "mode", "batch_size", "epoch"], as_index=False)[["cum_train_s", "test_accuracy"]].median()
    panels = sorted(set(zip(med["host"], med["batch_size"])))
    hosts = {h for h, _ in panels}
    fig, axes = grid(len(panels), 3, size=(5.5, 4))
    for ax, (host, b) in zip(axes, panels):
        p = med[(med["host"] == host) & (med["batch_size"] == b)]
        sns.lineplot(data=p, x="cum_train_s", y="test_accuracy", hue="mode", hue_order=sorted(set(med["mode"])),
                     style="device", style_order=cpu_first(med["device"]), markers=True, ax=ax)  # fmt: skip
        if target is not None:
            ax.axhline(target, ls="--", color="grey", lw=0.8, label=f"target {target}")
        ax.set(xscale="log", xlabel="training time (s, cumulative, log)", ylabel="test accuracy", ylim=(0, 1))
        ax.set_title(f"batch {b}" + (f" — {host}" if len(hosts) > 1 else ""))
        ax.grid(True, which="both", alpha=0.3)
        plain_log_ticks(ax, "x")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend().remove()
    # One legend for all panels, outside them, so it never hides a line.
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# 5 ------------------------------------------------------------------------------------------------


def bandwidth(transfer: pd.DataFrame) -> plt.Figure:
    """Copy bandwidth against transfer size, log-log; hue = device (host · device when several
    hosts), style = pinned or pageable memory. On the cpu, a host memcpy (the baseline)."""
    title = "Host → device copy bandwidth"
    if transfer.empty:
        return note_figure(title, "No copy timings.")
    t = transfer.copy()
    t["target"] = t["device"].where(t["device"] != "cpu", "cpu (host memcpy)")
    if t["host"].nunique() > 1:
        t["target"] = t["host"] + " · " + t["target"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    memories = [m for m in ("pageable", "pinned") if m in set(t["memory"])]
    sns.lineplot(data=t, x="bytes", y="gb_per_s", hue="target", style="memory", style_order=memories,
                 markers=True, ax=ax)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="bytes per copy", ylabel="GB / s (median of 7 copies)")
    plain_log_ticks(ax, "y")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig


# 6 ------------------------------------------------------------------------------------------------


def ops(prof: pd.DataFrame) -> plt.Figure:
    """Torch ops dispatched per training step (in the step + fetching the batch), per mode; a second
    row with cuda kernel launches when an accelerator was profiled."""
    title = "Ops per training step (torch.profiler)"
    ok = prof[prof["status"] == "ok"].copy() if len(prof) else prof
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to count.")
    ok["target"] = ok["device"] if ok["host"].nunique() == 1 else ok["host"] + " · " + ok["device"]
    ok["torch ops per step"] = ok["ops_step"] + ok["ops_batch"]
    measures = ["torch ops per step"]
    if "launches" in ok.columns and ok["launches"].notna().any():
        ok["kernel launches per step"] = ok["launches"]
        measures.append("kernel launches per step")
    sizes = sorted(set(ok["batch_size"]))
    modes = sorted(set(ok["mode"]))
    targets = sorted(set(ok["target"]))
    fig, axes = plt.subplots(len(measures), len(sizes), figsize=(1.0 + 0.7 * len(modes) * len(sizes) * max(1, len(targets) / 2), 3.8 * len(measures)), squeeze=False)
    palette = dict(zip(targets, sns.color_palette("tab10", len(targets))))
    for row, measure in zip(axes, measures):
        present = [t for t in targets if ok.loc[ok["target"] == t, measure].notna().any()]  # no empty slots
        for ax, b in zip(row, sizes):
            p = ok[(ok["batch_size"] == b) & ok[measure].notna()]
            sns.barplot(data=p, x="mode", y=measure, hue="target", order=modes, hue_order=present, palette=palette, ax=ax)
            for c in ax.containers:
                ax.bar_label(c, fmt="%.0f", fontsize=7)
            ax.set(xlabel="mode", ylabel=measure)
            ax.set_title(f"batch {b}")
            ax.tick_params(axis="x", rotation=30)
            if ax is row[-1]:  # one legend per row, right of the panels, never over a bar
                ax.legend(title=None, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            else:
                ax.legend().remove()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# --- the rule -----------------------------------------------------------------------------------


def render(inp, out, dpi=110, style="whitegrid", target=None, log=print) -> None:
    """Read the summary CSVs, draw and write every figure."""
    sns.set_theme(style=style)
    read = lambda name: pd.read_csv(inp[name])  # noqa: E731
    runs, prof = read("runs"), read("profile")
    figs = {
        "throughput": lambda: throughput(runs, read("fits")),
        "speedup": lambda: speedup(read("speedup")),
        "breakdown": lambda: breakdown(prof),
        "accuracy": lambda: accuracy(read("epochs"), runs, target),
        "bandwidth": lambda: bandwidth(read("transfer")),
        "ops": lambda: ops(prof),
    }
    for name, draw in figs.items():
        save(draw(), out[name], dpi=dpi)
        log(f"wrote {out[name]}")
