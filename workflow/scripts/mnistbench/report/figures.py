"""Seaborn figures of the summary tables: one drawing function per entry of catalog.FIGURES, registered
with `@draws`, that returns its figure (the tests read its axes, bars, lines and legend). With several
machines in the data a figure compares them in one panel instead (machine_figures.py). To add a figure:
its entry in catalog.py, its function here, its page in templates/pages.rst.j2 and its caption
workflow/report/<name>.rst.
"""

import json

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from mnistbench.collect import uncertainty
from mnistbench.collect.aggregate import succeeded, usable
from mnistbench.config.catalog import FIGURES
from mnistbench.config.devices import CPU, cpu_first, traits
from mnistbench.measure import machines
from mnistbench.report import machine_figures as across
from mnistbench.report import words
from mnistbench.report.look import (
    MAX_LEGEND,
    MODE_COLOR,
    MODE_MARKER,
    PHASE_COLOR,
    PHASES,
    device_color,
    error_bars,
    grid,
    ladder_order,
    log_ticks,
    note_figure,
    panel_title,
    place_panels,
    places_of,
    save,
    several,
    speedup_cells,
    titled,
    with_data,
)
from mnistbench.report.many import one_at_a_time
from mnistbench.report.numbers import flop, rate, times
from mnistbench.report.tables import PLACE_KEYS, by_size, placed, rates

DRAW = {}


def draws(fn):
    """Register fn as the drawing of the figure of its name (a trailing underscore dropped: `map_`
    draws `map` without hiding the builtin)."""
    name = fn.__name__.removesuffix("_")
    if name not in FIGURES:
        raise ImportError(f"figures.py draws {name}, which is not a figure of catalog.py")
    DRAW[name] = fn
    return fn


def default(name: str) -> str:
    return FIGURES[name].content.capitalize()


@draws
def ladder(lad: pd.DataFrame, title: str = default("ladder")) -> object:
    """Every mode's samples/s at both ends of the grid, each bar labelled with its factor over the
    beginner's code on its device; with several devices colour = device, with one the mode's. On the
    cpu a dashed line marks the network's dense arithmetic limit on one core."""
    if lad.empty:
        return note_figure(title, "No mode ran successfully: nothing to draw.")
    if several(lad):
        return titled(across.ladder(lad), title)
    rows = [(p, m) for p in places_of(lad) for m in dict.fromkeys(lad[lad["place"] == p]["model"])]
    places, models = {p for p, _ in rows}, {m for _, m in rows}
    points = [p for p in ("smallest", "largest") if p in set(lad["point"])]
    modes = ladder_order(lad["mode"])
    fig, axes = grid(len(rows) * len(points), len(points), size=(1.2 / len(points) + 0.75 * len(modes), 4.6))
    for k, (place, model) in enumerate(rows):
        h = lad[(lad["place"] == place) & (lad["model"] == model)]
        devices = cpu_first(h["device"])
        width = 0.8 / len(devices)
        for ax, point in zip(axes[k * len(points) :], points):
            p = h[(h["point"] == point) & h["samples_per_s"].notna()]
            if p.empty:  # every run of this network at this batch size was set aside: no empty panel
                ax.remove()
                continue
            x = {m: i for i, m in enumerate(modes)}
            for j, device in enumerate(devices):
                d = p[(p["device"] == device) & p["samples_per_s"].notna()].set_index("mode")
                d = d.reindex([m for m in modes if m in d.index])
                if d.empty:
                    continue
                colors = [MODE_COLOR[m] for m in d.index] if len(devices) == 1 else device_color(device)
                pos = [x[m] - 0.4 + width * (j + 0.5) for m in d.index]
                bars = ax.bar(pos, d["samples_per_s"], width=width * 0.95, color=colors, label=device)
                for bar, mode in zip(bars, d.index):
                    bar.set_gid(f"{device}|{mode}")
                labels = [times(v) if np.isfinite(v) else "" for v in d["over_seed"]]
                ax.bar_label(bars, labels=labels, fontsize=7, padding=2)
                error_bars(ax, pos, d["samples_per_s"], d["samples_per_s_lo"], d["samples_per_s_hi"])
            lim = p[p["device"] == CPU].get("limit_samples_per_s", pd.Series(dtype=float))
            lim = pd.to_numeric(lim, "coerce").dropna()
            if len(lim):  # the dense limit: a mode that skips arithmetic (sparse) can stand above it
                label = "dense arithmetic limit, one cpu core"
                ax.axhline(lim.iloc[0], color="black", ls="--", lw=1, label=label).set_gid("limit")
            b = p["batch_size"].iloc[0] if len(p) else ""
            ax.set_xticks(range(len(modes)), modes, rotation=30, ha="right")
            ax.set(yscale="log", xlabel="mode (ladder order)", ylabel="samples / s (median, 95 % interval)")
            log_ticks(ax, "y")
            ax.set_title(panel_title(f"batch {b}", place, model, places, models))
            ax.grid(False, axis="x")
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.margins(y=0.15)
            if len(devices) > 1 or len(lim):
                ax.legend(title=None, fontsize=8, loc="upper left")
    return titled(fig, title)


