"""Builds kernel.c with the machine's C compiler, once per machine, and loads it with ctypes.

The library is cached in a directory of the temp dir that only this user may write (a library
found in someone else's directory is never loaded), named by a hash of the source, the compiler,
its flags, the host and its cpu: `-march=native` code is only valid on the cpu that built it.
Concurrent jobs each build to their own temp file and rename, so a half-written library is never
loaded. Any failure (no compiler, a build error, a temp dir mounted noexec) is a BuildError
saying why, which the mode turns into an `unsupported` row.
"""

import ctypes
import dataclasses
import hashlib
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import torch

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


_identity = {}


def identity() -> str:
    """The compiler a build uses, as a run depends on it: its command and the first line of its
    `--version` (a compiler upgraded in place builds other code). "" without one."""
    cc = compiler()
    if cc is None:
        return ""
    key = tuple(cc)
    if key not in _identity:
        try:
            r = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30, check=False)
            version = (r.stdout or r.stderr).strip().splitlines()[:1]
        except (OSError, subprocess.TimeoutExpired):
            version = []
        _identity[key] = " ".join([*cc, *version])
    return _identity[key]


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


def _pad16(n: int) -> int:
    return (n + 15) // 16 * 16


class Net:
    """Any network of the family 784 -> w1 -> ... -> wL -> 10 (1 <= L <= 8), trained by kernel.c's
    mlp_steps: sigmoid hidden layers, softmax output, plain SGD on the mean loss, as model.grads.

    `sizes` is the whole chain, (784, w1, ..., wL, 10); `params` holds w1, b1, ..., w{L+1},
    b{L+1} in nn.Linear's layout ([out, in] and [out]), copied here into the kernel's own layout:
    each weight transposed and zero-padded, [pad(in), pad(out)], each bias [pad(out)], every size
    rounded up to a multiple of 16. params() returns views of the real part of that storage, so
    they always show the live weights without a copy.
    """

    def __init__(self, lib: ctypes.CDLL, sizes, params: dict, threads: int):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 3 or len(sizes) > 10 or sizes[0] != 784 or sizes[-1] != 10 or min(sizes) < 1:
            raise ValueError(f"not a network of the family 784 -> 1..8 hidden layers -> 10: {sizes}")
        self.lib, self.sizes, self.threads = lib, sizes, max(1, int(threads))
        self.n_layers = len(sizes) - 1
        self.wt, self.b = [], []
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            w, b = params[f"w{layer}"], params[f"b{layer}"]
            if tuple(w.shape) != (fan_out, fan_in) or tuple(b.shape) != (fan_out,):
                raise ValueError(f"layer {layer}: w {tuple(w.shape)}, b {tuple(b.shape)} for {fan_in} -> {fan_out}")
            wt = torch.zeros(_pad16(fan_in), _pad16(fan_out))
            wt[:fan_in, :fan_out] = w.detach().t()
            bp = torch.zeros(_pad16(fan_out))
            bp[:fan_out] = b.detach()
            self.wt.append(wt)
            self.b.append(bp)
        # The C side's arguments, built once: the arrays of pointers keep the tensors' addresses.
        self._sizes = (ctypes.c_int * len(sizes))(*sizes)
        self._wt = (ctypes.c_void_p * self.n_layers)(*(w.data_ptr() for w in self.wt))
        self._b = (ctypes.c_void_p * self.n_layers)(*(b.data_ptr() for b in self.b))
        self._work = torch.empty(0)

    def work_floats(self, batch: int) -> int:
        """Floats of work memory a step of `batch` rows needs."""
        return self.lib.mlp_work_floats(batch, self.n_layers, self._sizes, self.threads)

    def steps(self, x: torch.Tensor, t: torch.Tensor, n_steps: int, batch: int, lr: float, mse: bool) -> None:
        """n_steps consecutive SGD steps, step s on rows [s*batch, (s+1)*batch) of x [n_steps*batch,
        784] and the one-hot t [n_steps*batch, 10], contiguous float32 rows on the cpu."""
        self._check(x, n_steps, batch)
        _check_rows("t", t, n_steps, batch, 10)
        need = self.work_floats(batch)
        if self._work.numel() < need:
            self._work = torch.empty(need)
        if self._call(x, t, n_steps, batch, lr, mse, self._work) != 0:
            raise ValueError(f"kernel rejected the network {self.sizes}")

    def _check(self, x, n_steps: int, batch: int) -> None:
        _check_rows("x", x, n_steps, batch, 784)

    def _call(self, x, t, n_steps, batch, lr, mse, work):
        return self.lib.mlp_steps(
            x.data_ptr(),
            t.data_ptr(),
            n_steps,
            batch,
            self.n_layers,
            self._sizes,
            self._wt,
            self._b,
            lr,
            bool(mse),
            self.threads,
            work.data_ptr(),
        )

    def params(self) -> dict[str, torch.Tensor]:
        """w1, b1, ... in nn.Linear's layout: views of the live weights, not copies."""
        out = {}
        for layer, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:]), start=1):
            out[f"w{layer}"] = self.wt[layer - 1][:fan_in, :fan_out].t()
            out[f"b{layer}"] = self.b[layer - 1][:fan_out]
        return out


