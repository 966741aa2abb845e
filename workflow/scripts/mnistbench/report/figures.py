"""Seaborn figures of the summary tables: one drawing function per entry of catalog.FIGURES.

Each figure is a function that takes data frames and returns the figure (the tests read its axes,
bars, lines and legend), registered with `@draws`. The registry, catalog.FIGURES, drives the
figure rule's outputs, the report's categories and the text pages beside each figure. To add a
figure: its entry in catalog.py, its function here, and its caption workflow/report/<name>.rst.

One look across figures: one colour and marker per mode and one per device (STYLE), legends and
categories in ladder order, log axes labelled 1k, 10k, 1M, and a title that says the finding.
Every figure must read well with only a cpu in the data and with several hosts merged in: panels
exist only for data that exists, and a figure without any data says so in words.
"""

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes or CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from mnistbench import files
from mnistbench.collect import uncertainty  # noqa: E402
from mnistbench.collect.aggregate import succeeded, usable  # noqa: E402
from mnistbench.config.catalog import FIGURES, MODES  # noqa: E402
from mnistbench.config.devices import CPU, KINDS, cpu_first, traits  # noqa: E402
from mnistbench.measure import machines
from mnistbench.report.analysis import PLACE_KEYS, by_size  # noqa: E402
from mnistbench.report.words import bs, flop, rate, times, us, with_ci  # noqa: E402

# --- one look -----------------------------------------------------------------------------------

# tab10 and a dark grey cover the ladder; a longer one takes further hues, so a new mode needs no
# edit here.
_MODE_COLORS = sns.color_palette("tab10", 10) + [(0.15, 0.15, 0.15)]
_MODE_COLORS += sns.color_palette("husl", max(0, len(MODES) - len(_MODE_COLORS)))
_MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "p", "<", ">"]
MODE_COLOR = dict(zip(MODES, _MODE_COLORS))
MODE_MARKER = {m: _MARKERS[i % len(_MARKERS)] for i, m in enumerate(MODES)}
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


def device_color(device: str):
    """The device kind's colour (devices.KINDS); further devices of a kind get lighter shades."""
    base = np.array(traits(device).color)
    n = int(device.split(":")[1]) if ":" in device else 0
    return tuple(base + (1 - base) * min(0.6, 0.2 * n))  # cuda:1, cuda:2 ... lighter


def device_marker(device: str) -> str:
    return traits(device).marker


def ladder_order(modes) -> list:
    present = set(modes)
    return [m for m in MODES if m in present]


def palette_colors() -> list:
    """Every colour a figure may give a mode, a device or a phase (the tests hold figures to it)."""
    devices = [f"{k}:{i}" for k in KINDS for i in range(4)]
    return list(MODE_COLOR.values()) + [device_color(d) for d in devices] + list(PHASE_COLOR.values())


# --- the drawing functions ---------------------------------------------------------------------


# The list of figures is catalog.FIGURES (read where matplotlib is not wanted); each is drawn by
# the function of its name here, registered with @draws.
DRAW = {}


def draws(fn):
    """Register fn as the drawing of the figure of its name (a trailing underscore dropped: `map_`
    draws `map` without hiding the builtin)."""
    name = fn.__name__.removesuffix("_")
    if name not in FIGURES:
        raise ImportError(f"figures.py draws {name}, which is not a figure of catalog.py")
    DRAW[name] = fn
    return fn


# --- helpers ------------------------------------------------------------------------------------


def note_figure(title: str, text: str) -> plt.Figure:
    """A figure that says in words why there is nothing to plot (instead of crashing or an empty panel)."""
    fig, ax = plt.subplots(figsize=(7, 2.5))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


TICK = EngFormatter(sep="")  # 1k, 20k, 1M: the same prefixes as the text, tight for a tick


def si(v, _=None) -> str:
    """Tick label: 1k, 20k, 1M, 0.5, 3 (matplotlib's SI formatter, plain numbers below 1)."""
    return TICK(v) if v >= 1 else f"{v:g}"


def log_ticks(ax, axis="y", ticks=None) -> None:
    """Log axes labelled 1, 16, 256 (given ticks) or 1k, 10k, 1M: a beginner reads numbers."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    if ticks is not None:  # batch sizes: the numbers themselves
        a.set_ticks(sorted(set(ticks)))
        a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        a.set_major_locator(LogLocator(subs=(1, 2, 5)))
        a.set_major_formatter(FuncFormatter(si))
    a.set_minor_formatter(NullFormatter())


def grid(n_panels: int, ncols: int, size=(6.5, 4.5)):
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.remove()  # never an empty panel
    return fig, list(axes.flat[:n_panels])


def hosts_of(df) -> list:
    """The places of a table in the natural order of their names, this run's first and reference
    machines' (a `reference` label, analysis.beside) after them."""
    ref = df["reference"].fillna("").astype(str) if "reference" in df.columns else pd.Series("", index=df.index)
    return sorted(set(df["host"]), key=lambda h: (bool((ref[df["host"] == h] != "").any()), machines.natural(h)))


# --- many machines ------------------------------------------------------------------------------
# With several machines (places) of this run, a figure compares them in one panel, machines on an
# axis sorted by speed, instead of a panel per machine; at most MAX_SHOWN machines stand on an
# axis (the fastest and the slowest half of that), and no figure is saved larger than MAX_PIXELS
# on a side (save): however many machines merge in, every figure stays a readable size.
MAX_SHOWN = 60
MAX_LEGEND = 8  # hosts a legend names one by one
MAX_PIXELS = 3000
ROW_IN = 0.24  # inches per machine on an axis


def several(df) -> bool:
    """Whether a table holds more than one machine (place) of this run: figures then compare
    machines in one panel."""
    if df is None or not len(df) or "host" not in df.columns:
        return False
    own = df[df["reference"].astype(object).fillna("").astype(str) == ""] if "reference" in df.columns else df
    return own["host"].nunique() > 1


def fastest_first(value: pd.Series) -> tuple[list, str]:
    """Places fastest first (value: {place: a speed, larger is faster}; ties in natural order),
    cut to MAX_SHOWN (the fastest and the slowest half), and a note saying so where cut."""
    v = value.dropna()
    order = sorted(v.index, key=lambda h: (-v[h], machines.natural(h)))
    order += machines.by_name(set(value.index) - set(order))  # no value: last
    if len(order) <= MAX_SHOWN:
        return order, ""
    half = MAX_SHOWN // 2
    return order[:half] + order[-half:], f" (the fastest and the slowest {half} of {len(order)} machines)"


def rows_height(n: int) -> float:
    return 1.4 + ROW_IN * n


def place_label(df, host) -> str:
    """A place on a machine axis; a reference machine's marked."""
    ref = (
        df.loc[df["host"] == host, "reference"].astype(object).fillna("").astype(str)
        if "reference" in df.columns
        else []
    )
    return f"{host} (reference)" if len(ref) and (ref != "").any() and not str(host).startswith("reference") else host


def host_device_panels(df) -> list:
    """(host, device) pairs, hosts sorted (reference machines last), the cpu first within a host."""
    return [(h, d) for h in hosts_of(df) for d in cpu_first(df[df["host"] == h]["device"])]