@draws
def throughput(runs: pd.DataFrame, fits: pd.DataFrame, use=("ok",), title: str = default("throughput")) -> object:
    """samples/s against batch size: the median over the usable repeats with its 95 % interval as a
    band, the fitted B / (a + b·B) dotted, runs set aside hollow. With a single device, colour goes
    to the mode too (one colour would hide which line is which)."""
    runs = placed(runs)
    ok = usable(runs, use).copy()
    if ok.empty:
        return note_figure(title, "No successful run: nothing to plot.")
    aside = succeeded(runs)[lambda r: ~r.index.isin(ok.index)]
    ok = ok.assign(model=pd.Categorical(ok["model"], by_size(ok))).sort_values("model").astype({"model": str})
    med = rates(runs, use)
    if several(ok):
        return titled(across.throughput(med), title)
    panels = [(p, m) for p in places_of(ok) for m in dict.fromkeys(ok[ok["place"] == p]["model"])]
    places, models = {p for p, _ in panels}, {m for _, m in panels}
    devices = cpu_first(ok["device"])
    hue = "device" if len(devices) > 1 else "mode"
    name = (
        "Training throughput by device and mode" if hue == "device" else f"Training throughput by mode on {devices[0]}"
    )
    colour = {d: device_color(d) for d in devices} if hue == "device" else MODE_COLOR
    modes = ladder_order(ok["mode"])
    fig, axes = grid(len(panels), 2, size=(8, 5))
    for ax, (place, model) in zip(axes, panels):
        h = ok[(ok["place"] == place) & (ok["model"] == model)]
        hues = [v for v in (devices if hue == "device" else modes) if v in set(h[hue])]
        line = med[(med["place"] == place) & (med["model"] == model)]
        sns.lineplot(data=line, x="batch_size", y="samples_per_s", hue=hue, hue_order=hues, style="mode", ax=ax, palette=colour,
                     style_order=[m for m in modes if m in set(h["mode"])], markers={m: MODE_MARKER[m] for m in modes},
                     estimator=None, errorbar=None, dashes=True)  # fmt: skip
        for (device, mode), g in h.groupby(["device", "mode"]):
            band = interval_band(g)
            if band is not None:
                c = colour.get(device if hue == "device" else mode, "grey")
                ax.fill_between(*band, color=c, alpha=0.2, lw=0).set_gid("interval")
        hl = aside[(aside["place"] == place) & (aside["model"] == model)]
        for r in hl.to_dict("records"):  # set aside from the analysis: hollow, not connected
            (pt,) = ax.plot([r["batch_size"]], [r["samples_per_s"]], ls="", marker=MODE_MARKER[r["mode"]], mfc="none",
                            mec=colour.get(r[hue], "grey"))  # fmt: skip
            pt.set_gid("excluded")
        lo, hi = h["batch_size"].min(), h["batch_size"].max()
        xs = np.geomspace(lo, hi, 64) if hi > lo else np.array([lo])
        here = fits[(fits["place"] == place) & (fits["model"] == model) & fits["a_us"].notna() & fits["b_us"].notna()]
        for f in here.to_dict("records"):
            step = (f["a_us"] + f["b_us"] * xs) * 1e-6
            ax.plot(xs, xs / step, ls=":", lw=1.0, alpha=0.8, color=colour.get(f[hue], "grey"))[0].set_gid("fit")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (median, 95 % interval band)")
        log_ticks(ax, "x", ticks=h["batch_size"])
        log_ticks(ax, "y")
        ax.set_title(panel_title(name, place, model, places, models))
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], ls=":", color="grey"))
        labels.append("fit: B / (a + b·B)")
        if len(hl):
            handles.append(Line2D([], [], ls="", marker="o", mfc="none", mec="grey"))
            labels.append("set aside (noisy or short timing)")
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return titled(fig, title)


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