def _check_rows(name: str, a: torch.Tensor, n_steps: int, batch: int, width: int) -> None:
    """a holds the n_steps * batch rows of `width` a call reads: contiguous float32 on the cpu."""
    rows = n_steps * batch
    if a.dtype != torch.float32 or a.device.type != "cpu" or not a.is_contiguous():
        raise ValueError(f"{name} must be contiguous float32 on the cpu")
    if a.dim() != 2 or a.shape[1] != width or a.shape[0] < rows:
        raise ValueError(f"{name} is {tuple(a.shape)}; {n_steps} steps of {batch} need [{rows}, {width}]")


@dataclasses.dataclass(frozen=True)
class Lists:
    """Rows as the `sparse` mode reads them: each row's inputs that differ from a background value
    c, as kernel.c's sparse_steps takes them. Built once per dataset (the mode's own form of the
    data, like a preloaded copy: its cost is the mode's one-off), reordered per epoch as every
    mode's rows are (take), sliced per call (rows): slices share idx and val, off stays absolute."""

    off: torch.Tensor  # int64 [rows + 1]: row r's entries are off[r] .. off[r + 1] of idx and val
    idx: torch.Tensor  # int32: the entry's row of layer 1's weights, pixel x the padded width
    val: torch.Tensor  # float32: x - c at that pixel
    sum: torch.Tensor  # float32 [rows]: the sum of the row's val

    @classmethod
    def of(cls, x: torch.Tensor, c: float, width: int) -> "Lists":
        """The lists of x [rows, 784] (float32 on the cpu) for layer 1 `width` wide. A NaN differs
        from every value, so it is kept: a NaN input reaches the loss as it does in every mode."""
        keep = x != c
        row, pixel = keep.nonzero(as_tuple=True)
        off = torch.zeros(x.shape[0] + 1, dtype=torch.int64)
        torch.cumsum(keep.sum(1), 0, out=off[1:])
        val = (x[row, pixel] - c).float()
        total = torch.zeros(x.shape[0]).index_add_(0, row, val)
        return cls(off, (pixel * _pad16(width)).int(), val, total)

    def __len__(self) -> int:
        return self.sum.shape[0]

    def take(self, order: torch.Tensor) -> "Lists":
        """The rows in `order` (a permutation, or any index of rows), as one contiguous copy."""
        counts = (self.off[1:] - self.off[:-1])[order]
        off = torch.zeros(len(counts) + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=off[1:])
        src = torch.repeat_interleave(self.off[:-1][order] - off[:-1], counts) + torch.arange(int(off[-1]))
        return Lists(off, self.idx[src], self.val[src], self.sum[order].contiguous())

    def rows(self, i: int, j: int) -> "Lists":
        """Rows [i, j): views."""
        return Lists(self.off[i : j + 1], self.idx, self.val, self.sum[i:j])


class SparseNet(Net):
    """Net trained by kernel.c's sparse_steps (the `sparse` mode) on Lists: the same function,
    layer 1 computed over each sample's inputs that differ from a background value c only. Layer
    1's weights are held as W1^T[k] = A[k] + u (kernel.c explains why that is exact for any c): A
    in wt[0], u a row of its own, S = sum_k A[k] a row the kernel recomputes at every call."""

    def __init__(self, lib: ctypes.CDLL, sizes, params: dict, threads: int, c: float = 0.0):
        super().__init__(lib, sizes, params, threads)
        self.c = float(c)
        self.u = torch.zeros(_pad16(self.sizes[1]))  # W1^T = A + u: all of W1 in A to start with
        self.s = torch.zeros(_pad16(self.sizes[1]))

    # steps(lists, t, ...): Net.steps on the rows' Lists (made with this net's c and width), not x.
    def _check(self, lists: Lists, n_steps: int, batch: int) -> None:
        if len(lists) < n_steps * batch:
            raise ValueError(f"{n_steps} steps of {batch} need {n_steps * batch} rows of lists, not {len(lists)}")

    def _call(self, lists, t, n_steps, batch, lr, mse, work):
        ptrs = [a.data_ptr() for a in (lists.off, lists.idx, lists.val, lists.sum, t)]
        args = [n_steps, batch, self.n_layers, self._sizes, self._wt, self._b, self.u.data_ptr(), self.s.data_ptr()]
        return self.lib.sparse_steps(*ptrs, *args, self.c, lr, bool(mse), self.threads, work.data_ptr())

    def params(self) -> dict[str, torch.Tensor]:
        """As Net.params, w1 computed as A + u (a copy; the others are views)."""
        out = super().params()
        fan_in, fan_out = self.sizes[0], self.sizes[1]
        out["w1"] = (self.wt[0][:fan_in, :fan_out] + self.u[:fan_out]).t()
        return out