def host_model_panels(df) -> list:
    """(host, network) pairs, hosts sorted (reference machines last), the networks in the order of
    the table (the analysis gives them smallest first)."""
    return [(h, m) for h in hosts_of(df) for m in dict.fromkeys(df[df["host"] == h]["model"])]


def panel_title(base: str, host, model, hosts, models) -> str:
    """A panel's title: `base`, then the network and the host where there are several."""
    parts = [base] + ([model] if len(models) > 1 else []) + ([host] if len(hosts) > 1 else [])
    return " — ".join(parts)


def machine_dots(ax, p: pd.DataFrame, value: str, larger_is_faster: bool = True) -> str:
    """One panel comparing machines: a row per place (fastest at the top, at most MAX_SHOWN), a
    marker per mode at its `value` (log axis) with its 95 % interval (`value`_lo/_hi) as a line.
    Returns the note of fastest_first (which places it left out)."""
    per = p.groupby("host")[value].max() if larger_is_faster else -p.groupby("host")[value].min()
    order, note = fastest_first(per)
    y = {h: i for i, h in enumerate(order)}
    for mode in ladder_order(p["mode"]):
        g = p[(p["mode"] == mode) & p["host"].isin(order) & p[value].notna()]
        if g.empty:
            continue
        ys = g["host"].map(y).to_numpy()
        c = MODE_COLOR[mode]
        pts = ax.scatter(g[value], ys, color=c, marker=MODE_MARKER[mode], s=22, label=mode, zorder=3)
        pts.set_gid(f"machines|{mode}")
        lo, hi = f"{value}_lo", f"{value}_hi"
        if {lo, hi} <= set(g.columns) and g[lo].notna().any():
            have = g[lo].notna() & g[hi].notna()
            lines = ax.hlines(ys[have.to_numpy()], g[lo][have], g[hi][have], color=c, lw=1, alpha=0.6)
            lines.set_gid("interval")
    ax.set_yticks(range(len(order)), [place_label(p, h) for h in order], fontsize=8)
    ax.set_ylim(len(order) - 0.5, -0.5)  # the fastest at the top
    ax.set_xscale("log")
    log_ticks(ax, "x")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.grid(True, axis="y", alpha=0.15)
    return note


def device_model_panels(df) -> list:
    """(device, network) pairs: the cpu first, the networks in the table's order."""
    return [(d, m) for d in cpu_first(df["device"]) for m in dict.fromkeys(df[df["device"] == d]["model"])]


def ladder_machines(lad: pd.DataFrame) -> plt.Figure:
    """The ladder across machines: per device and network, at the smallest and the largest batch,
    a row per machine (fastest at the top) with every mode's samples/s and its interval."""
    points = [p for p in ("smallest", "largest") if p in set(lad["point"])]
    panels = device_model_panels(lad)
    n = min(MAX_SHOWN, lad["host"].nunique())
    fig, axes = plt.subplots(
        len(panels), len(points), figsize=(6.5 * len(points) + 1.5, rows_height(n) * len(panels)), squeeze=False
    )
    models = {m for _, m in panels}
    for row, (device, model) in zip(axes, panels):
        for ax, point in zip(row, points):
            p = lad[(lad["device"] == device) & (lad["model"] == model) & (lad["point"] == point)]
            note = machine_dots(ax, p, "samples_per_s")
            b = p["batch_size"].iloc[0] if len(p) else ""
            ax.set(xlabel="samples / s (median, 95 % interval)", ylabel="machine (fastest first)")
            ax.set_title(f"batch {b}, {device}" + (f", {model}" if len(models) > 1 else "") + note, fontsize=10)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8, title="mode")
    fig.suptitle(machines_finding(lad))
    fig.tight_layout()
    return fig


def machines_finding(lad: pd.DataFrame) -> str:
    """The title across machines: on the first device and network, the fastest and the slowest
    machine's best mode at the smallest batch, and how many machines there are."""
    device, model = device_model_panels(lad)[0]
    p = lad[(lad["device"] == device) & (lad["model"] == model) & (lad["point"] == lad["point"].iloc[0])]
    p = p[p["samples_per_s"].notna()]
    if p.empty:
        return f"The mode ladder on {lad['host'].nunique()} machines"
    top = p.loc[p.groupby("host")["samples_per_s"].idxmax()].sort_values("samples_per_s")
    fast, slow = top.iloc[-1], top.iloc[0]
    return (
        f"{lad['host'].nunique()} machines, {device}, {model}, batch {fast['batch_size']}: fastest {fast['host']} "
        f"({fast['mode']}, {rate(fast['samples_per_s'])}/s), slowest {slow['host']} "
        f"({slow['mode']}, {rate(slow['samples_per_s'])}/s)"
    )