@draws
def speedup(spd: pd.DataFrame, title: str = default("speedup")) -> object:
    """Heatmap of speedup (mode x batch size), one panel per place x accelerator x network over the
    cpu. With no accelerator in the data, each mode over the network's reference mode on the cpu
    instead, so a cpu-only run still shows what the speedup structure is."""
    dev = spd[spd["kind"] == "device"]
    data, what = (dev, "over cpu, same mode") if len(dev) else (spd[spd["kind"] == "mode"], "")
    if data.empty:
        return note_figure(title, "Not enough successful runs to compare (no accelerator, one mode).")
    if several(data):
        return titled(across.speedup(data, what), title)
    order = [(p, d, m) for p, d in place_panels(data) for m in dict.fromkeys(data["model"])]
    panels = with_data(data, ["place", "device", "model"], order)
    places, models = {p for (p, _, _), _ in panels}, {m for (_, _, m), _ in panels}
    size = (1.0 + 1.1 * data["batch_size"].nunique(), 0.9 + 0.5 * data["mode"].nunique())
    fig, axes = grid(len(panels), 2, size=size)
    for ax, ((place, device, model), p) in zip(axes, panels):
        table = p.pivot_table(index="mode", columns="batch_size", values="speedup", aggfunc="median")
        speedup_cells(ax, table.reindex(ladder_order(table.index)), "log2 speedup (blue: faster)")
        label = f"{device} {what}" if what else f"each mode over {p['baseline_mode'].iloc[0]}, {device}"
        ax.set_title(panel_title(label, place, model, places, models))
        ax.set(xlabel="batch size", ylabel="mode")
    return titled(fig, title)


