"""Builds kernel.c with the machine's C compiler, once per machine, and loads it with ctypes.

The library is cached in a directory of the temp dir that only this user may write (a library
found in someone else's directory is never loaded), named by a hash of the source, the compiler,
its flags, the host and its cpu: `-march=native` code is only valid on the cpu that built it.
Concurrent jobs each build to their own temp file and rename, so a half-written library is never
loaded. Any failure (no compiler, a build error, a temp dir mounted noexec) is a BuildError
saying why, which the mode turns into an `unsupported` row.

Torch-free: the Snakefile asks on every call whether a compiler runs here (train/needs.py:
`unusable`, which builds nothing: planning writes nothing); the train job builds it, and a compiler
that runs but cannot build kernel.c makes the run's row `unsupported` with its message. The
Python side of the calls, on torch tensors, is in native.py.
"""

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from mnistbench import files

SOURCE = Path(__file__).with_name("kernel.c")
# The vector code a build targets. Runs use `native`: this cpu's own (AVX-512 where there is one).
# The others build the same source for less, so that the tests prove on this cpu the paths that
# kernel.c takes on another: `avx2` is x86-64-v3 (AVX2, FMA), `baseline` plain x86-64 (SSE2).
ARCHES = {"native": "-march=native", "avx2": "-march=x86-64-v3", "baseline": "-march=x86-64"}
# What a cpu must have to run x86-64-v3 code, as Linux names its flags (GCC's definition of the level).
X86_64_V3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
BUILD_TIMEOUT_S = 300
# The network the fast path (sgd_step, sgd_steps) is written for; mlp_steps takes any of the family.
SHAPE = (784, 16, 16, 10)
_loaded = {}


class BuildError(Exception):
    pass


def compiler() -> list[str] | None:
    """The C compiler command ($CC, which may carry arguments, else cc), or None if absent."""
    cmd = shlex.split(os.environ.get("CC", "cc"))
    path = shutil.which(cmd[0]) if cmd else None
    return [path, *cmd[1:]] if path else None


_version = {}


def _asked(cc: list[str]) -> tuple[str, str | None]:
    """(the first line of `cc --version`, or why it did not answer), asked once per process."""
    key = tuple(cc)
    if key not in _version:
        try:
            r = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30, check=False)
            first = (r.stdout or r.stderr).strip().splitlines()[:1]
            _version[key] = (first[0] if first else "", None if r.returncode == 0 else f"exit status {r.returncode}")
        except (OSError, subprocess.TimeoutExpired) as e:
            _version[key] = ("", str(e) or type(e).__name__)
    return _version[key]


def identity() -> str:
    """The compiler a build uses, as a run depends on it: its command and the first line of its
    `--version` (a compiler upgraded in place builds other code). "" without one."""
    cc = compiler()
    return " ".join(p for p in [*cc, _asked(cc)[0]] if p) if cc else ""


def unusable() -> str | None:
    """Why the compiler does not run here (`--version` fails), or None; builds nothing, so the
    Snakefile asks it while it plans (whether kernel.c builds is the train job's to find)."""
    cc = compiler()
    why = _asked(cc)[1] if cc else None
    return f"{' '.join(cc)} --version: {why}" if why else None


def problem() -> str | None:
    """Why the kernel cannot run here (no compiler, or it cannot build kernel.c), or None. Builds
    it (once per machine and compiler, then cached)."""
    try:
        load()
    except BuildError as e:
        return str(e)
    return None


