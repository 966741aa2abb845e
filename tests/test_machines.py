"""A machine is its hardware: runs on identical nodes pool, different hardware never does, and each
accelerator is compared with a named cpu machine (synthetic runs tables, no Slurm needed)."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import snakemake, tiny_config
from mnistbench import BenchError
from mnistbench.collect import aggregate
from mnistbench.config import networks
from mnistbench.measure import machines
from mnistbench.report import figures, summary, words
from mnistbench.report import tables as tbl
from mnistbench.train import environment, records

EPYC = "AMD EPYC 9654, 8 threads; torch 2.11.0"
XEON = "Intel Xeon Platinum 8480+, 8 threads; torch 2.11.0"
H100 = "Intel Xeon Platinum 8480+, 8 threads; NVIDIA H100 80GB HBM3, 80 GiB, driver 550.54, CUDA 12.4; torch 2.11.0"
A100 = "Intel Xeon Platinum 8480+, 8 threads; NVIDIA A100-SXM4-40GB, 40 GiB, driver 550.54, CUDA 12.4; torch 2.11.0"
SIZES = [1, 16, 256, 4096]
# step time = a + b * batch (µs) per device kind: the cpu cheap per step, the GPU cheap per sample.
COST = {"cpu": (40.0, 2.0), "cuda": (300.0, 0.01)}


def rows(
    machine,
    hosts,
    device="cpu",
    modes=("module",),
    sizes=SIZES,
    repeats=2,
    scale=1.0,
    seed=0,
    network="mlp-16-16",
    cost=None,
):
    """Runs of one machine; repeat r runs on hosts[r % len(hosts)] (a cluster spreads them).
    `cost`: (a, b) in µs, the device kind's COST unless given."""
    rng = np.random.default_rng(seed)
    a, b = cost or COST[device]
    out = []
    for mode in modes:
        for bs in sizes:
            for r in range(repeats):
                t = (a + b * bs) * scale * 1e-6 * math.exp(rng.normal(0, 0.01))
                out.append(
                    dict(
                        host=hosts[r % len(hosts)],
                        machine=machine,
                        device=device,
                        device_name=machines.short(machine),
                        model=network,
                        flop_per_sample=networks.network(network).flop_per_sample(),
                        mode=mode,
                        batch_size=bs,
                        repeat=r,
                        status="ok",
                        message="",
                        quality="ok",
                        quality_note="",
                        step_time_median_s=t,
                        samples_per_s=bs / t,
                        test_accuracy=0.9,
                        final_loss=0.3,
                        time_to_target_s="",
                    )
                )
    return pd.DataFrame(out)


def analyse(runs):
    empty_transfer = pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds", "gb_per_s"])
    prof, env_ = pd.DataFrame(columns=["host", "model", "mode", "status"]), pd.DataFrame(columns=["host", "device"])
    return summary.analyse(runs, empty_transfer, prof, env_, {"quality": {"use": ["ok"]}})


def test_machine_identity_names_the_hardware_and_parses_back():
    m = environment.machine("cpu", 3)
    assert m.endswith(f"3 threads; torch {environment.torch.__version__}") and machines.cpu_of(m) == m
    assert machines.short(m) == m.split("; ")[0]
    assert machines.cpu_of(H100) == XEON and machines.short(H100) == "NVIDIA H100 80GB HBM3, 80 GiB"


def test_identical_nodes_pool_their_repeats_and_different_hardware_never_does():
    runs = pd.concat([rows(EPYC, ["cpu01", "cpu02"]), rows(XEON, ["gpu01"], scale=1.5)], ignore_index=True)
    s = aggregate.summarise(runs)
    epyc = s[s["machine"] == EPYC]
    assert len(epyc) == len(SIZES) and (epyc["n_ok"] == 2).all() and set(epyc["host"]) == {"cpu01,cpu02"}
    assert (epyc["repeats_agree"] == True).all()  # noqa: E712 (the column holds bools and "")
    assert len(s) == 2 * len(SIZES)  # the Xeon's runs keep their own rows
    fits = tbl.fits(machines.places(runs))
    assert len(fits[fits["device"] == "cpu"]) == 2  # one fit per machine x mode, both repeats in it
    assert (fits["n_points"] == 2 * len(SIZES)).all()