@draws
def map_(m: pd.DataFrame, title: str = default("map")) -> object:
    """Where the accelerator wins: network x batch size, each cell the best accelerator mode's
    samples/s over the best cpu mode's, and per network the batch size from which the accelerator
    wins (a black edge) with its 95 % interval as a bar. Where no accelerator ran, the cpu's best
    mode and its samples/s in each cell."""
    if m.empty:
        return note_figure(title, "No network ran successfully: nothing to map.")
    if several(m):
        return titled(across.map_(m), title)
    panels = []
    for p in places_of(m):  # a place's accelerators, or where it has none its cpu alone
        panels += [(p, d) for d in cpu_first(m[m["place"] == p]["device"]) if d != CPU] or [(p, CPU)]
    places = {p for p, _ in panels}
    sizes = sorted(set(m["batch_size"]))
    order = list(dict.fromkeys(m.sort_values(["flop_per_sample", "model"])["model"]))
    fig, axes = grid(len(panels), 2, size=(1.6 + 0.9 * len(sizes), 1.4 + 0.55 * len(order)))
    for ax, (place, device) in zip(axes, panels):
        p = m[(m["place"] == place) & (m["device"] == device)]
        value = "over_cpu_best" if device != CPU else "samples_per_s"
        table = p.pivot_table(index="model", columns="batch_size", values=value, aggfunc="first")
        table = table.reindex(index=[o for o in order if o in table.index], columns=sizes)
        if device != CPU:
            speedup_cells(ax, table, f"log2 best {device} / best cpu (blue: {device} faster)")
            wins = p.drop_duplicates("model").set_index("model").reindex(table.index)
            for i, r in enumerate(wins.to_dict("records")):
                if not np.isfinite(r.get("wins_from", np.nan)) and r.get("verdict") != "slower at every batch size":
                    continue
                col = lambda b: sizes.index(b) if b in sizes else len(sizes)  # noqa: E731  (inf: past the grid)
                if np.isfinite(r.get("wins_from_lo", np.nan)) or r.get("wins_from_lo") == np.inf:
                    lo, hi = col(r["wins_from_lo"]), col(r["wins_from_hi"])
                    (bar,) = ax.plot([lo, hi], [i + 0.5, i + 0.5], color="black", lw=2.5, solid_capstyle="butt")
                    bar.set_gid("interval")
                x = col(r["wins_from"])
                ax.plot([x, x], [i, i + 1], color="black", lw=2)[0].set_gid("crossover")
            label = f"best {device} over best cpu"
        else:
            modes = p.pivot_table(index="model", columns="batch_size", values="best_mode", aggfunc="first")
            modes = modes.reindex(index=table.index, columns=sizes)
            cells = [
                [f"{rate(v)}\n{k}" if np.isfinite(v) else "" for v, k in zip(*r)]
                for r in zip(table.values, modes.values)
            ]
            annot = pd.DataFrame(cells, index=table.index, columns=table.columns)
            sns.heatmap(np.log10(table), annot=annot, fmt="", cmap="viridis", ax=ax, linewidths=0.5,
                        cbar_kws={"label": "log10 samples/s of the cpu's best mode"})  # fmt: skip
            label = "no accelerator ran: the cpu's best mode, samples/s"
        flops = p.drop_duplicates("model").set_index("model")["flop_per_sample"].reindex(table.index)
        ax.set_yticks(np.arange(len(table)) + 0.5, [f"{k}\n{flop(v)}" for k, v in flops.items()], rotation=0)
        ax.set(xlabel="batch size", ylabel="network (FLOP per sample)")
        ax.set_title(label + (f" — {place}" if len(places) > 1 else ""))
    return titled(fig, title)


