"""Each figure is checked for what it shows (panels, axis labels, legend entries, lines, cells, bars),
with an accelerator in the data, with only a cpu, with several hosts, and with nothing to plot."""

import math
import re

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from mnistbench.config import catalog
from mnistbench.config.catalog import MODES as LADDER
from mnistbench.report import facts, figures, look, machine_figures, many, numbers, summary, words
from mnistbench.report import tables as tbl
from PIL import Image
from test_analysis import GRID, analyse, synthetic_runs, transfer_table
from test_many import many_runs

MODES = ["manual", "module", "dataloader"]


def in_ladder_order(modes) -> list:
    """Categories of every figure (axes, legends) come in the ladder's order, the registry's."""
    return [m for m in LADDER if m in modes]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def runs_for(devices=("cpu", "cuda"), hosts=("h1",)) -> pd.DataFrame:
    truth = {}
    for d in devices:
        for i, m in enumerate(MODES):
            truth[(d, m)] = (300.0 + 20 * i, 0.1) if d == "cuda" else (40.0 + 20 * i, 1.0)
    return pd.concat([synthetic_runs(truth, host=h, seed=k) for k, h in enumerate(hosts)], ignore_index=True)


def epochs_for(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in runs.iterrows():
        for e in (1, 2):
            rows.append(
                dict(
                    host=r.host,
                    machine=r.machine,
                    device=r.device,
                    model=r.model,
                    mode=r["mode"],
                    batch_size=r.batch_size,
                    repeat=r["repeat"],
                    epoch=e,
                    cum_train_s=e * r.step_time_median_s * 100,
                    test_accuracy=0.4 * e,
                )
            )
    return pd.DataFrame(rows)


def profile_for(devices=("cpu", "cuda"), sizes=(1, 4096)) -> pd.DataFrame:
    rows = []
    for d in devices:
        for m in MODES + ["seed", "numpy"]:
            if d == "cuda" and m == "numpy":
                continue
            for b in sizes:
                row = dict(
                    host="h1",
                    device=d,
                    model="mlp-16-16",
                    mode=m,
                    batch_size=b,
                    status="ok",
                    step_us_plain=100.0,
                    step_us_profiled=150.0,
                    transfer_us=5.0,
                    forward_us=0.0,
                    backward_us=0.0,
                    fwd_bwd_us=0.0,
                    optimizer_us=0.0,
                    whole_us=0.0,
                    wait_us=20.0 if d == "cuda" else 0.0,
                    ops_step=40.0,
                    ops_batch=3.0,
                    aten_calls=120.0,
                    launches=30.0 if d == "cuda" else math.nan,
                    kernels=30.0 if d == "cuda" else math.nan,
                )
                if m in ("module", "dataloader"):
                    row.update(forward_us=40.0, backward_us=50.0, optimizer_us=20.0)
                elif m in ("manual", "numpy"):
                    row.update(fwd_bwd_us=60.0, optimizer_us=10.0)
                else:
                    row.update(whole_us=120.0)
                if m == "dataloader":
                    row.update(transfer_us=30.0 + b, ops_batch=2.0 * b + 3)
                if m == "numpy":
                    row.update(ops_step=0.0, ops_batch=0.0)
                rows.append(row)
    return pd.DataFrame(rows)


def legend_texts(fig) -> set:
    texts = set()
    for ax in fig.axes:
        if ax.get_legend():
            texts |= {t.get_text() for t in ax.get_legend().get_texts()}
    for leg in fig.legends:
        texts |= {t.get_text() for t in leg.get_texts()}
    return texts


def is_note(fig) -> bool:
    return len(fig.axes) == 1 and not fig.axes[0].axison and fig.axes[0].texts


# 1 throughput ------------------------------------------------------------------------------------


@pytest.mark.parametrize("devices", [("cpu", "cuda"), ("cpu",)])
def test_throughput_lines_fits_and_legend(devices):
    runs = runs_for(devices)
    fig = figures.throughput(runs, tbl.fits(runs))
    (ax,) = fig.axes
    assert ax.get_xlabel() == "batch size" and ax.get_ylabel().startswith("samples / s")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    fits = [line for line in ax.lines if line.get_gid() == "fit"]
    assert len(fits) == len(devices) * len(MODES)
    measured = [line for line in ax.lines if line.get_gid() != "fit" and len(line.get_xdata()) == len(GRID)]
    assert len(measured) == len(devices) * len(MODES)
    assert set(MODES) | {"fit: B / (a + b·B)"} <= legend_texts(fig)
    if len(devices) > 1:
        assert set(devices) <= legend_texts(fig)
    else:  # one device: colour goes to the mode, the device to the title
        assert ax.get_title() == "Training throughput by mode on cpu"
        assert len({line.get_color() for line in fits}) == len(MODES)
    assert [int(t) for t in ax.get_xticks()] == GRID


def test_throughput_compares_hosts_in_one_panel_per_device():
    """Several machines: one panel per device, each machine's best mode a line in it, the fastest
    and the slowest at the largest batch named (not a panel per machine)."""
    runs = runs_for(hosts=("h1", "h2", "h10"))
    h10 = runs["host"] == "h10"  # h10 the fastest, h2 or h1 the slowest
    runs.loc[h10, "samples_per_s"] *= 2
    runs.loc[h10, "step_time_median_s"] /= 2
    fig = figures.throughput(runs, tbl.fits(runs))
    assert [ax.get_title() for ax in fig.axes] == [f"best mode on each of 3 machines, {d}" for d in ("cpu", "cuda")]
    for ax in fig.axes:
        assert sorted(line.get_gid() for line in ax.lines) == ["machine|h1", "machine|h10", "machine|h2"]
        assert legend_texts(fig) >= {"fastest: h10"}


# 2 speedup ---------------------------------------------------------------------------------------


def heat_cells(ax) -> int:
    return ax.collections[0].get_array().size


def test_speedup_heatmap_accelerator_over_cpu():
    fig = figures.speedup(tbl.speedup(runs_for()))
    heat = [ax for ax in fig.axes if ax.get_title()]
    assert len(heat) == 1 and heat[0].get_title() == "cuda over cpu, same mode"
    ax = heat[0]
    assert heat_cells(ax) == len(MODES) * len(GRID)
    assert ax.get_xlabel() == "batch size" and ax.get_ylabel() == "mode"
    assert [t.get_text() for t in ax.get_yticklabels()] == in_ladder_order(MODES)
    annotations = [t.get_text() for t in ax.texts]
    assert len(annotations) == len(MODES) * len(GRID) and all(a.endswith("×") for a in annotations)


def test_speedup_heatmap_cpu_only_shows_the_mode_ladder():
    fig = figures.speedup(tbl.speedup(runs_for(("cpu",))))
    (ax,) = [ax for ax in fig.axes if ax.get_title()]
    assert ax.get_title() == "each mode over module, cpu"
    assert heat_cells(ax) == len(MODES) * len(GRID)


# 3 breakdown -------------------------------------------------------------------------------------


@pytest.mark.parametrize("devices", [("cpu", "cuda"), ("cpu",)])
def test_breakdown_panels_bars_and_phases(devices):
    prof = profile_for(devices)
    fig = figures.breakdown(prof)
    assert len(fig.axes) == 2 * len(devices)  # small and large batch per device, no empty panel
    ax = fig.axes[0]
    assert ax.get_xlabel() == "µs per step (profiled)" and ax.get_title() == "cpu, batch 1"
    labels = legend_texts(fig)
    assert {
        "transfer (next batch)",
        "forward",
        "backward",
        "optimizer",
        "forward+backward (hand-written)",
        "whole step (not separable)",
    } <= labels
    assert ("device wait" in labels) == ("cuda" in devices)  # nothing to wait for on a cpu
    n_modes = len(MODES) + 2
    assert len(ax.patches) == n_modes * len(labels)  # one segment per mode and phase shown
    assert [t.get_text() for t in ax.get_yticklabels()] == in_ladder_order(MODES + ["seed", "numpy"])


# 4 accuracy --------------------------------------------------------------------------------------


def test_accuracy_panels_lines_and_target():
    runs = runs_for()
    runs = runs[runs.batch_size.isin([16, 256])]
    fig = figures.accuracy(epochs_for(runs), runs, target=0.9)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["cpu", "cuda"]  # a panel per device (one network, one host)
    ax = axes[0]
    assert ax.get_xlabel().startswith("training time") and ax.get_ylabel() == "test accuracy"
    curves = [line for line in ax.lines if len(line.get_xdata()) == 2 and list(line.get_ydata()) != [0.9, 0.9]]
    assert len(curves) == len(MODES) * 2  # batch size x mode, one point per epoch
    assert any(line.get_linestyle() == "--" and list(line.get_ydata()) == [0.9, 0.9] for line in ax.lines)
    assert set(MODES) | {"batch 16", "batch 256", "target 0.9"} <= legend_texts(fig)


def test_accuracy_one_panel_per_network():
    runs = pd.concat([runs_for(("cpu",)), synthetic_runs({("cpu", "module", "mlp-300"): (50.0, 2.0)})])
    runs = runs[runs.batch_size == 16]
    fig = figures.accuracy(epochs_for(runs), runs, target=0.9)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["test accuracy — mlp-16-16", "test accuracy — mlp-300"]  # the smaller network first


def test_accuracy_ignores_failed_runs():
    runs = runs_for(("cpu",))
    runs = runs[runs.batch_size == 16].copy()
    epochs = epochs_for(runs)
    runs.loc[runs["mode"] == "manual", "status"] = "diverged"
    fig = figures.accuracy(epochs, runs, target=0.9)
    assert "manual" not in legend_texts(fig)


# 5 bandwidth -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cuda", [True, False])
def test_bandwidth_lines_and_legend(cuda):
    fig = figures.bandwidth(transfer_table(cuda=cuda))
    (ax,) = fig.axes
    assert ax.get_xlabel() == "bytes per copy" and ax.get_ylabel().startswith("GB / s")
    data_lines = [line for line in ax.lines if len(line.get_xdata()) == 4]
    assert len(data_lines) == (3 if cuda else 1)
    texts = legend_texts(fig)
    assert "cpu (host memcpy)" in texts and ("pinned" in texts) == cuda and ("cuda" in texts) == cuda


# 6 ops -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("devices", [("cpu", "cuda"), ("cpu",)])
def test_ops_bars_per_mode(devices):
    fig = figures.ops(profile_for(devices))
    axes = [ax for ax in fig.axes if ax.get_title()]
    rows = 2 if "cuda" in devices else 1  # kernel launches only where something launches kernels
    assert len(axes) == 2 * rows
    assert [ax.get_ylabel() for ax in axes][::2] == ["torch ops per step", "kernel launches per step"][:rows]
    ax = axes[1]  # the large batch: the DataLoader's per-sample indexing shows
    modes = [t.get_text() for t in ax.get_xticklabels()]
    assert modes == in_ladder_order(MODES + ["seed", "numpy"])
    heights = {}
    for container, label in zip(ax.containers, [t.get_text() for t in ax.get_legend().get_texts()]):
        for mode, bar in zip(modes, container):
            heights[(label, mode)] = bar.get_height()
    assert heights[("cpu", "dataloader")] == 40 + 2 * 4096 + 3 and heights[("cpu", "numpy")] == 0
    assert set(devices) <= legend_texts(fig)


# nothing to plot -----------------------------------------------------------------------------------


def test_every_figure_says_so_when_there_is_nothing_to_plot():
    runs = runs_for(("cpu",))
    runs["status"] = "oom"
    empty_prof = pd.DataFrame(columns=profile_for().columns)
    spd = tbl.speedup(runs)
    for fig in (
        figures.throughput(runs, tbl.fits(runs)),
        figures.speedup(spd),
        figures.breakdown(empty_prof),
        figures.ops(empty_prof),
        figures.accuracy(epochs_for(runs), runs, 0.9),
        figures.bandwidth(transfer_table().iloc[0:0]),
    ):
        assert is_note(fig), [ax.get_title() for ax in fig.axes]


def render_all(tables: dict, tmp_path, monkeypatch, **kw) -> tuple[dict, dict]:
    """render() on `tables` written as its csv inputs: each figure as render() drew it (then saved
    as render() saves it), by name, and the paths of the PNGs."""
    inp = {}
    for name in catalog.inputs():
        inp[name] = tmp_path / f"{name}.csv"
        tables[name].to_csv(inp[name], index=False)
    out = {name: tmp_path / f"{name}.png" for name in catalog.FIGURES}
    drawn, save = {}, look.save

    def keep(fig, path, dpi):
        drawn[path.stem] = fig
        return save(fig, path, dpi=dpi)

    monkeypatch.setattr(figures, "save", keep)
    figures.render(inp, out, target=0.9, log=lambda m: None, **kw)
    monkeypatch.setattr(figures, "save", save)
    return drawn, out


def test_render_draws_every_registered_figure_with_its_data(tmp_path, monkeypatch):
    """render() on summary tables of every input the registry names: each figure of FIGURES is
    drawn with data (axes with labels and lines, bars or cells, not a note) and written as a PNG
    with something on it, with no temporary file left."""
    runs = runs_for()
    tables = {
        "runs": runs,
        "epochs": epochs_for(runs[runs.batch_size == 16]),
        "transfer": transfer_table(),
        "fits": tbl.fits(runs),
        "speedup": tbl.speedup(runs),
        "profile": profile_for(),
        "ladder": tbl.ladder(ladder_runs()),
        "map": tbl.network_map(runs),
        "many": many.table(many_runs()),
    }
    assert set(catalog.inputs()) <= set(tables), "a figure reads a table this test does not build"
    drawn, out = render_all(tables, tmp_path, monkeypatch, dpi=40)
    assert list(drawn) == list(catalog.FIGURES)  # each once, in the registry's order
    for name, fig in drawn.items():
        assert not is_note(fig), f"{name} found nothing to plot"
        panels = [ax for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]
        assert panels, f"{name} has no labelled axes"
        for ax in panels:
            artists = len(ax.lines) + len(ax.patches) + len(ax.collections)
            assert artists > 0, f"{name}: an empty panel {ax.get_title()!r}"
        image = plt.imread(out[name])
        assert image.shape[0] > 50 and image.shape[1] > 50 and image[..., :3].std() > 0.05, name
    assert not list(tmp_path.glob("*.tmp*"))


# 0 the ladder ------------------------------------------------------------------------------------


def ladder_runs(devices=("cpu", "cuda")) -> pd.DataFrame:
    """Modes with known lines: the beginner's code slow, every later mode faster; on cuda a large
    fixed cost per step and a tiny cost per sample."""
    truth = {}
    modes = ["seed", "manual", "module", "kernel", "cudagraph"]
    for d in devices:
        for i, m in enumerate(modes):
            if (d == "cpu" and m == "cudagraph") or (d == "cuda" and m == "kernel"):
                continue
            truth[(d, m)] = (1000.0 / (i + 1), 2.0 / (i + 1)) if d == "cpu" else (3000.0 / (i + 1), 0.05)
    return synthetic_runs(truth)


@pytest.mark.parametrize("devices", [("cpu", "cuda"), ("cpu",)])
def test_ladder_bars_order_labels_and_title(devices):
    runs = ladder_runs(devices)
    tables, found = analyse(runs)
    lad = tables["ladder"]
    fig = figures.ladder(lad, title=words.title(found, "ladder"))
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["batch 1", "batch 4096"]  # smallest and largest batch
    for ax, point in zip(axes, ("smallest", "largest")):
        modes = [t.get_text() for t in ax.get_xticklabels()]
        assert modes == in_ladder_order(set(lad["mode"]))  # the ladder's order, left to right
        bars = [b for b in ax.patches if b.get_gid()]
        want = lad[lad.point == point]
        assert len(bars) == len(want)  # one bar per device x mode that ran
        for bar in bars:
            device, mode = bar.get_gid().split("|")
            rate = want[(want.device == device) & (want["mode"] == mode)].samples_per_s.iloc[0]
            assert bar.get_height() == pytest.approx(rate)
            centre = bar.get_x() + bar.get_width() / 2
            assert abs(centre - modes.index(mode)) < 0.5  # standing over its mode's tick
        factors = [t.get_text() for t in ax.texts]
        assert "1×" in factors and len(factors) == len(bars)  # seed's own bar says 1×, every bar a factor
        seed_cpu = want[(want.device == "cpu") & (want["mode"] == "seed")].samples_per_s.iloc[0]
        kernel = want[(want.device == "cpu") & (want["mode"] == "kernel")].samples_per_s.iloc[0]
        assert numbers.times(kernel / seed_cpu) in factors
        assert ax.get_yscale() == "log"
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert ticks and all(re.fullmatch(r"[0-9.]+[kMG]?", t) for t in ticks), ticks  # 1k, 10k, 1M
    # The title is the headline's first fact: the beginner's code and the best mode at batch 1.
    title = " ".join(fig._suptitle.get_text().split())
    assert title == words.say(found["headline"][0][0]) and title.startswith("On h1, cpu, mlp-16-16: the beginner's")
    assert not any(line.get_gid() == "limit" for ax in axes for line in ax.lines)  # no limit measured
    if "cuda" in devices:
        assert {"cpu", "cuda"} <= legend_texts(fig)


def test_ladder_draws_the_dense_limit_a_sparse_mode_can_pass():
    runs = ladder_runs(("cpu",))
    lad = tbl.ladder(runs, gflops={"h1": 52_672 / 410})  # 0.41 µs per sample: 2.4 M samples/s
    fig = figures.ladder(lad)
    for ax in [ax for ax in fig.axes if ax.get_title()]:
        (line,) = [line for line in ax.lines if line.get_gid() == "limit"]
        assert line.get_ydata()[0] == pytest.approx(1e6 / 0.41)
    assert "dense arithmetic limit, one cpu core" in legend_texts(fig)


def colours_of(fig) -> list:
    """Every colour a figure gave a line, marker, bar or band (not text, grid or background)."""
    out = []
    for ax in fig.axes:
        for line in ax.lines:
            if line.get_gid() == "fit" or len(line.get_xdata()) == 0:
                continue
            if list(line.get_ydata()) == [0.9, 0.9]:  # the target line
                continue
            out.append(mcolors.to_rgb(line.get_color()))
        for patch in ax.patches:
            if patch.get_width() > 0 and patch.get_height() > 0 and patch.get_facecolor()[3] > 0:
                out.append(mcolors.to_rgb(patch.get_facecolor()))
    return out


def test_every_figure_uses_the_shared_palette():
    """One colour per mode and one per device, defined once: whatever a figure colours a line,
    marker or bar with comes from figures' palette (heatmaps use a colour scale instead)."""
    palette = [tuple(round(c, 3) for c in mcolors.to_rgb(p)) for p in look.palette_colors()]
    runs = runs_for()
    lad_runs = ladder_runs()
    drawn = {
        "ladder": figures.ladder(tbl.ladder(lad_runs)),
        "ladder cpu": figures.ladder(tbl.ladder(ladder_runs(("cpu",)))),
        "throughput": figures.throughput(runs, tbl.fits(runs)),
        "throughput cpu": figures.throughput(runs_for(("cpu",)), tbl.fits(runs_for(("cpu",)))),
        "accuracy": figures.accuracy(epochs_for(runs[runs.batch_size == 16]), runs, 0.9),
        "bandwidth": figures.bandwidth(transfer_table()),
        "ops": figures.ops(profile_for()),
        "breakdown": figures.breakdown(profile_for()),
    }
    for name, fig in drawn.items():
        used = colours_of(fig)
        assert used, name
        stray = {tuple(round(c, 3) for c in u) for u in used} - set(palette)
        assert not stray, f"{name} uses colours outside the shared palette: {stray}"
    # With one device the colour is the mode's: each mode's line has its own colour from MODE_COLOR.
    lines = [ln for ln in drawn["throughput cpu"].axes[0].lines if ln.get_gid() is None and len(ln.get_xdata()) > 1]
    assert {mcolors.to_rgb(ln.get_color()) for ln in lines} == {mcolors.to_rgb(look.MODE_COLOR[m]) for m in MODES}
    assert set(look.MODE_COLOR) == set(LADDER) and len(set(look.MODE_COLOR.values())) == len(LADDER)


# many machines ------------------------------------------------------------------------------------


def many_machines(n: int) -> tuple[dict, dict, dict]:
    """n machines node1..node<n>, cpu and cuda each, their step times scaled by a factor of their
    own (node names and speed in unrelated orders): (tables, found, {host: scale})."""
    scales = {f"node{k + 1}": 1.0 + ((k * 37) % n) / n for k in range(n)}
    parts, prof, transfer = [], [], []
    for k, (host, s) in enumerate(scales.items()):
        truth = {("cpu", "seed"): (220.0 * s, 1.4 * s), ("cpu", "module"): (40.0 * s, 1.0 * s)}
        truth[("cuda", "module")] = (300.0 * s, 0.1 * s)
        parts.append(synthetic_runs(truth, sizes=(1, 64, 4096), repeats=2, noise=0.001, seed=k, host=host))
        prof.append(profile_for(sizes=(1,)).assign(host=host))
        transfer.append(transfer_table(host=host))
    runs = pd.concat(parts, ignore_index=True)
    runs["message"], runs["quality_note"] = "", ""
    transfer = pd.concat(transfer, ignore_index=True)
    tables, found = summary.analyse(
        runs,
        transfer,
        pd.concat(prof, ignore_index=True),
        pd.DataFrame(columns=["host", "device"]),
        {"quality": {"use": ["ok"]}},
    )
    tables["epochs"], tables["transfer"] = epochs_for(runs[runs.batch_size == 64]), transfer
    return tables, found, scales


def test_fifty_machines_one_overview_and_figures_that_compare_them(tmp_path, monkeypatch):
    """Fifty machines: summary.md opens with at most ten headline bullets and every machine ranked
    fastest first, then a section per machine in the natural order of names (node2 before
    node10); every registered figure compares the machines in one panel per device (not one per
    machine) and none is larger than 3000 pixels on a side."""
    tables, found, scales = many_machines(50)
    fastest = sorted(scales, key=scales.get)  # the smallest scale is the fastest machine
    md = words.summary_md(found)
    head = md.split("## The headline", 1)[1].split("\n## ", 1)[0]
    bullets = [line for line in head.splitlines() if line.startswith("- ")]
    assert 2 <= len(bullets) <= facts.MAX_HEADLINE, bullets
    assert f"the fastest is {fastest[0]}, module" in head and f"the slowest {fastest[-1]}, module" in head
    ranked = md.split("## Machines ranked", 1)[1].split("\n## ", 1)[0]
    cpu = ranked.split("### cpu, mlp-16-16", 1)[1].split("###", 1)[0]
    order = re.findall(r"^\| \d+ \| (\S+) \|", cpu, re.M)
    assert order == fastest, order  # ranked by speed, every machine once
    sections = re.findall(r"^## (node\d+)$", md, re.M)
    assert sections == [f"node{k}" for k in range(1, 51)]  # natural order: node2 before node10
    assert md.index("## Machines ranked") < md.index("## node1\n")
    node7 = md.split("## node7\n", 1)[1].split("\n## ", 1)[0]
    assert "On node7, cpu, mlp-16-16: the beginner's code trains" in node7  # each machine's own headline

    figs, out = render_all(tables, tmp_path, monkeypatch)  # the config's default dpi
    drawn = {name: [ax for ax in fig.axes if ax.get_title()] for name, fig in figs.items()}
    for name, path in out.items():
        with Image.open(path) as im:
            assert max(im.size) <= look.MAX_PIXELS, (name, im.size)
        assert len(drawn[name]) <= 4, (name, [ax.get_title() for ax in drawn[name]])  # panels per device, not machine
    ladder = drawn["ladder"][0]
    assert ladder.get_title() == "batch 1, cpu"
    assert [t.get_text() for t in ladder.get_yticklabels()] == fastest  # fastest at the top


def test_past_max_shown_machines_an_axis_keeps_the_fastest_and_the_slowest():
    names = [f"m{k}" for k in range(100)]
    order, note = machine_figures.fastest_first(pd.Series(range(100), index=names, dtype=float))
    assert len(order) == look.MAX_SHOWN and order[0] == "m99" and order[-1] == "m0"
    assert note == f" (the fastest and the slowest {look.MAX_SHOWN // 2} of 100 machines)"
    assert machine_figures.fastest_first(pd.Series([1.0, 1.0], index=["n10", "n2"]))[0] == ["n2", "n10"]
