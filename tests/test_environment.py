"""environment.yml and requirements.txt must install the same packages at the same versions."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
            assert m, f"not an exact pin: {line!r}"
            out[m.group(1).lower()] = m.group(2)
    return out


def test_environment_yml_and_requirements_agree():
    req = pins((REPO / "requirements.txt").read_text().splitlines())
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pins(pip) == req
    for needed in ["torch", "torchvision", "snakemake", "pandas", "seaborn", "snakemake-executor-plugin-slurm"]:
        assert needed in req