@draws
def cost(fits: pd.DataFrame, title: str = default("cost")) -> object:
    """Each mode's cost per sample (the fit's b) against the network's FLOP per training sample:
    where b stays flat, overhead per sample (Python, dispatch, memory traffic) sets it; where it
    grows with the FLOP, arithmetic has taken over. On the cpu, a dashed line at one core's
    arithmetic limit: no mode on one thread can go below it."""
    f = fits[fits["b_us"].notna() & fits["flop_per_sample"].notna()]
    if f.empty:
        return note_figure(title, "No fit of a + b·batch: nothing to draw (run two or more batch sizes).")
    if several(f):
        return titled(across.cost(f), title)
    places = machines.by_name(f["place"])
    fig, axes = grid(len(places), 2, size=(7.5, 5))
    for ax, place in zip(axes, places):
        h = f[f["place"] == place].sort_values("flop_per_sample")
        for (device, mode), g in h.groupby(["device", "mode"], sort=False):
            colour = MODE_COLOR.get(mode, "grey")
            label = f"{mode} ({device})" if h["device"].nunique() > 1 else mode
            (line,) = ax.plot(g["flop_per_sample"], g["b_us"], marker=traits(device).marker, color=colour, label=label)
            line.set_gid(f"{device}|{mode}")
            error_bars(ax, g["flop_per_sample"], g["b_us"], g["b_us_lo"], g["b_us_hi"], colour, 1)
        lim = h[(h["device"] == CPU) & h["limit_us"].notna()].drop_duplicates("model")
        if len(lim):
            ax.plot(lim["flop_per_sample"], lim["limit_us"], ls="--", color="black", lw=1,
                    label="arithmetic limit, one cpu core")[0].set_gid("limit")  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel="FLOP per training sample (network size)",
               ylabel="cost per sample b (µs, 95 % interval)")  # fmt: skip
        log_ticks(ax, "x")
        log_ticks(ax, "y")
        ax.set_title("Cost per sample against network size" + (f" — {place}" if len(places) > 1 else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return titled(fig, title)


@draws
def breakdown(prof: pd.DataFrame, title: str = default("breakdown")) -> object:
    """Stacked bars: where a profiled step's time goes, per mode (ladder order, top to bottom), at
    the smallest and the largest batch size; one row of panels per host x device x network."""
    ok = succeeded(prof).copy()
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to break down.")
    if several(ok):
        return titled(across.breakdown(ok), title)
    phases = [c for c in PHASES if c in ok.columns and ok[c].fillna(0).gt(0).any()]
    order = list(dict.fromkeys(ok.sort_values("step_us_plain")["model"]))  # smaller networks first
    rows = with_data(ok, ["host", "device", "model"], [(h, d, m) for h, d in place_panels(ok) for m in order])
    hosts, models = {h for (h, _, _), _ in rows}, {m for (_, _, m), _ in rows}
    sizes = sorted(set(ok["batch_size"]))
    modes = ladder_order(ok["mode"])
    fig, axes = grid(len(rows) * len(sizes), len(sizes), size=(6, 1.4 + 0.4 * len(modes)))
    for k, ((host, device, model), h) in enumerate(rows):
        for ax, b in zip(axes[k * len(sizes) :], sizes):
            p = h[h["batch_size"] == b].set_index("mode").reindex(modes).dropna(how="all", subset=phases)
            left = np.zeros(len(p))
            for c in phases:
                ax.barh(p.index, p[c].fillna(0), left=left, color=PHASE_COLOR[c], label=PHASES[c])
                left += p[c].fillna(0).to_numpy()
            ax.invert_yaxis()  # modes top to bottom in ladder order
            ax.set(xlabel="µs per step (profiled)", ylabel="mode")
            ax.set_title(panel_title(f"{device}, batch {b}", host, model, hosts, models))
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.grid(False, axis="y")
            ax.grid(True, axis="x", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    titled(fig, title)
    # The phase legend under the panels, where it cannot cover a bar or the title.
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), bbox_to_anchor=(0.5, 0.0), fontsize=8)
    return fig


@draws
def accuracy(
    epochs: pd.DataFrame, runs: pd.DataFrame, target=None, use=("ok",), title: str = default("accuracy")
) -> object:
    """Test accuracy after each epoch against cumulative training time (time to accuracy), the
    median over the repeats."""
    keys = ["place", "device", "model", "mode", "batch_size", "repeat"]
    runs, epochs = placed(runs), placed(epochs)
    ok = usable(runs, use)[keys]
    e = epochs.merge(ok, on=keys) if len(epochs) else epochs
    if e.empty:
        return note_figure(title, "No successful run with per-epoch records.")
    if several(e):  # machines pooled: the curve's shape is the mode's and the batch's, not the machine's
        e = e.assign(place=f"median over {e['place'].nunique()} machines")
    med = e.groupby(keys[:-1] + ["epoch"], as_index=False)[["cum_train_s", "test_accuracy"]].median()
    med["batch"] = med["batch_size"].map(lambda b: f"batch {b}")
    networks = by_size(runs[runs["model"].isin(set(med["model"]))])
    order = [(p, m, d) for p in machines.by_name(med["place"]) for m in networks for d in cpu_first(med["device"])]
    panels = with_data(med, ["place", "model", "device"], order)
    places, models, devices = ({key[i] for key, _ in panels} for i in range(3))
    fig, axes = grid(len(panels), 3, size=(5.5, 4))
    for ax, ((place, model, device), p) in zip(axes, panels):
        sns.lineplot(data=p, x="cum_train_s", y="test_accuracy", hue="mode", hue_order=ladder_order(med["mode"]), ax=ax,
                     palette=MODE_COLOR, style="batch", style_order=[f"batch {b}" for b in sorted(set(med["batch_size"]))],
                     markers=True)  # fmt: skip
        if target is not None:
            ax.axhline(target, ls="--", color="grey", lw=0.8, label=f"target {target}")
        ax.set(xscale="log", xlabel="training time (s, cumulative, log)", ylabel="test accuracy", ylim=(0, 1))
        ax.set_title(panel_title(device if len(devices) > 1 else "test accuracy", place, model, places, models))
        ax.grid(True, which="both", alpha=0.3)
        log_ticks(ax, "x")
        handles, labels = ax.get_legend_handles_labels()
        ax.legend().remove()
    # One legend for all panels, outside them, so it never hides a line.
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8)
    return titled(fig, title)


