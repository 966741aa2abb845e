"""The figures with several machines (places) of one run: instead of a panel per machine, machines
on an axis, sorted by speed, at most MAX_SHOWN of them (the fastest and the slowest half), so that
every figure stays a readable size however many machines merge in. figures.py calls these where
its data holds more than one place; they return the figure without its title (figures.py adds it).
"""

import numpy as np
import pandas as pd
import seaborn as sns

from mnistbench.config.devices import CPU, cpu_first
from mnistbench.measure import machines
from mnistbench.report.look import (
    MAX_SHOWN,
    MODE_COLOR,
    MODE_MARKER,
    PHASE_COLOR,
    PHASES,
    ROW_IN,
    grid,
    ladder_order,
    log_ticks,
    speedup_cells,
    where_column,
)
from mnistbench.report.numbers import bs, rate, times


def fastest_first(value: pd.Series) -> tuple[list, str]:
    """Places fastest first (value: {place: a speed, larger is faster}; ties in natural order),
    cut to MAX_SHOWN (the fastest and the slowest half), and a note saying so where cut."""
    v = value.dropna()
    order = sorted(v.index, key=lambda p: (-v[p], machines.natural(p)))
    order += machines.by_name(set(value.index) - set(order))  # no value: last
    if len(order) <= MAX_SHOWN:
        return order, ""
    half = MAX_SHOWN // 2
    return order[:half] + order[-half:], f" (the fastest and the slowest {half} of {len(order)} machines)"


def rows_height(df, col: str = "place") -> float:
    """A panel's height for a row per machine of df (at most MAX_SHOWN)."""
    return 1.4 + ROW_IN * min(MAX_SHOWN, df[col].nunique())


def place_label(df, place) -> str:
    """A place on a machine axis; a reference machine's marked."""
    col = where_column(df)
    ref = df.loc[df[col] == place, "reference"].astype(object).fillna("").astype(str) if "reference" in df else []
    return (
        f"{place} (reference)" if len(ref) and (ref != "").any() and not str(place).startswith("reference") else place
    )


def panels(df) -> list:
    """(device, network) pairs: the cpu first, the networks in the table's order."""
    return [(d, m) for d in cpu_first(df["device"]) for m in dict.fromkeys(df[df["device"] == d]["model"])]


def named(title: str, model, models) -> str:
    return title + (f", {model}" if len(models) > 1 else "")


def dots(ax, p: pd.DataFrame, value: str, larger_is_faster: bool = True) -> str:
    """One panel comparing machines: a row per place (fastest at the top), a marker per mode at its
    `value` with its 95 % interval (`value`_lo/_hi); returns fastest_first's note of those left out."""
    col = where_column(p)
    per = p.groupby(col)[value].max() if larger_is_faster else -p.groupby(col)[value].min()
    order, note = fastest_first(per)
    y = {h: i for i, h in enumerate(order)}
    for mode in ladder_order(p["mode"]):
        g = p[(p["mode"] == mode) & p[col].isin(order) & p[value].notna()]
        if g.empty:
            continue
        ys, c = g[col].map(y).to_numpy(), MODE_COLOR[mode]
        points = ax.scatter(g[value], ys, color=c, marker=MODE_MARKER[mode], s=22, label=mode, zorder=3)
        points.set_gid(f"machines|{mode}")
        lo, hi = f"{value}_lo", f"{value}_hi"
        if {lo, hi} <= set(g.columns) and g[lo].notna().any():
            have = (g[lo].notna() & g[hi].notna()).to_numpy()
            ax.hlines(ys[have], g[lo][have], g[hi][have], color=c, lw=1, alpha=0.6).set_gid("interval")
    ax.set_yticks(range(len(order)), [place_label(p, h) for h in order], fontsize=8)
    ax.set_ylim(len(order) - 0.5, -0.5)  # the fastest at the top
    ax.set_xscale("log")
    log_ticks(ax, "x")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.grid(True, axis="y", alpha=0.15)
    return note