def throughput_machines(ok: pd.DataFrame) -> plt.Figure:
    """samples/s against batch size across machines: per device and network, each machine's best
    mode (median over its repeats) as a thin grey line, the fastest and the slowest at the largest
    batch size in colour and named."""
    med = ok.groupby(["host", "device", "model", "mode", "batch_size"])["samples_per_s"].median().reset_index()
    best = med.groupby(["host", "device", "model", "batch_size"])["samples_per_s"].max().reset_index()
    panels = device_model_panels(best)
    models = {m for _, m in panels}
    fig, axes = grid(len(panels), 2, size=(8, 5))
    for ax, (device, model) in zip(axes, panels):
        g = best[(best["device"] == device) & (best["model"] == model)]
        top = g[g["batch_size"] == g["batch_size"].max()].set_index("host")["samples_per_s"]
        order, _ = fastest_first(top)
        ends = {order[0]: ("fastest", "tab:blue"), order[-1]: ("slowest", "tab:red")} if len(order) > 1 else {}
        for host, h in g.groupby("host"):
            h = h.sort_values("batch_size")
            label, c = ends.get(host, (None, "grey"))
            (line,) = ax.plot(
                h["batch_size"],
                h["samples_per_s"],
                color=c,
                lw=2 if label else 0.7,
                alpha=1 if label else 0.4,
                marker="o" if label else None,
                label=f"{label}: {host}" if label else None,
                zorder=3 if label else 2,
            )
            line.set_gid(f"machine|{host}")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (best mode, median)")
        log_ticks(ax, "x", ticks=g["batch_size"])
        log_ticks(ax, "y")
        ax.set_title(
            f"best mode on each of {g['host'].nunique()} machines, {device}" + (f", {model}" if len(models) > 1 else "")
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(throughput_finding(ok))
    fig.tight_layout()
    return fig


def speedup_cells(ax, table: pd.DataFrame, label: str, **kw) -> None:
    """A table of speedups as a heatmap on a log2 scale centred on 1 (blue: faster), each cell
    written as a factor."""
    sns.heatmap(
        np.log2(table),
        annot=table.map(lambda v: "" if not np.isfinite(v) else times(v)),
        fmt="",
        cmap="RdBu",
        center=0,
        ax=ax,
        cbar_kws={"label": label},
        linewidths=0.5,
        **kw,
    )


def speedup_machines(data: pd.DataFrame, what: str) -> plt.Figure:
    """The speedup across machines: per device and network, a row per machine (fastest at the
    top), a column per batch size, each cell the best mode's speedup there."""
    panels = device_model_panels(data)
    models = {m for _, m in panels}
    sizes = sorted(set(data["batch_size"]))
    n = min(MAX_SHOWN, data["host"].nunique())
    fig, axes = grid(len(panels), 2, size=(2.5 + 1.1 * len(sizes), rows_height(n)))
    for ax, (device, model) in zip(axes, panels):
        p = data[(data["device"] == device) & (data["model"] == model)]
        table = p.pivot_table(index="host", columns="batch_size", values="speedup", aggfunc="max")
        order, note = fastest_first(table[table.columns[-1]])
        table = table.reindex(order)
        speedup_cells(ax, table, "log2 speedup of the best mode (blue: faster)", annot_kws={"fontsize": 7})
        ax.set_yticks(np.arange(len(order)) + 0.5, [place_label(p, h) for h in order], rotation=0, fontsize=8)
        label = f"{device} {what}" if what else f"best mode over {p['baseline_mode'].iloc[0]}, {device}"
        ax.set_title(label + (f", {model}" if len(models) > 1 else "") + note, fontsize=10)
        ax.set(xlabel="batch size", ylabel="machine (fastest first)")
    best = data.loc[data["speedup"].idxmax()]
    fig.suptitle(
        f"Up to {times(best['speedup'])}: {best['mode']} on {best['device']} at batch {best['batch_size']} "
        f"on {best['host']}" + ("" if what else f" over {best['baseline_mode']}")
    )
    fig.tight_layout()
    return fig


def map_machines(m: pd.DataFrame) -> plt.Figure:
    """The map across machines: per accelerator (or, where none ran, the cpu), a row per machine
    (fastest at the top), a column per network; each cell the best accelerator mode over the best
    cpu mode at the largest batch size and the batch size from which it wins (or the cpu's best
    samples/s there)."""
    accelerators = [d for d in cpu_first(m["device"]) if d != CPU]
    panels = accelerators or [CPU]
    order_net = list(dict.fromkeys(m.sort_values(["flop_per_sample", "model"])["model"]))
    n = min(MAX_SHOWN, m["host"].nunique())
    fig, axes = grid(len(panels), 2, size=(3.5 + 1.6 * len(order_net), rows_height(n)))
    for ax, device in zip(axes, panels):
        p = m[m["device"] == device]
        p = p[p["batch_size"] == p["batch_size"].max()]
        value = "over_cpu_best" if device != CPU else "samples_per_s"
        table = p.pivot_table(index="host", columns="model", values=value, aggfunc="first")
        table = table.reindex(columns=[o for o in order_net if o in table.columns])
        order, note = fastest_first(table[table.columns[0]])
        table = table.reindex(order)
        if device != CPU:
            wins = p.pivot_table(index="host", columns="model", values="wins_from", aggfunc="first")
            wins = wins.reindex(index=order, columns=table.columns)
            annot = pd.DataFrame(
                [
                    [f"{times(v)}\nfrom {bs(w)}" if np.isfinite(v) else "" for v, w in zip(vs, ws)]
                    for vs, ws in zip(table.values, wins.values)
                ],
                index=table.index,
                columns=table.columns,
            )
            data, cmap, bar = np.log2(table), "RdBu", f"log2 best {device} / best cpu (blue: {device} faster)"
        else:
            annot = table.map(lambda v: "" if not np.isfinite(v) else rate(v))
            data, cmap, bar = np.log10(table), "viridis", "log10 samples/s of the cpu's best mode"
        sns.heatmap(
            data,
            annot=annot,
            fmt="",
            cmap=cmap,
            center=0 if device != CPU else None,
            ax=ax,
            linewidths=0.5,
            cbar_kws={"label": bar},
            annot_kws={"fontsize": 7},
        )
        ax.set_yticks(np.arange(len(order)) + 0.5, [place_label(p, h) for h in order], rotation=0, fontsize=8)
        b = bs(p["batch_size"].max()) if len(p) else ""
        what = f"best {device} over best cpu" if device != CPU else "no accelerator ran: the cpu's best mode, samples/s"
        ax.set_title(f"{what}, batch {b}{note}", fontsize=10)
        ax.set(xlabel="network", ylabel="machine (fastest first)")
    fig.suptitle(f"Where the accelerator wins, per network, on {m['host'].nunique()} machines", wrap=True)
    fig.tight_layout()
    return fig


def cost_machines(f: pd.DataFrame) -> plt.Figure:
    """Cost per sample across machines: per device and network, a row per machine (cheapest at
    the top) with every mode's b and its interval, and the arithmetic limit of one cpu core of
    each machine as a black bar."""
    panels = device_model_panels(f)
    n = min(MAX_SHOWN, f["host"].nunique())
    fig, axes = grid(len(panels), 2, size=(8, rows_height(n)))
    for ax, (device, model) in zip(axes, panels):
        p = f[(f["device"] == device) & (f["model"] == model)]
        note = machine_dots(ax, p, "b_us", larger_is_faster=False)
        if "limit_us" in p.columns and device == CPU and p["limit_us"].notna().any():
            rows = {t.get_text(): i for i, t in enumerate(ax.get_yticklabels())}
            lim = p.drop_duplicates("host")
            names = {h: place_label(p, h) for h in lim["host"]}
            lim = lim[lim["host"].map(names).isin(rows) & lim["limit_us"].notna()]
            ys = [rows[names[h]] for h in lim["host"]]
            mark = ax.scatter(
                lim["limit_us"], ys, marker="|", color="black", s=80, label="arithmetic limit, one cpu core"
            )
            mark.set_gid("limit")
        ax.set(xlabel="cost per sample b (µs, 95 % interval)", ylabel="machine (cheapest first)")
        ax.set_title(f"cost per sample, {device}, {model}{note}", fontsize=10)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.suptitle(f"Cost per sample (b of step time = a + b·batch) on {f['host'].nunique()} machines")
    fig.tight_layout()
    return fig


def breakdown_machines(ok: pd.DataFrame) -> plt.Figure:
    """Where a step's time goes across machines: one mode (module where it was profiled), per
    device, network and batch size a row per machine (fastest step at the top)."""
    mode = "module" if "module" in set(ok["mode"]) else ladder_order(ok["mode"])[0]
    ok = ok[ok["mode"] == mode]
    phases = [c for c in PHASES if c in ok.columns and ok[c].fillna(0).gt(0).any()]
    sizes = sorted(set(ok["batch_size"]))
    panels = [(d, m, b) for d, m in device_model_panels(ok) for b in sizes]
    n = min(MAX_SHOWN, ok["host"].nunique())
    fig, axes = grid(len(panels), len(sizes), size=(6, rows_height(n)))
    for ax, (device, model, b) in zip(axes, panels):
        p = ok[(ok["device"] == device) & (ok["model"] == model) & (ok["batch_size"] == b)]
        order, note = fastest_first(-p.groupby("host")["step_us_profiled"].min())
        p = p.drop_duplicates("host").set_index("host").reindex(order)
        left = np.zeros(len(p))
        for c in phases:
            v = p[c].fillna(0).to_numpy()
            ax.barh([place_label(ok, h) for h in order], v, left=left, color=PHASE_COLOR[c], label=PHASES[c])
            left += v
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
        ax.set(xlabel="µs per step (profiled)", ylabel="machine (fastest first)")
        ax.set_title(f"{mode}, {device}, {model}, batch {b}{note}", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(f"Step-time breakdown (torch.profiler) of {mode} on {ok['host'].nunique()} machines")
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), bbox_to_anchor=(0.5, 0.0), fontsize=8)
    return fig


