"""The modes whose arithmetic a library's kernels decide, proven under every vector ISA this cpu
can run: `amp` (oneDNN's bf16 convolutions and matrix products, whose kernels differ between a
cpu with native bf16 and one without) and `compiled` (the C++ inductor generates for the vector
ISA that ATen's capability allows). The rest of the suite runs under the cpu's own level; each
level below it runs tests/test_modes.py's equivalence tests of those modes in a subprocess, since
both libraries read their variable once, when torch loads.
"""

import os
import platform
import subprocess
import sys
from pathlib import Path

import machine
import pytest
import torch
from conftest import REPO

pytestmark = pytest.mark.slow  # each starts Python and torch, and compiles afresh

# ONEDNN_MAX_CPU_ISA's levels, lowest first, with the cpu flags (as Linux names them) each needs.
AVX512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
ONEDNN = {
    "SSE41": {"sse4_1"},
    "AVX2": {"avx2", "fma"},
    "AVX512_CORE": AVX512,
    "AVX512_CORE_BF16": AVX512 | {"avx512_vnni", "avx512_bf16"},
    "AVX512_CORE_AMX": AVX512 | {"avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"},
}
# ATEN_CPU_CAPABILITY's values on x86-64, lowest first, the same way.
ATEN = {"default": set(), "avx2": {"avx2", "fma"}, "avx512": AVX512}
TESTS = {"ONEDNN_MAX_CPU_ISA": "amp", "ATEN_CPU_CAPABILITY": "amp or compiled"}


def cpu_flags() -> set:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return set()
    return {f for ln in lines if ln.startswith("flags") for f in ln.split(":", 1)[1].split()}


def levels(table: dict, own: str | None = None) -> list:
    """One param per level of `table`, each skipped with its reason where this cpu cannot run it
    or where it is the cpu's own (the highest it can run, or `own`): the suite runs under that."""
    flags = cpu_flags()
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    runnable = [name for name, needs in table.items() if x86 and needs <= flags]
    own = own if own in runnable else (runnable[-1] if runnable else None)
    out = []
    for name, needs in table.items():
        why = None
        if not x86:
            why = f"an x86-64 level; this cpu is {platform.machine()}"
        elif name not in runnable:
            why = f"this cpu lacks {', '.join(sorted(needs - flags))}"
        elif runnable.index(name) > runnable.index(own):
            why = f"above this torch's own level ({own})"
        elif name == own:
            why = "this cpu's own level: the rest of the suite runs under it"
        out.append(pytest.param(name, marks=pytest.mark.skipif(why is not None, reason=str(why)), id=name))
    return out


CASES = [pytest.param("ONEDNN_MAX_CPU_ISA", *p.values, marks=p.marks, id=f"onednn-{p.id}") for p in levels(ONEDNN)]
CASES += [
    pytest.param("ATEN_CPU_CAPABILITY", *p.values, marks=p.marks, id=f"aten-{p.id}")
    for p in levels(ATEN, torch.backends.cpu.get_cpu_capability().lower())
]


# oneDNN's name of each level, as its verbose line says it (tests/machine.py).
ONEDNN_SAYS = {
    "SSE41": "SSE4.1",
    "AVX2": "AVX2",
    "AVX512_CORE": "AVX-512 with AVX512BW",
    "AVX512_CORE_BF16": "bfloat16",
    "AVX512_CORE_AMX": "AMX",
}


@pytest.mark.parametrize("variable,level", CASES)
def test_amp_and_compiled_track_the_float64_reference_at_each_isa_level(variable, level):
    """tests/test_modes.py's equivalence tests of the modes in TESTS[variable], with `variable` set
    to `level`, all passing, in a child that took that level (torch's capability, oneDNN's ISA)."""
    env = dict(os.environ, **{variable: level})
    if variable == "ONEDNN_MAX_CPU_ISA":
        assert ONEDNN_SAYS[level] in machine.onednn_isa(env), machine.onednn_isa(env)
    args = [
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "tests/test_modes.py",
        "-k",
        f"tracks_the_float64 and ({TESTS[variable]})",
    ]
    child = f"import sys, pytest, torch; print('capability', torch.backends.cpu.get_cpu_capability()); sys.exit(pytest.main({args!r}))"
    proc = subprocess.run([sys.executable, "-c", child], env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    out = proc.stdout.strip().splitlines() or [""]
    if variable == "ATEN_CPU_CAPABILITY":
        assert out[0] == f"capability {level.upper()}", out[0]
    assert proc.returncode == 0 and " passed" in out[-1] and "failed" not in out[-1], (
        f"under {variable}={level}:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    )