def test_merged_runs_of_identical_hardware_pool(tmp_path):
    """Another site's runs.csv of the same hardware (other host names) joins the same rows."""
    here, there = rows(EPYC, ["cpu01"], repeats=1), rows(EPYC, ["node7"], repeats=1, seed=1)
    tables, owner = aggregate.merge_by_host([("here", {"runs": here}), ("there", {"runs": there})], log=lambda s: s)
    s = aggregate.summarise(tables["runs"])
    assert owner == {"cpu01": "here", "node7": "there"}
    assert len(s) == len(SIZES) and (s["n_ok"] == 2).all() and set(s["host"]) == {"cpu01,node7"}


def test_a_copy_of_this_machines_runs_under_another_name_is_refused(tmp_path):
    """The same runs (the same start times and step times) under another host name are not
    another machine: merged, they would count every run twice."""
    here = rows(EPYC, ["cpu01"], repeats=1)
    here["start_utc"] = [f"2026-12-06T08:00:{i:02d}Z" for i in range(len(here))]
    here["end_utc"] = [f"2026-12-06T08:01:{i:02d}Z" for i in range(len(here))]
    copy = here.assign(host="renamed")
    with pytest.raises(BenchError, match="the runs of host renamed are the runs of host cpu01 from here under another"):
        aggregate.merge_by_host([("here", {"runs": here}), ("there", {"runs": copy})], log=lambda s: s)
    other = rows(EPYC, ["node7"], repeats=1, seed=1).assign(start_utc=here["start_utc"].to_numpy())
    tables, _ = aggregate.merge_by_host([("here", {"runs": here}), ("there", {"runs": other})], log=lambda s: s)
    assert set(tables["runs"]["host"]) == {"cpu01", "node7"}  # the same start, other timings: other runs


def test_a_gpu_on_gpu_nodes_is_compared_with_the_grid_cpu_and_says_which():
    """cpu runs on cpu nodes, cuda runs on gpu nodes (no cpu run there): the accelerator is
    compared with the grid's cpu machine, and tables and headline name both machines."""
    runs = pd.concat([rows(EPYC, ["cpu01", "cpu02"]), rows(H100, ["gpu01"], device="cuda")], ignore_index=True)
    assert machines.basis(runs) == {H100: EPYC}
    tables, found = analyse(runs)
    spd = tables["speedup"][tables["speedup"]["kind"] == "device"]
    cross = tables["crossover"]
    place = "NVIDIA H100 80GB HBM3, 80 GiB on gpu01 vs AMD EPYC 9654, 8 threads on cpu01, cpu02"
    assert len(spd) == len(SIZES) and set(spd["place"]) == {place}
    assert list(cross["place"]) == [place] and cross["verdict"].iloc[0] == "slower below, faster above"
    assert 100 < cross["crossover_batch_size"].iloc[0] < 200  # (300 - 40) / (2 - 0.01)
    head = " ".join(words.sentences(found["headline"]))
    assert "NVIDIA H100 80GB HBM3" in head and "AMD EPYC 9654, 8 threads" in head and "overtakes the cpu" in head