# 0 ------------------------------------------------------------------------------------------------


@draws
def ladder(lad: pd.DataFrame) -> plt.Figure:
    """The ladder: samples/s of every mode, in the ladder's order, at the smallest and the largest
    batch size; each bar labelled with its factor over the beginner's code on its device. One row
    of panels per host x network; with several devices their bars stand side by side (colour =
    device), with one the colour is the mode's. On the cpu a dashed line marks the network's dense
    arithmetic limit on one core (`limit_samples_per_s`)."""
    title = "The mode ladder"
    if lad.empty:
        return note_figure(title, "No mode ran successfully: nothing to draw.")
    if several(lad):
        return ladder_machines(lad)
    rows = host_model_panels(lad)
    hosts, models = {h for h, _ in rows}, {m for _, m in rows}
    points = [p for p in ("smallest", "largest") if p in set(lad["point"])]
    modes = ladder_order(lad["mode"])
    fig, axes = plt.subplots(
        len(rows), len(points), figsize=(1.2 + 0.75 * len(modes) * len(points), 4.6 * len(rows)), squeeze=False
    )
    for row, (host, model) in zip(axes, rows):
        h = lad[(lad["host"] == host) & (lad["model"] == model)]
        devices = cpu_first(h["device"])
        width = 0.8 / len(devices)
        for ax, point in zip(row, points):
            p = h[h["point"] == point]
            x = {m: i for i, m in enumerate(modes)}
            for j, device in enumerate(devices):
                d = p[p["device"] == device].set_index("mode").reindex([m for m in modes if m in set(p["mode"])])
                d = d[d["samples_per_s"].notna()]
                if d.empty:
                    continue
                colors = [MODE_COLOR[m] for m in d.index] if len(devices) == 1 else device_color(device)
                pos = [x[m] - 0.4 + width * (j + 0.5) for m in d.index]
                bars = ax.bar(pos, d["samples_per_s"], width=width * 0.95, color=colors, label=device)
                for bar in bars:
                    bar.set_gid(f"{device}|{d.index[list(bars).index(bar)]}")
                labels = [times(v) if np.isfinite(v) else "" for v in d["over_seed"]]
                ax.bar_label(bars, labels=labels, fontsize=7, padding=2)
                interval_bars(ax, pos, d)
            lim = p[p["device"] == CPU]["limit_samples_per_s"] if "limit_samples_per_s" in p else p.iloc[:0, 0]
            lim = pd.to_numeric(lim, errors="coerce").dropna()
            if len(lim):  # the dense limit: a mode that skips arithmetic (sparse) can stand above it
                line = ax.axhline(
                    lim.iloc[0], color="black", ls="--", lw=1, label="dense arithmetic limit, one cpu core"
                )
                line.set_gid("limit")
            b = p["batch_size"].iloc[0] if len(p) else ""
            ax.set_xticks(range(len(modes)), modes, rotation=30, ha="right")
            ax.set(yscale="log", xlabel="mode (ladder order)", ylabel="samples / s (median, 95 % interval)")
            log_ticks(ax, "y")
            ax.set_title(panel_title(f"batch {b}", host, model, hosts, models))
            ax.grid(False, axis="x")
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.margins(y=0.15)
            if len(devices) > 1 or len(lim):
                ax.legend(title=None, fontsize=8, loc="upper left")
    fig.suptitle(ladder_finding(lad))
    fig.tight_layout()
    return fig


def interval_bars(ax, pos, d: pd.DataFrame) -> None:
    """The 95 % interval of each bar's median as a black whisker; a bar without one (one usable
    run) gets none."""
    if "samples_per_s_lo" not in d.columns:
        return
    have = d["samples_per_s_lo"].notna() & d["samples_per_s_hi"].notna()
    if not have.any():
        return
    y = d["samples_per_s"][have]
    err = np.array([(y - d["samples_per_s_lo"][have]).clip(lower=0), (d["samples_per_s_hi"][have] - y).clip(lower=0)])
    x = [p for p, h in zip(pos, have) if h]
    bars = ax.errorbar(x, y, yerr=err, fmt="none", ecolor="black", elinewidth=1.2, capsize=0)
    bars.lines[2][0].set_gid("interval")


def ladder_finding(lad: pd.DataFrame) -> str:
    """The ladder's title: the climb on each device at the smallest batch and, where an
    accelerator ran, its best mode against the cpu's best at both batch sizes, with 95 %
    intervals (of the first host's first network: the others' are in their panels' words)."""
    parts = []
    host = hosts_of(lad)[0]
    h = lad[lad["host"] == host]
    h = h[h["model"] == h["model"].iloc[0]]
    for device in cpu_first(h["device"]):
        s = h[(h["device"] == device) & (h["point"] == "smallest")]
        top = s.loc[s["samples_per_s"].idxmax()] if len(s) else None
        if top is not None and np.isfinite(top["over_seed"]):
            factor = with_ci(top["over_seed"], top.get("over_seed_lo"), top.get("over_seed_hi"), times)
            parts.append(f"{device}: {factor} from the beginner's code at batch {top['batch_size']} ({top['mode']})")
        elif top is not None:
            parts.append(f"{device}: best at batch {top['batch_size']} is {top['mode']}")
    accelerators = [d for d in cpu_first(h["device"]) if d != CPU]
    for device in accelerators[:1]:
        for point in ("smallest", "largest"):
            a = h[(h["device"] == device) & (h["point"] == point) & h["over_cpu_best"].notna()]
            for _, r in a.iterrows():
                factor = with_ci(r["over_cpu_best"], r["over_cpu_best_lo"], r["over_cpu_best_hi"], times)
                parts.append(f"best {device} = {factor} best cpu at batch {r['batch_size']}")
    head = f"{h['model'].iloc[0]}: " if lad["model"].nunique() > 1 else ""
    return head + "; ".join(parts) if parts else "The mode ladder"


# 1 ------------------------------------------------------------------------------------------------


