"""A machine is its hardware, not its host name: the identity each run records, and which cpu each
accelerator is compared with.

A run's `machine` (env.machine writes it) is "<cpu model>, <N> threads[; <accelerator>]; torch
<version>": runs on identical nodes share it and pool, different hardware never does. The analysis compares places:
an accelerator machine with its basis cpu machine (the cpu of its own node type where such runs
exist, else the grid's cpu runs), or a cpu machine that is no accelerator's basis on its own.
Standard library and pandas only: aggregate, analysis and figures import it without torch.
"""

import re

import pandas as pd

SEP = "; "  # between the parts of a machine (env.machine)
MAX_HOSTS = 3  # host names spelled out in a place's name; more are counted


def natural(name) -> tuple:
    """The sort key of a name in its natural order, digits as numbers: node2 before node10. The one
    key every list of machines, hosts or places is sorted by where it is sorted by name."""
    parts = [(0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in re.split(r"(\d+)", str(name)) if p]
    return (*parts, (2, 0, str(name)))  # gpu1 and gpu01: the same number, still one order


def by_name(names) -> list:
    """Distinct names in their natural order (natural)."""
    return sorted(set(names), key=natural)


def cpu_of(machine: str) -> str:
    """The cpu machine of a node: its machine without the accelerator."""
    parts = machine.split(SEP)
    return SEP.join([parts[0], parts[-1]])


def short(machine: str) -> str:
    """What a sentence calls it: the accelerator's name and memory, or the cpu and its threads."""
    parts = machine.split(SEP)
    return ", ".join(parts[1].split(", ")[:2]) if len(parts) > 2 else parts[0]


def hostlist(hosts) -> str:
    hosts = by_name(hosts)
    more = len(hosts) - MAX_HOSTS
    return ", ".join(hosts[:MAX_HOSTS]) + (f" and {more} more" if more > 0 else "")


def basis(runs: pd.DataFrame, cpu="cpu") -> dict:
    """{accelerator machine: cpu machine}: the cpu of its own node type where it has runs, else
    the grid's cpu machine with the most runs (None where no cpu ran)."""
    counts = runs.loc[runs["device"] == cpu, "machine"].value_counts().sort_index()
    grid = counts.sort_values(ascending=False, kind="stable").index[0] if len(counts) else None
    accelerators = sorted(set(runs.loc[runs["device"] != cpu, "machine"]))
    return {m: cpu_of(m) if cpu_of(m) in counts.index else grid for m in accelerators}


def places(runs: pd.DataFrame, cpu="cpu") -> pd.DataFrame:
    """The table (runs, epochs: anything with host, machine and device columns) as the analysis
    compares it, with a `place` column (`host` keeps where each run ran). Each accelerator
    machine's rows share a place with a copy of its basis cpu's rows; a cpu machine that is no
    accelerator's basis is a place of its own. A place is named by its host where it has one (an
    accelerator compared with the cpu of its own hosts keeps its hosts' names), else by both
    machines and their hosts: "<GPU> on gpu01 vs <cpu>, 8 threads on cpu01, cpu02"."""
    runs = runs.reset_index(drop=True)  # one label per row: a row copied into two places is found by it
    on_cpu = runs["device"] == cpu
    frames = []
    pairs = basis(runs, cpu)
    for acc, cpu_machine in pairs.items():
        a, c = runs[~on_cpu & (runs["machine"] == acc)], runs[on_cpu & (runs["machine"] == cpu_machine)]
        same = c.empty or set(a["host"]) <= set(c["host"])
        name = hostlist(a["host"]) if same else f"{short(acc)} on {hostlist(a['host'])} vs {describe(cpu_machine, c)}"
        frames.append(pd.concat([a, c]).assign(place=name))
    used = set(pairs.values())
    for cpu_machine in sorted(set(runs.loc[on_cpu, "machine"]) - used):
        c = runs[on_cpu & (runs["machine"] == cpu_machine)]
        name = hostlist(c["host"]) if c["host"].nunique() == 1 else describe(cpu_machine, c)
        frames.append(c.assign(place=name))
    if not frames:
        return runs.assign(place=runs["host"])
    out = pd.concat(frames)
    # Two accelerators of one host compared with its cpu: one place, the cpu's rows once.
    out = out[~out.set_index("place", append=True).index.duplicated()]
    return out.reset_index(drop=True)


def describe(machine: str, rows: pd.DataFrame) -> str:
    return f"{short(machine)} on {hostlist(rows['host'])}"