def test_own_node_type_cpu_is_preferred_and_two_gpu_models_sit_side_by_side():
    """cpu runs on the gpu nodes too: each GPU is compared with its own node type's cpu; two GPU
    models are two places, each with its speedups; the cpu nodes keep a place of their own."""
    runs = pd.concat(
        [
            rows(EPYC, ["cpu01"]),
            rows(XEON, ["gpu01", "gpu02"], scale=2.0),
            rows(H100, ["gpu01"], device="cuda"),
            rows(A100, ["gpu02"], device="cuda", scale=1.5),
        ],
        ignore_index=True,
    )
    assert machines.basis(runs) == {H100: XEON, A100: XEON}
    placed = machines.places(runs)
    assert set(placed["place"]) == {"cpu01", "gpu01", "gpu02"}  # each GPU beside its own hosts' cpu
    assert set(placed.loc[placed["place"] == "gpu02", "machine"]) == {A100, XEON}
    assert len(placed) == len(runs) + len(rows(XEON, ["gpu01", "gpu02"]))  # the Xeon's rows in both GPU places
    tables, _ = analyse(runs)
    spd = tables["speedup"][tables["speedup"]["kind"] == "device"]
    at = spd.set_index(["place", "batch_size"])["speedup"]
    assert at[("gpu01", 4096)] > at[("gpu02", 4096)] > 1  # the faster model is faster, both beat the cpu


def test_one_host_with_cpu_and_gpu_keeps_its_name():
    """A workstation: cpu and cuda on one host compare there, under its host name, as always."""
    box = "Intel Xeon Platinum 8480+, 8 threads; NVIDIA T4, 15 GiB, driver 1, CUDA 12; torch 2.11.0"
    runs = pd.concat([rows(XEON, ["box"]), rows(box, ["box"], device="cuda")], ignore_index=True)
    placed = machines.places(runs)
    assert set(placed["place"]) == {"box"} and len(placed) == len(runs) and set(placed["host"]) == {"box"}


@pytest.mark.parametrize("n", [0, 1])
def test_no_cpu_run_leaves_the_gpu_without_basis(n):
    runs = rows(H100, ["gpu01"], device="cuda")
    if n:
        runs = pd.concat([runs, rows(H100, ["gpu02"], device="cuda")], ignore_index=True)
    assert machines.basis(runs) == {H100: None}
    cross = analyse(runs)[0]["crossover"]
    assert cross["note"].str.startswith("no cpu run of mlp-16-16 module").all()


def test_the_map_names_the_batch_from_which_the_gpu_wins_for_each_network():
    """Four networks on a cpu machine and on a GPU machine: the cpu's cost per sample grows with
    the network's arithmetic, the GPU's is tiny beside a large fixed cost per step. The map puts
    the GPU's first winning batch size where the lines say (300 + b·g < 40 + b·c), with its
    interval, and says it in one sentence per network; the figure draws it."""
    grid = [1, 4, 16, 64, 256, 1024, 4096]
    nets = {"mlp-16-16": 256, "mlp-256": 16, "mlp-1024-1024": 4, "mlp-4096": 1}
    parts = []
    for i, net in enumerate(nets):
        flop = networks.network(net).flop_per_sample()
        parts.append(rows(EPYC, ["cpu01"], network=net, sizes=grid, repeats=3, seed=i, cost=(40.0, flop / 40e3)))
        gpu = (300.0, 0.002 + flop / 2e7)
        parts.append(rows(H100, ["gpu01"], device="cuda", network=net, sizes=grid, repeats=3, seed=9 + i, cost=gpu))
    tables, found = analyse(pd.concat(parts, ignore_index=True))
    m = tables["map"]
    wins = m[m["device"] == "cuda"].drop_duplicates("model").set_index("model")
    assert list(wins.index) == list(nets)  # the smallest network first
    for net, first in nets.items():
        r = wins.loc[net]
        assert r["wins_from"] == first and r["wins_from_lo"] <= first <= r["wins_from_hi"], r
        assert r["verdict"] == ("faster at every batch size" if first == 1 else "slower below, faster above")
    lines = words.sentences(found["per_network"])
    assert len(lines) == len(nets)
    for line, (net, first) in zip(lines, nets.items()):
        assert line.startswith(f"{net} (") and f"cuda's best mode beats the cpu's from batch {first}" in line, line
    fig = figures.map_(m, title=words.title(found, "map"))
    (ax,) = [a for a in fig.axes if a.get_title()]
    assert ax.get_title() == "best cuda over best cpu"
    edges = [line for line in ax.lines if line.get_gid() == "crossover"]
    assert [line.get_xdata()[0] for line in edges] == [grid.index(b) for b in nets.values()]
    assert " ".join(fig._suptitle.get_text().split()) == lines[0]  # the map's title: its page's first fact