@draws
def throughput(runs: pd.DataFrame, fits: pd.DataFrame, use=("ok",)) -> plt.Figure:
    """samples/s against batch size, log-log; colour = device, marker = mode; median over the
    usable repeats with its 95 % interval (uncertainty.py) as a band, and the fitted B / (a + b·B) as a thin
    dotted curve. Runs left out of the analysis (a noisy or short timing) are drawn hollow. One
    panel per host x network. With a single device, colour goes to the mode too (one colour
    would hide which line is which) and the device moves to the title."""
    ok = usable(runs, use).copy()
    title = "Training throughput by device and mode"
    if ok.empty:
        return note_figure(title, "No successful run: nothing to plot.")
    left = succeeded(runs)[lambda r: ~r.index.isin(ok.index)]
    ok = ok.assign(model=pd.Categorical(ok["model"], by_size(ok))).sort_values("model")
    ok["model"] = ok["model"].astype(str)
    if several(ok):
        return throughput_machines(ok)
    panels = host_model_panels(ok)
    hosts, models = {h for h, _ in panels}, {m for _, m in panels}
    devices = cpu_first(ok["device"])
    hue = "device" if len(devices) > 1 else "mode"
    if hue == "mode":
        title = f"Training throughput by mode on {devices[0]}"
    colour = {d: device_color(d) for d in devices} if hue == "device" else MODE_COLOR
    modes = ladder_order(ok["mode"])
    fig, axes = grid(len(panels), 2, size=(8, 5))
    for ax, (host, model) in zip(axes, panels):
        h = ok[(ok["host"] == host) & (ok["model"] == model)]
        sns.lineplot(
            data=h,
            x="batch_size",
            y="samples_per_s",
            hue=hue,
            hue_order=[v for v in (devices if hue == "device" else modes) if v in set(h[hue])],
            style="mode",
            style_order=[m for m in modes if m in set(h["mode"])],
            markers={m: MODE_MARKER[m] for m in modes},
            estimator="median",
            errorbar=None,
            dashes=True,
            palette=colour,
            ax=ax,
        )
        for (device, mode), g in h.groupby(["device", "mode"]):
            band = interval_band(g)
            if band is not None:
                c = colour.get(device if hue == "device" else mode, "grey")
                fill = ax.fill_between(*band, color=c, alpha=0.2, lw=0)
                fill.set_gid("interval")
        hl = left[(left["host"] == host) & (left["model"] == model)]
        for _, r in hl.iterrows():  # left out of the analysis: hollow, not connected
            c = colour.get(r[hue], "grey")
            (pt,) = ax.plot(
                [r["batch_size"]], [r["samples_per_s"]], ls="", marker=MODE_MARKER[r["mode"]], mfc="none", mec=c
            )
            pt.set_gid("excluded")
        lo, hi = h["batch_size"].min(), h["batch_size"].max()
        xs = np.geomspace(lo, hi, 64) if hi > lo else np.array([lo])
        here = fits[(fits["host"] == host) & (fits["model"] == model)]
        for _, f in here[here["a_us"].notna() & here["b_us"].notna()].iterrows():
            step = (f["a_us"] + f["b_us"] * xs) * 1e-6
            (line,) = ax.plot(xs, xs / step, ls=":", lw=1.0, alpha=0.8, color=colour.get(f[hue], "grey"))
            line.set_gid("fit")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (median, 95 % interval band)")
        log_ticks(ax, "x", ticks=h["batch_size"])
        log_ticks(ax, "y")
        ax.set_title(panel_title(title, host, model, hosts, models))
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], ls=":", color="grey"))
        labels.append("fit: B / (a + b·B)")
        if len(hl):
            handles.append(Line2D([], [], ls="", marker="o", mfc="none", mec="grey"))
            labels.append("left out (noisy or short timing)")
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.suptitle(throughput_finding(ok))
    fig.tight_layout()
    return fig


def interval_band(g: pd.DataFrame):
    """(batch sizes, lo, hi) of one line's 95 % intervals of the median samples/s, from the same
    replicates as the tables; None where no batch size has one."""
    b = PLACE_KEYS.index("batch_size")
    reps = uncertainty.replicates(g, PLACE_KEYS)
    keys = sorted(reps, key=lambda k: k[b])
    bounds = [uncertainty.interval(k[b] / uncertainty.medians(reps[k])) for k in keys]
    if all(np.isnan(lo) for lo, _ in bounds):
        return None
    return [k[b] for k in keys], [lo for lo, _ in bounds], [hi for _, hi in bounds]


def throughput_finding(ok: pd.DataFrame) -> str:
    """How much a larger batch buys: module's gain (the tutorial's way) or the largest, and the
    fastest mode at the largest batch (of the first network: the others' are in their panels)."""
    ok = ok[ok["model"] == ok["model"].iloc[0]]
    med = ok.groupby(["device", "mode", "batch_size"])["samples_per_s"].median().reset_index()
    small, large = med["batch_size"].min(), med["batch_size"].max()
    if small == large:
        return f"One batch size ({small}): nothing to compare"
    a = med[med["batch_size"] == small].set_index(["device", "mode"])["samples_per_s"]
    b = med[med["batch_size"] == large].set_index(["device", "mode"])["samples_per_s"]
    gain = (b / a).dropna()
    if gain.empty:
        return f"Samples/s against batch size, {small} to {large}"
    device, mode = next(((d, m) for d, m in gain.index if m == "module"), gain.idxmax())
    top = b.idxmax()
    return (
        f"{mode} on {device} trains {times(gain[(device, mode)])} the samples/s at batch {large} as at batch {small}; "
        f"fastest at {large}: {top[1]} on {top[0]} ({rate(b.max())}/s)"
    )


# 2 ------------------------------------------------------------------------------------------------


@draws
def speedup(spd: pd.DataFrame) -> plt.Figure:
    """Heatmap of speedup (mode x batch size), one panel per host x accelerator x network over the
    cpu. With no accelerator in the data, each mode over the network's reference mode on the cpu
    instead, so a cpu-only run still shows what the speedup structure is."""
    title = "Speedup"
    dev = spd[spd["kind"] == "device"]
    data, what = (dev, "over cpu, same mode") if len(dev) else (spd[spd["kind"] == "mode"], "")
    if data.empty:
        return note_figure(title, "Not enough successful runs to compare (no accelerator, one mode).")
    if several(data):
        return speedup_machines(data, what)
    panels = [(h, d, m) for h, d in host_device_panels(data) for m in dict.fromkeys(data["model"])]
    panels = [
        (h, d, m) for h, d, m in panels if ((data["host"] == h) & (data["device"] == d) & (data["model"] == m)).any()
    ]
    hosts, models = {h for h, _, _ in panels}, {m for _, _, m in panels}
    fig, axes = grid(
        len(panels), 2, size=(1.0 + 1.1 * data["batch_size"].nunique(), 0.9 + 0.5 * data["mode"].nunique())
    )
    for ax, (host, device, model) in zip(axes, panels):
        p = data[(data["host"] == host) & (data["device"] == device) & (data["model"] == model)]
        table = p.pivot_table(index="mode", columns="batch_size", values="speedup", aggfunc="median")
        table = table.reindex(ladder_order(table.index))
        speedup_cells(ax, table, "log2 speedup (blue: faster)")
        ref = p["baseline_mode"].iloc[0]
        label = f"{device} {what}" if what else f"each mode over {ref}, {device}"
        ax.set_title(panel_title(label, host, model, hosts, models))
        ax.set(xlabel="batch size", ylabel="mode")
    best = data.loc[data["speedup"].idxmax()]
    fig.suptitle(
        f"Up to {times(best['speedup'])}: {best['mode']} on {best['device']} at batch {best['batch_size']}"
        + (f" ({best['model']})" if len(models) > 1 else "")
        + ("" if what else f" over {best['baseline_mode']}")
    )
    fig.tight_layout()
    return fig