@draws
def bandwidth(transfer: pd.DataFrame, title: str = default("bandwidth")) -> object:
    """Copy bandwidth against transfer size, pinned and pageable; on the cpu, a host memcpy (the baseline)."""
    if transfer.empty:
        return note_figure(title, "No copy timings.")
    t = transfer.copy()
    t["target"] = t["device"].where(t["device"] != CPU, "cpu (host memcpy)")
    if t["host"].nunique() > MAX_LEGEND:  # machines pooled per device: a band, not a legend of hosts
        t = t.assign(target=t["target"] + f" ({t['host'].nunique()} machines)")
    elif t["host"].nunique() > 1:
        t["target"] = t["host"] + " · " + t["target"]
    colour = {tg: device_color(d) for tg, d in zip(t["target"], t["device"])}
    order = [tg for d in cpu_first(t["device"]) for tg in dict.fromkeys(t[t["device"] == d]["target"])]
    fig, ax = grid(1, 1, size=(7.5, 4.5))
    ax = ax[0]
    sns.lineplot(data=t, x="bytes", y="gb_per_s", hue="target", hue_order=order, palette=colour, style="memory", ax=ax,
                 style_order=[m for m in ("pageable", "pinned") if m in set(t["memory"])], markers=True)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="bytes per copy", ylabel="GB / s (median of 7 copies)")
    log_ticks(ax, "x")
    log_ticks(ax, "y")
    ax.set_title("Host → device copy bandwidth")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return titled(fig, title)


