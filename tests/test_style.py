"""The code is formatted and linted by the ecosystem's tools: snakefmt and snakemake --lint for the
workflow, ruff (configured in ruff.toml) for the Python."""

import subprocess
import sys

from conftest import REPO


def run(*cmd):
    return subprocess.run([sys.executable, "-m", *cmd], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_snakemake_lint_and_snakefmt_are_clean():
    lint = run("snakemake", "--lint")
    assert lint.returncode == 0 and "good condition" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    fmt = run("snakefmt", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_ruff_lint_and_format_are_clean():
    check = run("ruff", "check", ".")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
