"""What machine the tests run on, printed by .ci/run before them, so that a failure on another cpu
can be read: the cpu's model and vector flags, the ISA torch's own kernels use (ATen's capability)
and the one oneDNN's use (its verbose line, from a convolution in a child process, since oneDNN
reads its settings once). Each line also names the variable that lowers it."""

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

VECTOR_FLAGS = re.compile(r"^(sse4_[12]|avx|avx2|fma|f16c|avx512\w*|avx_vnni\w*|amx\w*|neon|asimd\w*|sve\w*)$")
# A convolution oneDNN computes on every ISA level (its first primitive prints the verbose line).
ONEDNN_OP = "import torch; torch.nn.functional.conv2d(torch.ones(4, 3, 16, 16), torch.ones(8, 3, 3, 3))"


def cpu() -> tuple[str, list]:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    field = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in reversed(lines) if ":" in ln}
    name = field.get("model name") or platform.processor() or platform.machine()
    flags = (field.get("flags") or field.get("Features") or "").split()
    return name, [f for f in flags if VECTOR_FLAGS.match(f)]


def onednn_isa(environ=None) -> str:
    """The ISA oneDNN says it uses, in a child process with `environ` (this one's by default)."""
    env = dict(os.environ if environ is None else environ, ONEDNN_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", ONEDNN_OP], env=env, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"isa:([^\n]*)", out)
    return m.group(1).strip() if m else "not reported"


def describe() -> list[str]:
    import torch

    name, flags = cpu()
    return [
        f"cpu: {name}, {os.cpu_count()} logical cores, {platform.machine()}",
        f"vector flags: {' '.join(flags) or 'none listed'}",
        f"torch {torch.__version__}: ATen's cpu capability {torch.backends.cpu.get_cpu_capability()}"
        f" (ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'unset')})",
        f"oneDNN's ISA: {onednn_isa()} (ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')})",
    ]


if __name__ == "__main__":
    print("\n".join(describe()))