TRAIN_JOB = re.compile(r"rule train:.*?wildcards: device=(\S+),.*?resources: ([^\n]*)", re.S)


def train_jobs(mirror, tmp_path, slurm: dict) -> dict:
    """{device folder: its train job's resources} of a dry run (no Slurm needed: the resources
    are what the Slurm executor turns into sbatch options)."""
    cfg = tiny_config(*mirror, devices=["cpu", "cuda"], modes=["module"], batch_sizes=[64])
    proc = snakemake(tmp_path, dict(cfg, slurm=slurm), "-n")
    found = {}
    for slug, res in TRAIN_JOB.findall(proc.stdout):
        found[slug] = dict(kv.split("=", 1) for kv in res.split(", "))
    return found


def test_two_gpu_models_fan_every_cuda_train_job_out(mirror, tmp_path):
    jobs = train_jobs(mirror, tmp_path, {"gpu_models": ["t4", "a100"]})
    assert set(jobs) == {"cpu", "cuda@t4", "cuda@a100"}
    for model in ("t4", "a100"):
        r = jobs[f"cuda@{model}"]
        assert (r["gpu"], r["gpu_model"], r["slurm_partition"]) == ("1", model, "gpu")  # sbatch --gpus=<model>:1
    assert (jobs["cpu"]["gpu"], jobs["cpu"]["slurm_partition"]) == ("0", "cpu")


@pytest.mark.parametrize("slurm, model", [({"gpu_models": ["t4"]}, "t4"), ({"gpu_model": "t4"}, "t4"), ({}, "")])
def test_one_gpu_model_or_none_is_one_cuda_job(mirror, tmp_path, slurm, model):
    jobs = train_jobs(mirror, tmp_path, slurm)
    assert set(jobs) == {"cpu", "cuda"} and jobs["cuda"]["gpu_model"] == model


def test_cpu_on_gpu_partition_adds_cpu_runs_on_the_gpu_nodes(mirror, tmp_path):
    jobs = train_jobs(mirror, tmp_path, {"cpu_on_gpu_partition": True})
    assert set(jobs) == {"cpu", "cpu@gpu", "cuda"}
    assert (jobs["cpu@gpu"]["slurm_partition"], jobs["cpu@gpu"]["gpu"]) == ("gpu", "0")
    assert jobs["cpu"]["slurm_partition"] == "cpu"


def test_the_train_jobs_rows_are_read_as_one_table_and_a_bad_value_names_its_file(tmp_path):
    """aggregate reads the one-row CSV of every train job at once (read_rows): the same table as
    reading each with read_runs, and a value that is not a number is named with its file."""
    table = rows(EPYC, ["cpu01"]).reindex(columns=records.COLUMNS)
    paths = []
    for i in range(len(table)):
        paths.append(tmp_path / f"r{i}.csv")
        table.iloc[[i]].to_csv(paths[-1], index=False)
    together = aggregate.read_rows(paths)
    pd.testing.assert_frame_equal(together, pd.concat([aggregate.read_runs(p) for p in paths], ignore_index=True))
    bad = table.iloc[[3]].assign(samples_per_s="fast")
    bad.to_csv(paths[3], index=False)
    with pytest.raises(BenchError, match=rf"^{re.escape(str(paths[3]))}: column samples_per_s holds 'fast'"):
        aggregate.read_rows(paths)