@draws
def map_(m: pd.DataFrame) -> plt.Figure:
    """Where the accelerator wins, per network: network size (FLOP per training sample, log) x batch
    size (log); each cell the best accelerator mode's samples/s over the best cpu mode's (colour:
    blue faster, red slower), and per network the batch size from which the accelerator wins (a
    black edge), with its 95 % interval as a bar. One panel per place x accelerator. Where no
    accelerator ran, one panel per place with the cpu's best mode and its samples/s in each cell,
    and the title says so."""
    title = "Where the accelerator wins, per network"
    if m.empty:
        return note_figure(title, "No network ran successfully: nothing to map.")
    if several(m):
        return map_machines(m)
    # A place's accelerators, or where it has none its cpu alone; reference machines after this run.
    panels = []
    for h in hosts_of(m):
        devices = [d for d in cpu_first(m[m["host"] == h]["device"]) if d != CPU]
        panels += [(h, d) for d in devices] or [(h, CPU)]
    hosts = {h for h, _ in panels}
    sizes = sorted(set(m["batch_size"]))
    order = list(dict.fromkeys(m.sort_values(["flop_per_sample", "model"])["model"]))
    fig, axes = grid(len(panels), 2, size=(1.6 + 0.9 * len(sizes), 1.4 + 0.55 * len(order)))
    for ax, (host, device) in zip(axes, panels):
        p = m[(m["host"] == host) & (m["device"] == device)]
        value = "over_cpu_best" if device != CPU else "samples_per_s"
        table = p.pivot_table(index="model", columns="batch_size", values=value, aggfunc="first")
        table = table.reindex(index=[o for o in order if o in table.index], columns=sizes)
        if device != CPU:
            annot = table.map(lambda v: "" if not np.isfinite(v) else times(v))
            sns.heatmap(
                np.log2(table),
                annot=annot,
                fmt="",
                cmap="RdBu",
                center=0,
                ax=ax,
                linewidths=0.5,
                cbar_kws={"label": f"log2 best {device} / best cpu (blue: {device} faster)"},
            )
            wins = p.drop_duplicates("model").set_index("model").reindex(table.index)
            for i, (_, r) in enumerate(wins.iterrows()):
                if not np.isfinite(r.get("wins_from", np.nan)) and r.get("verdict") != "slower at every batch size":
                    continue
                col = lambda b: sizes.index(b) if b in sizes else len(sizes)  # noqa: E731  (inf: past the grid)
                x, lo, hi = col(r["wins_from"]), col(r["wins_from_lo"]), col(r["wins_from_hi"])
                if np.isfinite(r.get("wins_from_lo", np.nan)) or r.get("wins_from_lo") == np.inf:
                    (bar,) = ax.plot([lo, hi], [i + 0.5, i + 0.5], color="black", lw=2.5, solid_capstyle="butt")
                    bar.set_gid("interval")
                (edge,) = ax.plot([x, x], [i, i + 1], color="black", lw=2)
                edge.set_gid("crossover")
            label = f"best {device} over best cpu"
        else:
            modes = p.pivot_table(index="model", columns="batch_size", values="best_mode", aggfunc="first")
            modes = modes.reindex(index=table.index, columns=sizes)
            annot = pd.DataFrame(
                [
                    [f"{rate(v)}\n{k}" if np.isfinite(v) else "" for v, k in zip(vs, ks)]
                    for vs, ks in zip(table.values, modes.values)
                ],
                index=table.index,
                columns=table.columns,
            )
            sns.heatmap(
                np.log10(table),
                annot=annot,
                fmt="",
                cmap="viridis",
                ax=ax,
                linewidths=0.5,
                cbar_kws={"label": "log10 samples/s of the cpu's best mode"},
            )
            label = "no accelerator ran: the cpu's best mode, samples/s"
        flops = p.drop_duplicates("model").set_index("model")["flop_per_sample"].reindex(table.index)
        ax.set_yticks(np.arange(len(table)) + 0.5, [f"{k}\n{flop(v)}" for k, v in flops.items()], rotation=0)
        ax.set(xlabel="batch size", ylabel="network (FLOP per sample)")
        ax.set_title(label + (f" — {host}" if len(hosts) > 1 else ""))
    fig.suptitle(map_finding(m, panels), wrap=True)
    fig.tight_layout()
    return fig


def map_finding(m: pd.DataFrame, panels) -> str:
    """The map's title: for the first panel, the networks the accelerator beats the cpu on and
    from which batch size, or that no accelerator ran (and then what the first reference
    machine's accelerator does)."""
    host, device = panels[0]
    if device == CPU:
        title = f"No accelerator ran on {host}: the cpu's side of the map only"
        beside = [(h, d) for h, d in panels[1:] if d != CPU]
        return title + (f"; beside it, {beside[0][0]}: {map_finding(m, beside)}" if beside else "")
    p = m[(m["host"] == host) & (m["device"] == device)].drop_duplicates("model")
    p = p.sort_values("flop_per_sample")
    parts = [
        f"{r['model']} from batch {bs(r['wins_from'])}"
        for _, r in p.iterrows()
        if r.get("verdict") in ("slower below, faster above", "faster at every batch size")
    ]
    if not parts:
        return f"{device}'s best mode beats the cpu's best on no network of the grid"
    return f"{device}'s best mode beats the cpu's best: " + ", ".join(parts)