def ladder(lad: pd.DataFrame):
    """The ladder across machines: a row per machine (fastest at the top), a marker per mode."""
    points = [p for p in ("smallest", "largest") if p in set(lad["point"])]
    rows = panels(lad)
    fig, axes = grid(len(rows) * len(points), len(points), size=(6.5 + 1.5 / len(points), rows_height(lad)))
    models = {m for _, m in rows}
    for k, (device, model) in enumerate(rows):
        for ax, point in zip(axes[k * len(points) :], points):
            p = lad[(lad["device"] == device) & (lad["model"] == model) & (lad["point"] == point)]
            note = dots(ax, p, "samples_per_s")
            b = p["batch_size"].iloc[0] if len(p) else ""
            ax.set(xlabel="samples / s (median, 95 % interval)", ylabel="machine (fastest first)")
            ax.set_title(named(f"batch {b}, {device}", model, models) + note, fontsize=10)
    handles, labels = axes[len(points) - 1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8, title="mode")
    return fig


def throughput(med: pd.DataFrame):
    """samples/s against batch size across machines: each machine's best mode a thin grey line, the
    fastest and the slowest at the largest batch size in colour and named."""
    best = med.groupby(["place", "device", "model", "batch_size"])["samples_per_s"].max().reset_index()
    rows = panels(best)
    models = {m for _, m in rows}
    fig, axes = grid(len(rows), 2, size=(8, 5))
    for ax, (device, model) in zip(axes, rows):
        g = best[(best["device"] == device) & (best["model"] == model)]
        order, _ = fastest_first(g[g["batch_size"] == g["batch_size"].max()].set_index("place")["samples_per_s"])
        ends = {order[0]: ("fastest", "tab:blue"), order[-1]: ("slowest", "tab:red")} if len(order) > 1 else {}
        for place, h in g.groupby("place"):
            h = h.sort_values("batch_size")
            label, c = ends.get(place, (None, "grey"))
            (line,) = ax.plot(h["batch_size"], h["samples_per_s"], color=c, lw=2 if label else 0.7, alpha=1 if label else 0.4,
                              marker="o" if label else None, label=f"{label}: {place}" if label else None,
                              zorder=3 if label else 2)  # fmt: skip
            line.set_gid(f"machine|{place}")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s (best mode, median)")
        log_ticks(ax, "x", ticks=g["batch_size"])
        log_ticks(ax, "y")
        ax.set_title(named(f"best mode on each of {g['place'].nunique()} machines, {device}", model, models))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    return fig


def speedup(data: pd.DataFrame, what: str):
    """The speedup across machines: a row per machine (fastest at the top), each cell the best mode's."""
    rows = panels(data)
    models = {m for _, m in rows}
    fig, axes = grid(len(rows), 2, size=(2.5 + 1.1 * data["batch_size"].nunique(), rows_height(data)))
    for ax, (device, model) in zip(axes, rows):
        p = data[(data["device"] == device) & (data["model"] == model)]
        table = p.pivot_table(index="place", columns="batch_size", values="speedup", aggfunc="max")
        order, note = fastest_first(table[table.columns[-1]])
        scale = "log2 speedup of the best mode (blue: faster)"
        speedup_cells(ax, table.reindex(order), scale, annot_kws={"fontsize": 7})
        ax.set_yticks(np.arange(len(order)) + 0.5, [place_label(p, h) for h in order], rotation=0, fontsize=8)
        label = f"{device} {what}" if what else f"best mode over {p['baseline_mode'].iloc[0]}, {device}"
        ax.set_title(named(label, model, models) + note, fontsize=10)
        ax.set(xlabel="batch size", ylabel="machine (fastest first)")
    return fig