def _cpu() -> str:
    """What -march=native depends on: the cpu model and its feature flags where Linux lists them."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    keep = [ln for ln in lines if ln.startswith(("model name", "flags", "Features", "CPU part"))]
    return "\n".join(dict.fromkeys(keep)) or platform.processor() or platform.machine()


def _cache_dir() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    d = Path(tempfile.gettempdir()) / f"mnistbench-kernel-{uid}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        raise BuildError(f"{d} is not a private directory of this user; remove it or set TMPDIR elsewhere")
    return d


def _build(cc: list[str], build: list[str], out: Path) -> None:
    """Compile to a temporary name beside `out`, renamed into place only when the build succeeded."""
    try:
        with files.atomic(out, suffix=out.suffix) as tmp:
            cmd = [*cc, *build, "-shared", "-fPIC", "-o", str(tmp), str(SOURCE)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=BUILD_TIMEOUT_S)
            if r.returncode != 0:
                lines = (r.stderr or r.stdout).splitlines()
                errors = [ln for ln in lines if "error" in ln.lower()] or lines[-3:]
                raise BuildError(" ".join(" ".join(errors).split())[:300] or f"exit status {r.returncode}")
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"build took over {BUILD_TIMEOUT_S} s") from e


def flags(arch: str = "native") -> list[list[str]]:
    """The compiler flags of a build for `arch`, tried in order. -fopenmp: the threads (torch's own
    pool, see kernel.c); a compiler without OpenMP (Apple's clang) gets a single-threaded build.
    A compiler that does not know -march=native builds for its default target instead.
    -Wno-psabi: GCC's notes on passing 64-byte vectors would otherwise crowd a real error out of
    the message."""
    targets = [[ARCHES[arch]], []] if arch == "native" else [[ARCHES[arch]]]
    return [["-O3", *target, *omp, "-Wno-psabi"] for omp in (["-fopenmp"], []) for target in targets]


def cannot_run(arch: str) -> str | None:
    """Why code built for `arch` cannot run on this cpu, or None."""
    if arch == "native":
        return None
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"{arch} is x86-64 code; this cpu is {platform.machine()}"
    have = set(" ".join(ln.split(":", 1)[1] for ln in _cpu().splitlines() if ln.startswith("flags")).split())
    missing = sorted(X86_64_V3 - have) if arch == "avx2" else []
    return f"this cpu lacks {', '.join(missing)} of x86-64-v3" if missing else None


def load(arch: str = "native") -> ctypes.CDLL:
    """The compiled kernel for `arch` (built on first use); BuildError says why it cannot be."""
    cc = compiler()
    if cc is None:
        raise BuildError(f"no C compiler: {os.environ.get('CC', 'cc')} not found; install gcc or clang, or set CC")
    error = None
    try:
        cache = _cache_dir()
        for build in flags(arch):
            key = "\0".join([identity(), *build, platform.node(), _cpu()]).encode() + SOURCE.read_bytes()
            path = cache / f"kernel-{hashlib.sha256(key).hexdigest()[:16]}.so"
            if path in _loaded:
                return _loaded[path]
            try:
                if not path.exists():
                    _build(cc, build, path)
            except BuildError as e:
                error = e
                continue
            lib = ctypes.CDLL(str(path))
            ptr, i32, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
            lib.sgd_step.argtypes = [ptr, ptr, i32] + [ptr] * 6 + [f32, i32, i32, ptr]
            lib.sgd_step.restype = None
            # x, t, n_steps, batch, w1t, b1, w2, b2, w3, b3, lr, mse, threads, work
            lib.sgd_steps.argtypes = [ptr, ptr, i32, i32] + [ptr] * 6 + [f32, i32, i32, ptr]
            lib.sgd_steps.restype = None
            lib.fma_gflops.argtypes, lib.fma_gflops.restype = [ctypes.c_long], ctypes.c_double
            lib.work_floats.argtypes, lib.work_floats.restype = [i32], ctypes.c_long
            # x, t, n_steps, batch, n_layers, sizes, wt[], b[], lr, mse, threads, work
            lib.mlp_steps.argtypes = [ptr, ptr, i32, i32, i32, ptr, ptr, ptr, f32, i32, i32, ptr]
            lib.mlp_steps.restype = i32
            # batch, n_layers, sizes, threads
            lib.mlp_work_floats.argtypes, lib.mlp_work_floats.restype = [i32, i32, ptr, i32], ctypes.c_long
            # off, idx, val, sum, t, n_steps, batch, n_layers, sizes, wt[], b[], u, s, c, lr, mse, threads, work
            lib.sparse_steps.argtypes = [ptr] * 5 + [i32, i32, i32, ptr, ptr, ptr, ptr, ptr, f32, f32, i32, i32, ptr]
            lib.sparse_steps.restype = i32
            # the flush state of denormal numbers (kernel.c's section on them)
            lib.fp_mode.argtypes, lib.fp_mode.restype = [], i32
            lib.fp_flushes.argtypes, lib.fp_flushes.restype = [], i32
            lib.fp_status.argtypes, lib.fp_status.restype = [i32], i32
            lib.fp_team_mode.argtypes, lib.fp_team_mode.restype = [i32], i32
            lib.fp_chain_ns.argtypes, lib.fp_chain_ns.restype = [ctypes.c_long, f32], ctypes.c_double
            _loaded[path] = lib
            return lib
    except OSError as e:  # e.g. a temp dir mounted noexec: the library builds but cannot be mapped
        raise BuildError(
            f"cannot build or load the kernel under {tempfile.gettempdir()}: {e}; set TMPDIR elsewhere"
        ) from e
    raise BuildError(f"{' '.join(cc)} could not build {SOURCE.name}: {error}")


def fma_gflops(iters: int = 2_000_000, repeats: int = 5) -> float:
    """One thread's peak rate of fused multiply-adds in GFLOP/s (kernel.c's fma_gflops, the best
    of `repeats` runs): a network's arithmetic limit on one core is its FLOP per training sample
    at this rate (spec.Network.flop_per_sample). Builds the kernel; BuildError if it cannot."""
    lib = load()
    return max(lib.fma_gflops(iters) for _ in range(repeats))


def flushes() -> bool:
    """Whether the C modes compute with denormal numbers flushed to zero on this cpu (x86 and
    aarch64; kernel.c's section on denormals says why). Builds the kernel; BuildError if it cannot."""
    return bool(load().fp_flushes())


def flush_denormals(lib: ctypes.CDLL, on: bool) -> None:
    """Whether the library's calls flush denormals (on by default; off computes with them: what
    the tests and benches compare with)."""
    ctypes.c_int.in_dll(lib, "flush_denormals").value = int(on)


def denormal_cost(iters: int = 200_000, repeats: int = 5) -> float:
    """What an operation on a denormal number costs this core, as a multiple of the same operation
    on normal numbers (kernel.c's fp_chain_ns: one dependent chain of multiply-adds, denormals not
    flushed; the best of `repeats` each). About 1 on cpus that compute them at full speed; tens on
    those that take a microcode assist. Builds the kernel; BuildError if it cannot."""
    lib = load()
    normal = min(lib.fp_chain_ns(iters, 1e-30) for _ in range(repeats))
    denormal = min(lib.fp_chain_ns(iters, 1e-40) for _ in range(repeats))
    return denormal / normal