@draws
def cost(fits: pd.DataFrame) -> plt.Figure:
    """Each mode's cost per sample (the fit's b, with its 95 % interval) against the network's
    FLOP per training sample, log-log: where b stays flat, overhead per sample (Python, dispatch,
    memory traffic) sets it; where it grows with the FLOP, arithmetic has taken over. On the cpu
    the arithmetic limit of one core (FLOP at its measured peak rate) is drawn as a dashed line:
    no mode on one thread can go below it. Colour = mode, marker = device; one panel per place."""
    title = "Cost per sample against network size"
    f = fits[fits["b_us"].notna() & fits["flop_per_sample"].notna()] if "flop_per_sample" in fits.columns else fits
    if f.empty or f["model"].nunique() < 1:
        return note_figure(title, "No fit of a + b·batch: nothing to draw (run two or more batch sizes).")
    if several(f):
        return cost_machines(f)
    hosts = machines.by_name(f["host"])
    fig, axes = grid(len(hosts), 2, size=(7.5, 5))
    for ax, host in zip(axes, hosts):
        h = f[f["host"] == host].sort_values("flop_per_sample")
        for (device, mode), g in h.groupby(["device", "mode"], sort=False):
            colour = MODE_COLOR.get(mode, "grey")
            (line,) = ax.plot(
                g["flop_per_sample"],
                g["b_us"],
                marker=device_marker(device),
                color=colour,
                label=f"{mode} ({device})" if h["device"].nunique() > 1 else mode,
            )
            line.set_gid(f"{device}|{mode}")
            if {"b_us_lo", "b_us_hi"} <= set(g.columns) and g["b_us_lo"].notna().any():
                err = np.array([(g["b_us"] - g["b_us_lo"]).clip(lower=0), (g["b_us_hi"] - g["b_us"]).clip(lower=0)])
                bars = ax.errorbar(g["flop_per_sample"], g["b_us"], yerr=err, fmt="none", ecolor=colour, elinewidth=1)
                bars.lines[2][0].set_gid("interval")
        lim = (
            h[(h["device"] == CPU) & h["limit_us"].notna()].drop_duplicates("model") if "limit_us" in h else h.iloc[:0]
        )
        if len(lim):
            (line,) = ax.plot(
                lim["flop_per_sample"],
                lim["limit_us"],
                ls="--",
                color="black",
                lw=1,
                label="arithmetic limit, one cpu core",
            )
            line.set_gid("limit")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="FLOP per training sample (network size)",
            ylabel="cost per sample b (µs, 95 % interval)",
        )
        log_ticks(ax, "x")
        log_ticks(ax, "y")
        ax.set_title(title + (f" — {host}" if len(hosts) > 1 else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.suptitle(cost_finding(f))
    fig.tight_layout()
    return fig


def cost_finding(f: pd.DataFrame) -> str:
    """The cost figure's title: on the first place's cpu, how much of the fastest mode's cost per
    sample the arithmetic explains at the smallest and the largest network."""
    h = f[(f["host"] == machines.by_name(f["host"])[0]) & (f["device"] == CPU)]
    if h.empty or "limit_us" not in h or h["limit_us"].isna().all() or h["model"].nunique() < 2:
        return "Cost per sample (b of step time = a + b·batch) against FLOP per sample"
    best = h.loc[h.groupby("model")["b_us"].idxmin()].sort_values("flop_per_sample")
    lo, hi = best.iloc[0], best.iloc[-1]
    return (
        f"cpu: {lo['model']} costs {us(lo['b_us'])} per sample ({times(lo['b_us'] / lo['limit_us'])} its arithmetic), "
        f"{hi['model']} {us(hi['b_us'])} ({times(hi['b_us'] / hi['limit_us'])})"
    )


# 3 ------------------------------------------------------------------------------------------------


@draws
def breakdown(prof: pd.DataFrame) -> plt.Figure:
    """Stacked bars: where a profiled step's time goes, per mode (ladder order, top to bottom), at
    the smallest and the largest batch size; one row of panels per host x device x network."""
    title = "Step-time breakdown (torch.profiler)"
    ok = succeeded(prof)
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to break down.")
    if several(ok):
        return breakdown_machines(ok)
    ok = ok.copy()
    phases = [c for c in PHASES if c in ok.columns and ok[c].fillna(0).gt(0).any()]
    order = list(dict.fromkeys(ok.sort_values("step_us_plain")["model"]))  # smaller networks first
    rows = [(h, d, m) for h, d in host_device_panels(ok) for m in order]
    rows = [(h, d, m) for h, d, m in rows if ((ok["host"] == h) & (ok["device"] == d) & (ok["model"] == m)).any()]
    hosts, models = {h for h, _, _ in rows}, {m for _, _, m in rows}
    sizes = sorted(set(ok["batch_size"]))
    modes = ladder_order(ok["mode"])
    fig, axes = plt.subplots(
        len(rows), len(sizes), figsize=(6 * len(sizes), (1.4 + 0.4 * len(modes)) * len(rows) + 0.8), squeeze=False
    )
    for (host, device, model), row in zip(rows, axes):
        for ax, b in zip(row, sizes):
            p = ok[(ok["host"] == host) & (ok["device"] == device) & (ok["model"] == model) & (ok["batch_size"] == b)]
            p = p.set_index("mode").reindex(modes).dropna(how="all", subset=phases)
            left = np.zeros(len(p))
            for c in phases:
                v = p[c].fillna(0).to_numpy()
                ax.barh(p.index, v, left=left, color=PHASE_COLOR[c], label=PHASES[c])
                left += v
            ax.invert_yaxis()  # modes top to bottom in ladder order
            ax.set(xlabel="µs per step (profiled)", ylabel="mode")
            ax.set_title(panel_title(f"{device}, batch {b}", host, model, hosts, models))
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.grid(False, axis="y")
            ax.grid(True, axis="x", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    small = ok[ok["batch_size"] == sizes[0]]
    top = small.loc[small["step_us_profiled"].idxmax()]
    fig.suptitle(f"{title}: at batch {sizes[0]} the slowest step is {top['mode']} on {top['device']}")
    fig.tight_layout()
    # The phase legend under the panels, where it cannot cover a bar or the title.
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), bbox_to_anchor=(0.5, 0.0), fontsize=8)
    return fig


# 4 ------------------------------------------------------------------------------------------------


@draws
def accuracy(epochs: pd.DataFrame, runs: pd.DataFrame, target=None, use=("ok",)) -> plt.Figure:
    """Test accuracy after each epoch against cumulative training time (time to accuracy): colour
    = mode, line style = batch size, one panel per host x network x device; median over the
    repeats."""
    title = "Test accuracy against training time"
    keys = ["host", "device", "model", "mode", "batch_size", "repeat"]
    ok = usable(runs, use)[keys]
    e = epochs.merge(ok, on=keys) if len(epochs) else epochs
    if e.empty:
        return note_figure(title, "No successful run with per-epoch records.")
    if several(e):  # machines pooled: the curve's shape is the mode's and the batch's, not the machine's
        e = e.assign(host=f"median over {e['host'].nunique()} machines")
    med = e.groupby(keys[:-1] + ["epoch"], as_index=False)[["cum_train_s", "test_accuracy"]].median()
    med["batch"] = med["batch_size"].map(lambda b: f"batch {b}")
    batches = [f"batch {b}" for b in sorted(set(med["batch_size"]))]
    order = by_size(runs[runs["model"].isin(set(med["model"]))])
    panels = [(h, m, d) for h in machines.by_name(med["host"]) for m in order for d in cpu_first(med["device"])]
    panels = [
        (h, m, d) for h, m, d in panels if ((med["host"] == h) & (med["model"] == m) & (med["device"] == d)).any()
    ]
    hosts, models = {h for h, _, _ in panels}, {m for _, m, _ in panels}
    devices = {d for _, _, d in panels}
    fig, axes = grid(len(panels), 3, size=(5.5, 4))
    for ax, (host, model, device) in zip(axes, panels):
        p = med[(med["host"] == host) & (med["model"] == model) & (med["device"] == device)]
        sns.lineplot(
            data=p,
            x="cum_train_s",
            y="test_accuracy",
            hue="mode",
            hue_order=ladder_order(med["mode"]),
            palette=MODE_COLOR,
            style="batch",
            style_order=batches,
            markers=True,
            ax=ax,
        )
        if target is not None:
            ax.axhline(target, ls="--", color="grey", lw=0.8, label=f"target {target}")
        ax.set(xscale="log", xlabel="training time (s, cumulative, log)", ylabel="test accuracy", ylim=(0, 1))
        ax.set_title(panel_title(device if len(devices) > 1 else "test accuracy", host, model, hosts, models))
        ax.grid(True, which="both", alpha=0.3)
        log_ticks(ax, "x")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend().remove()
    # One legend for all panels, outside them, so it never hides a line.
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8)
    last = med[med["epoch"] == med["epoch"].max()]
    top = last.loc[last["test_accuracy"].idxmax()]
    fig.suptitle(
        f"{title}: best {top['test_accuracy']:.2f} ({top['model']}, {top['mode']} on {top['device']}, "
        f"batch {top['batch_size']})"
    )
    fig.tight_layout()
    return fig