def map_(m: pd.DataFrame):
    """The map across machines at the largest batch size: a row per machine (fastest at the top), each
    cell the best accelerator mode over the best cpu mode and the batch size from which it wins (where
    no accelerator ran, the cpu's best samples/s)."""
    accelerators = [d for d in cpu_first(m["device"]) if d != CPU]
    order_net = list(dict.fromkeys(m.sort_values(["flop_per_sample", "model"])["model"]))
    fig, axes = grid(len(accelerators or [CPU]), 2, size=(3.5 + 1.6 * len(order_net), rows_height(m)))
    for ax, device in zip(axes, accelerators or [CPU]):
        p = m[m["device"] == device]
        p = p[p["batch_size"] == p["batch_size"].max()]
        value = "over_cpu_best" if device != CPU else "samples_per_s"
        table = p.pivot_table(index="place", columns="model", values=value, aggfunc="first")
        table = table.reindex(columns=[o for o in order_net if o in table.columns])
        order, note = fastest_first(table[table.columns[0]])
        table = table.reindex(order)
        if device != CPU:
            wins = p.pivot_table(index="place", columns="model", values="wins_from", aggfunc="first")
            wins = wins.reindex(index=order, columns=table.columns)
            cells = [
                [f"{times(v)}\nfrom {bs(w)}" if np.isfinite(v) else "" for v, w in zip(*r)]
                for r in zip(table.values, wins.values)
            ]
            data, cmap, bar = np.log2(table), "RdBu", f"log2 best {device} / best cpu (blue: {device} faster)"
        else:
            cells = table.map(lambda v: "" if not np.isfinite(v) else rate(v)).values
            data, cmap, bar = np.log10(table), "viridis", "log10 samples/s of the cpu's best mode"
        annot = pd.DataFrame(cells, index=table.index, columns=table.columns)
        sns.heatmap(data, annot=annot, fmt="", cmap=cmap, center=0 if device != CPU else None, ax=ax, linewidths=0.5,
                    cbar_kws={"label": bar}, annot_kws={"fontsize": 7})  # fmt: skip
        ax.set_yticks(np.arange(len(order)) + 0.5, [place_label(p, h) for h in order], rotation=0, fontsize=8)
        what = f"best {device} over best cpu" if device != CPU else "no accelerator ran: the cpu's best mode, samples/s"
        ax.set_title(f"{what}, batch {bs(p['batch_size'].max()) if len(p) else ''}{note}", fontsize=10)
        ax.set(xlabel="network", ylabel="machine (fastest first)")
    return fig


def cost(f: pd.DataFrame):
    """Cost per sample across machines: a row per machine (cheapest at the top), every mode's b, and
    the arithmetic limit of one core of each machine's cpu as a black bar."""
    rows = panels(f)
    fig, axes = grid(len(rows), 2, size=(8, rows_height(f)))
    for ax, (device, model) in zip(axes, rows):
        p = f[(f["device"] == device) & (f["model"] == model)]
        note = dots(ax, p, "b_us", larger_is_faster=False)
        if device == CPU and p["limit_us"].notna().any():
            at = {t.get_text(): i for i, t in enumerate(ax.get_yticklabels())}
            lim = p.drop_duplicates("place")
            names = {h: place_label(p, h) for h in lim["place"]}
            lim = lim[lim["place"].map(names).isin(at) & lim["limit_us"].notna()]
            ys = [at[names[h]] for h in lim["place"]]
            label = "arithmetic limit, one cpu core"
            ax.scatter(lim["limit_us"], ys, marker="|", color="black", s=80, label=label).set_gid("limit")
        ax.set(xlabel="cost per sample b (µs, 95 % interval)", ylabel="machine (cheapest first)")
        ax.set_title(f"cost per sample, {device}, {model}{note}", fontsize=10)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return fig


def breakdown(ok: pd.DataFrame):
    """Where a step's time goes across machines, in one mode (module where it was profiled)."""
    mode = "module" if "module" in set(ok["mode"]) else ladder_order(ok["mode"])[0]
    ok = ok[ok["mode"] == mode]
    phases = [c for c in PHASES if c in ok.columns and ok[c].fillna(0).gt(0).any()]
    sizes = sorted(set(ok["batch_size"]))
    rows = [(d, m, b) for d, m in panels(ok) for b in sizes]
    fig, axes = grid(len(rows), len(sizes), size=(6, rows_height(ok, "host")))
    for ax, (device, model, b) in zip(axes, rows):
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
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), bbox_to_anchor=(0.5, 0.0), fontsize=8)
    return fig