@draws
def ops(prof: pd.DataFrame, title: str = default("ops")) -> object:
    """Torch ops dispatched per training step (in the step + fetching the batch), per mode; a second
    row with kernel launches when an accelerator that launches kernels was profiled."""
    ok = succeeded(prof).copy()
    if ok.empty:
        return note_figure(title, "No profile succeeded: nothing to count.")
    if several(ok):  # ops per step are the code's, not the machine's: the median over machines
        num = [c for c in ("ops_step", "ops_batch", "launches") if c in ok.columns]
        ok = ok.groupby(["device", "model", "mode", "batch_size"], as_index=False)[num].median()
        ok = ok.assign(host=f"{prof['host'].nunique()} machines")
    ok["target"] = ok["device"] if ok["host"].nunique() == 1 else ok["host"] + " · " + ok["device"]
    if ok["model"].nunique() > 1:
        ok["target"] = ok["target"] + " · " + ok["model"]
    ok["torch ops per step"] = ok["ops_step"] + ok["ops_batch"]
    measures = ["torch ops per step"]
    if "launches" in ok.columns and ok["launches"].notna().any():
        ok["kernel launches per step"] = ok["launches"]
        measures.append("kernel launches per step")
    sizes, modes = sorted(set(ok["batch_size"])), ladder_order(ok["mode"])
    targets = [tg for d in cpu_first(ok["device"]) for tg in dict.fromkeys(ok[ok["device"] == d]["target"])]
    colour = {tg: device_color(d) for tg, d in zip(ok["target"], ok["device"])}
    width = 1.0 + 0.7 * len(modes) * max(1, len(targets) / 2)
    fig, axes = grid(len(measures) * len(sizes), len(sizes), size=(width, 3.8))
    for k, measure in enumerate(measures):
        present = [t for t in targets if ok.loc[ok["target"] == t, measure].notna().any()]  # no empty slots
        for ax, b in zip(axes[k * len(sizes) :], sizes):
            p = ok[(ok["batch_size"] == b) & ok[measure].notna()]
            # saturation 1: the palette's colours, not seaborn's muted ones; one profiled value per bar
            sns.barplot(data=p, x="mode", y=measure, hue="target", order=modes, hue_order=present, palette=colour,
                        saturation=1, errorbar=None, ax=ax)  # fmt: skip
            for c in ax.containers:
                ax.bar_label(c, fmt="%.0f", fontsize=7)
            ax.set(xlabel="mode", ylabel=measure, title=f"batch {b}")
            ax.tick_params(axis="x", rotation=30)
            if b == sizes[-1]:  # one legend per row, right of the panels, never over a bar
                ax.legend(title=None, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            else:
                ax.legend().remove()
    return titled(fig, title)


@draws
def many(m: pd.DataFrame, title: str = default("many")) -> object:
    """Model-samples/s of K copies trained at once against K, with 95 % intervals: a line that rises
    with K's factor costs nothing per extra copy."""
    if m.empty:
        return note_figure(title, "No run trained more than one model at once (models_at_once: [1]).")
    models = by_size(m)
    rows = list(dict.fromkeys(zip(m["place"], m["device"])))
    rows.sort(key=lambda pd_: (machines.natural(pd_[0]), pd_[1] != CPU))
    styles = dict(zip(sorted(set(m["batch_size"])), ["-", "--", ":", "-."] * 8))
    fig, axes = grid(len(rows) * len(models), len(models), size=(5.5, 4))
    for ax, ((place, device), model) in zip(axes, [(r, n) for r in rows for n in models]):
        h = m[(m["place"] == place) & (m["device"] == device) & (m["model"] == model)]
        for (mode, b), g in h.sort_values("models_at_once").groupby(["mode", "batch_size"], sort=False):
            colour = MODE_COLOR.get(mode, "grey")
            ax.plot(g["models_at_once"], g["model_samples_per_s"], ls=styles[b], marker=MODE_MARKER.get(mode, "o"),
                    color=colour, label=f"{mode}, batch {b}")[0].set_gid(f"{device}|{mode}|{b}")  # fmt: skip
            y, lo, hi = (g[f"model_samples_per_s{end}"] for end in ("", "_lo", "_hi"))
            error_bars(ax, g["models_at_once"], y, lo, hi, colour, 1)
        ax.set(xscale="log", yscale="log", xlabel="models at once (K)", ylabel="model-samples/s (95 % interval)")
        log_ticks(ax, "x", ticks=m["models_at_once"])
        log_ticks(ax, "y")
        ax.set_title(f"{model}, {device}" + (f" — {place}" if len(set(m["place"])) > 1 else ""), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if len(h):
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return titled(fig, title)


# --- the rule -----------------------------------------------------------------------------------


def render(inp, out, dpi=110, style="whitegrid", target=None, use=("ok",), log=print) -> None:
    """Draw every figure of the registry that `out` names, each titled by the first fact of its page
    (words.title, from results/summary/facts.json)."""
    sns.set_theme(style=style)
    found = json.loads(open(inp["facts"]).read()) if "facts" in inp.keys() else {}
    tables = {}
    options = {"target": target, "use": tuple(use)}
    for name, f in FIGURES.items():
        if name not in out.keys():
            continue
        for i in f.inputs:
            if i not in tables:
                t = pd.read_csv(inp[i])
                if i in ("runs", "epochs"):  # as the analysis compares them: by place, one model at a time
                    t = one_at_a_time(machines.places(t))
                tables[i] = t
        options["title"] = words.title(found, name)
        fig = DRAW[name](*(tables[i] for i in f.inputs), **{o: options[o] for o in (*f.options, "title")})
        save(fig, out[name], dpi=dpi)
        log(f"wrote {out[name]}")


_undrawn = [name for name in FIGURES if name not in DRAW]
if _undrawn:
    raise ImportError(f"figures of catalog.py with no function in figures.py: {', '.join(_undrawn)}")
