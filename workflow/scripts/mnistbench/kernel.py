"""Builds kernel.c with the machine's C compiler, once per machine, and loads it with ctypes.

The library is cached under the temp dir, named by a hash of the source, the compiler, its
flags and the host: `-march=native` code is only valid on the machine that built it, and /tmp is
node-local on a cluster. Concurrent jobs each build to their own temp file and rename, so a
half-written library is never loaded.
"""

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("kernel.c")
# -march=native: the vector code for this cpu (AVX-512 where there is one); compilers or cpus
# that do not know it get the portable build.
FLAGS = (["-O3", "-march=native"], ["-O3"])
_loaded = {}


class BuildError(Exception):
    pass


def compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def _build(cc: str, flags: list[str], out: Path) -> None:
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.tmp{out.suffix}")
    cmd = [cc, *flags, "-shared", "-fPIC", "-pthread", "-o", str(tmp), str(SOURCE)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(" ".join((r.stderr or r.stdout).split())[:300])
    os.replace(tmp, out)


def load() -> ctypes.CDLL:
    """The compiled kernel (built on first use); BuildError says why it cannot be."""
    cc = compiler()
    if cc is None:
        raise BuildError(f"no C compiler: {os.environ.get('CC', 'cc')} not found; install gcc or clang, or set CC")
    cache = Path(tempfile.gettempdir()) / f"mnistbench-kernel-{os.getuid() if hasattr(os, 'getuid') else 0}"
    cache.mkdir(exist_ok=True)
    error = None
    for flags in FLAGS:
        key = hashlib.sha256(b"\0".join(s.encode() for s in [cc, *flags, platform.node()]) + SOURCE.read_bytes())
        path = cache / f"kernel-{key.hexdigest()[:16]}.so"
        if path in _loaded:
            return _loaded[path]
        try:
            if not path.exists():
                _build(cc, flags, path)
        except BuildError as e:
            error = e
            continue
        lib = ctypes.CDLL(str(path))
        ptr, i32, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        lib.sgd_step.argtypes = [ptr, ptr, i32] + [ptr] * 6 + [f32, i32, i32, ptr]
        lib.sgd_step.restype = None
        lib.work_floats.argtypes, lib.work_floats.restype = [i32], ctypes.c_long
        _loaded[path] = lib
        return lib
    raise BuildError(f"{cc} could not build {SOURCE.name}: {error}")