def test_names_sort_in_their_natural_order():
    assert machines.by_name(["node10", "node2", "vm", "node1", "gpu01", "gpu1"]) == [
        "gpu01",
        "gpu1",
        "node1",
        "node2",
        "node10",
        "vm",
    ]
    assert machines.hostlist(["n10", "n9", "n2", "n1"]) == "n1, n2, n9 and 1 more"


def test_what_a_denormal_costs_counts_each_process_once_with_an_interval_over_processes():
    """A warm worker's runs share its process, whose probe ran once: its value is one sample, so a
    host with one process has no interval, and one with three has one around their median."""

    def record(pid, cost):
        return {"environment": {"host": "vm", "device": "cpu", "pid": pid, "denormal_cost": cost}}

    one = aggregate.load_environment([record(1, 30.0)] * 3).iloc[0]
    assert one.n_runs == 3 and one.denormal_cost == 30.0 and math.isnan(one.denormal_cost_lo)
    three = aggregate.load_environment([record(1, 30.0)] * 3 + [record(2, 33.0), record(3, 27.0)]).iloc[0]
    assert three.n_runs == 5 and three.denormal_cost == 30.0
    assert three.denormal_cost_lo < 30.0 < three.denormal_cost_hi


def profiled(host: str, machine: str) -> pd.DataFrame:
    """The profile job's rows of one host (torch ops per step of seed and module)."""
    out = []
    for mode, ops in (("seed", 105.0), ("module", 45.0)):
        for b in (1, 4096):
            out.append(dict(host=host, machine=machine, device="cpu", model="mlp-16-16", mode=mode, batch_size=b))
            out[-1].update(status="ok", ops_step=ops, ops_batch=3.0, transfer_us=1.0, step_us_profiled=100.0)
    return pd.DataFrame(out)


def test_a_place_of_pooled_hosts_says_what_its_hosts_measured():
    """Identical nodes cpu01 and cpu02 pool into one place, named for their machine: what the
    tables kept per host (environment, profile) and the repeats that disagree are still its own,
    found by its hosts, not by comparing a host with the place's name."""
    pooled = rows(EPYC, ["cpu01", "cpu02"], modes=("seed", "module"), repeats=4)
    slow = (pooled["mode"] == "module") & (pooled["batch_size"] == 16) & (pooled["repeat"] == 1)
    pooled.loc[slow, "step_time_median_s"] *= 2  # one process twice as slow: the repeats disagree
    box = rows(XEON, ["box"], modes=("seed", "module"), repeats=4, seed=3)
    transfer = pd.DataFrame(columns=["host", "device", "memory", "bytes", "seconds", "gb_per_s"])
    versions = dict(torch="2.11.0", python="3.12.1", cuda="", platform="Linux")
    env = pd.DataFrame(
        [
            dict(host=h, device="cpu", device_name=f"cpu of {h}", cores=8, threads=8, fma_gflops=100.0, **versions)
            for h in ("cpu01", "cpu02", "box")
        ]
    )
    cfg = {"quality": {"use": ["ok"], "repeat_spread": 1.25}}
    for runs, prof in [
        (pooled, profiled("cpu01", EPYC)),
        (
            pd.concat([pooled, box], ignore_index=True),
            pd.concat([profiled("cpu01", EPYC), profiled("box", XEON)], ignore_index=True),
        ),
    ]:
        _, found = summary.analyse(runs, transfer, prof, env, cfg)
        md = words.summary_md(found)
        section = md.split("## AMD EPYC 9654, 8 threads on cpu01, cpu02\n", 1)[1].split("\n## ", 1)[0]
        assert "- Environment (cpu): cpu of cpu01;" in section, section
        assert "(Python, dispatch, allocation, 108 torch ops per step)" in md, md
        assert (
            "- Torch ops dispatched per training step of mlp-16-16 on cpu at batch 1: seed 108, module 48." in section
        )
        several = runs["host"].nunique() > 2
        where = section if several else md.split("## Repeats that disagree\n", 1)[1]
        assert "cpu mlp-16-16 module batch 16: the 4 repeats' median step times differ by 2×" in where, md
