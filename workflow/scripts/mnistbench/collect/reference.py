"""Reference machines: the results of a machine the user may not have (a GPU), committed under
bench/reference/<name>/ (bench/gpu_reference.py makes one: its summary/ folder holds that run's
runs.csv and the tables beside it), shown beside this run's results in summary.md, the ladder and
the crossover map, labelled as a reference with its hardware, software and date.

A reference is never merged into this run's summary: it was made with its own config and code,
so its numbers are computed apart (the same analysis, on its runs alone) and every place it
appears says so. `reference: false` in the config shows none. Torch-free (pandas only).
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mnistbench import BenchError
from mnistbench.collect import aggregate
from mnistbench.measure import machines

ROOT = Path(__file__).resolve().parents[4] / "bench" / "reference"


@dataclass
class Reference:
    name: str  # its folder's name under bench/reference/
    label: str  # how every table, sentence and figure names it
    about: str  # its hardware, software, commit and date, in words
    runs: pd.DataFrame  # its runs as the analysis compares them (machines.places), `place` = the label


def runs_files(root: Path = ROOT) -> list[Path]:
    """Every reference's runs.csv: bench/reference/<name>/summary/runs.csv."""
    return sorted(root.glob("*/summary/runs.csv")) if root.is_dir() else []


def date_of(runs: pd.DataFrame) -> str:
    """The day the reference's runs started (UTC), or 'undated'."""
    start = pd.to_datetime(runs.get("start_utc", pd.Series(dtype=str)), errors="coerce", utc=True).dropna()
    return start.min().strftime("%Y-%m-%d") if len(start) else "undated"


def load(runs_csv: Path) -> Reference:
    """The reference whose runs.csv this is; BenchError (one line) where it cannot be read, e.g.
    one made by a version of the code whose runs.csv had other columns."""
    path = Path(runs_csv)
    name = path.parent.parent.name
    tables = aggregate.siblings(path)
    runs = tables["runs"]
    if runs.empty:
        raise BenchError(f"{path}: holds no runs")
    env = tables.get("environment", pd.DataFrame())
    accelerators = sorted(set(runs.loc[runs["device"] != "cpu", "device_name"].astype(str)))
    cpus = sorted(set(runs.loc[runs["device"] == "cpu", "device_name"].astype(str)))
    date = date_of(runs)
    label = f"reference {name} ({', '.join(accelerators or cpus)}, {date})"
    parts = [f"{', '.join(accelerators)} beside {', '.join(cpus) or 'no cpu'}" if accelerators else ", ".join(cpus)]
    if len(env):
        first = env.iloc[0]
        parts += [
            f"torch {first.get('torch', '?')}",
            f"cuda {first.get('cuda', '?')}",
            f"python {first.get('python', '?')}",
        ]
        parts.append(f"commit {str(first.get('git_commit', '?'))[:12]}")
    parts.append(f"{len(runs)} runs from {date}")
    placed = machines.places(runs)
    places = sorted(set(placed["place"]))
    placed["place"] = [label if len(places) == 1 else f"{label}, {p}" for p in placed["place"]]
    return Reference(name=name, label=label, about="; ".join(parts), runs=placed)


def load_all(paths) -> tuple[list[Reference], list[str]]:
    """(the references that could be read, one note per one that could not)."""
    refs, notes = [], []
    for p in paths:
        try:
            refs.append(load(p))
        except BenchError as e:
            notes.append(f"reference {Path(p).parent.parent.name} not shown: {e}")
    return refs, notes