# 5 ------------------------------------------------------------------------------------------------


@draws
def bandwidth(transfer: pd.DataFrame) -> plt.Figure:
    """Copy bandwidth against transfer size, log-log; colour = device (host · device when several
    hosts), line style = pinned or pageable memory. On the cpu, a host memcpy (the baseline)."""
    title = "Host → device copy bandwidth"
    if transfer.empty:
        return note_figure(title, "No copy timings.")
    t = transfer.copy()
    t["target"] = t["device"].where(t["device"] != CPU, "cpu (host memcpy)")
    if t["host"].nunique() > MAX_LEGEND:  # machines pooled per device: a band, not a legend of hosts
        t = t.assign(target=t["target"] + f" ({t['host'].nunique()} machines)")
    elif t["host"].nunique() > 1:
        t["target"] = t["host"] + " · " + t["target"]
    colour = {tg: device_color(d) for tg, d in zip(t["target"], t["device"])}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    memories = [m for m in ("pageable", "pinned") if m in set(t["memory"])]
    order = [tg for d in cpu_first(t["device"]) for tg in dict.fromkeys(t[t["device"] == d]["target"])]
    sns.lineplot(
        data=t,
        x="bytes",
        y="gb_per_s",
        hue="target",
        hue_order=order,
        palette=colour,
        style="memory",
        style_order=memories,
        markers=True,
        ax=ax,
    )
    ax.set(xscale="log", yscale="log", xlabel="bytes per copy", ylabel="GB / s (median of 7 copies)")
    log_ticks(ax, "x")
    log_ticks(ax, "y")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    big = t.loc[t["gb_per_s"].idxmax()]
    fig.suptitle(f"Fastest copy: {big['gb_per_s']:.3g} GB/s ({big['target']}, {big['memory']}, {si(big['bytes'])}B)")
    fig.tight_layout()
    return fig


# 6 ------------------------------------------------------------------------------------------------


@draws
def ops(prof: pd.DataFrame) -> plt.Figure:
    """Torch ops dispatched per training step (in the step + fetching the batch), per mode; a second
    row with kernel launches when an accelerator that launches kernels was profiled. A bar per
    device (and host, and network, where there are several)."""
    title = "Ops per training step (torch.profiler)"
    ok = succeeded(prof).copy()
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to count.")
    if several(ok):  # ops per step are the code's, not the machine's: the median over machines
        keys = ["device", "model", "mode", "batch_size"]
        num = [c for c in ("ops_step", "ops_batch", "launches") if c in ok.columns]
        ok = ok.groupby(keys, as_index=False)[num].median().assign(host=f"{ok['host'].nunique()} machines")
    ok["target"] = ok["device"] if ok["host"].nunique() == 1 else ok["host"] + " · " + ok["device"]
    if ok["model"].nunique() > 1:
        ok["target"] = ok["target"] + " · " + ok["model"]
    ok["torch ops per step"] = ok["ops_step"] + ok["ops_batch"]
    measures = ["torch ops per step"]
    if "launches" in ok.columns and ok["launches"].notna().any():
        ok["kernel launches per step"] = ok["launches"]
        measures.append("kernel launches per step")
    sizes = sorted(set(ok["batch_size"]))
    modes = ladder_order(ok["mode"])
    targets = [tg for d in cpu_first(ok["device"]) for tg in dict.fromkeys(ok[ok["device"] == d]["target"])]
    colour = {tg: device_color(d) for tg, d in zip(ok["target"], ok["device"])}
    fig, axes = plt.subplots(
        len(measures),
        len(sizes),
        figsize=(1.0 + 0.7 * len(modes) * len(sizes) * max(1, len(targets) / 2), 3.8 * len(measures)),
        squeeze=False,
    )
    for row, measure in zip(axes, measures):
        present = [t for t in targets if ok.loc[ok["target"] == t, measure].notna().any()]  # no empty slots
        for ax, b in zip(row, sizes):
            p = ok[(ok["batch_size"] == b) & ok[measure].notna()]
            sns.barplot(
                data=p,
                x="mode",
                y=measure,
                hue="target",
                order=modes,
                hue_order=present,
                palette=colour,
                saturation=1,  # the palette's colours, not seaborn's muted ones
                errorbar=None,  # one profiled value per bar
                ax=ax,
            )
            for c in ax.containers:
                ax.bar_label(c, fmt="%.0f", fontsize=7)
            ax.set(xlabel="mode", ylabel=measure)
            ax.set_title(f"batch {b}")
            ax.tick_params(axis="x", rotation=30)
            if ax is row[-1]:  # one legend per row, right of the panels, never over a bar
                ax.legend(title=None, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            else:
                ax.legend().remove()
    small = ok[ok["batch_size"] == sizes[0]]
    top, low = small.loc[small["torch ops per step"].idxmax()], small.loc[small["torch ops per step"].idxmin()]
    fig.suptitle(
        f"{title}: {top['mode']} dispatches {top['torch ops per step']:.0f} per step at batch {sizes[0]}, "
        f"{low['mode']} {low['torch ops per step']:.0f}"
    )
    fig.tight_layout()
    return fig


# --- the rule -----------------------------------------------------------------------------------


def save(fig, path, dpi=110) -> None:
    """Write a figure as PNG at `dpi`, or at the dpi that keeps its larger side within MAX_PIXELS
    (a figure of many panels shrinks, it never grows without bound)."""
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    side = max(box.width, box.height) + 0.2  # inches, with savefig's padding
    dpi = min(dpi, int((MAX_PIXELS - 2) / side))
    with files.atomic(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def render(inp, out, dpi=110, style="whitegrid", target=None, use=("ok",), log=print) -> None:
    """Read the summary CSVs, draw and write every figure of the registry that `out` names."""
    sns.set_theme(style=style)
    tables = {}
    options = {"target": target, "use": tuple(use)}
    for name, f in FIGURES.items():
        if name not in out.keys():
            continue
        for i in f.inputs:
            if i not in tables:
                t = pd.read_csv(inp[i])
                tables[i] = machines.places(t) if i in ("runs", "epochs") else t  # as the analysis compares
        fig = DRAW[name](*(tables[i] for i in f.inputs), **{o: options[o] for o in f.options})
        save(fig, out[name], dpi=dpi)
        log(f"wrote {out[name]}")


_undrawn = [name for name in FIGURES if name not in DRAW]
if _undrawn:
    raise ImportError(f"figures of catalog.py with no function in figures.py: {', '.join(_undrawn)}")
