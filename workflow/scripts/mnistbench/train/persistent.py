"""Triton kernels for the cuda-only `persistent` mode: SGD steps without per-step launch cost.

Two paths, both training the function of `manual` (true gradient of the mean loss over the batch,
plain SGD, every gradient of a step computed before any weight of that step changes):

* `steps(p, x, t, batch, lr, mse)`: ONE launch of ONE program runs n = len(x) // batch
  consecutive steps (step s uses rows [s*batch, (s+1)*batch) of x and t). The weights are loaded
  into registers once, stay there for all n steps and are written back at the end. For batch 1
  and small batches, where a step is ~1 us of arithmetic and any launch costs more.
* `fused_step(p, x, t, lr, mse, grad_buf)`: one step of a large batch in two launches that read
  the batch from memory once. Kernel A (many programs, BLOCK_M rows each) does forward, backward
  and its rows' weight gradients and adds them into `grad_buf` with atomics; kernel B applies
  SGD and zeroes `grad_buf`. No host sync, no allocation: both launches can be captured in one
  CUDA graph and replayed.

Parameters: the dict of `model` (w1, b1, w2, b2, w3, b3), contiguous float32 tensors in
nn.Linear layout ([out, in]) on one device, updated in place. Triton shapes are powers of two:
784 inputs are padded to 1024 and 10 classes to 16 inside the kernels (masked loads, padded
weights zero, padded logits -inf); nothing padded is ever stored.

The module imports where Triton is missing: `available()` says whether the kernels can run. The
kernels compile for cuda; with TRITON_INTERPRET=1 in the environment before Triton is first
imported, the same kernels run on cpu tensors in Triton's interpreter (how the tests check them
on machines without a GPU, in a subprocess: tests/test_persistent.py).
"""

import itertools
import math

import torch

from mnistbench.config import networks
from mnistbench.train import nets

try:
    import triton
    import triton.language as tl

    _IMPORT_ERROR = None
except Exception as e:  # not installed, or a broken install: the kernels cannot run here
    _IMPORT_ERROR = f"triton cannot be imported: {type(e).__name__}: {e}"

    class _NoTriton:
        """Lets the kernel definitions below execute (never launch) where Triton is missing."""

        @staticmethod
        def constexpr(v=None):
            return v

        @staticmethod
        def jit(fn=None, **kw):
            return fn if fn is not None else (lambda f: f)

    triton = tl = _NoTriton()

# The one network these kernels train (catalog.MODES says so): its shapes are compiled in.
NETWORK = networks.network(networks.SEED_NETWORK)
NAMES = nets.names(NETWORK)
SIZES = NETWORK.sizes
SHAPES = {f"w{i}": (o, n) for i, (n, o) in enumerate(zip(SIZES, SIZES[1:]), 1)}
SHAPES.update({f"b{i}": (o,) for i, o in enumerate(SIZES[1:], 1)})
# grad_buf: the gradients of all six parameters in one flat float32 buffer, in NAMES order, each
# in its parameter's layout.
_NUMEL = [math.prod(SHAPES[k]) for k in NAMES]
OFFSETS = dict(zip(NAMES, itertools.accumulate([0, *_NUMEL[:-1]])))
GRAD_NUMEL = sum(_NUMEL)  # 13002


# Launch defaults; keyword arguments of the launchers, so a caller can measure others.
# steps: W1 as a [16, 1024] fp32 tile is 64 KB = 16K registers, 32 per thread at 16 warps (512
# threads, which may use at most 128 registers each: 64K per SM). ptxas for sm_90 (Triton 3.8):
# batch 1 at 16 warps uses 128 registers, no spill; with batch > 1 the step's gradient tile G1
# (another 64 KB) lives beside W1 and 16 warps spill a little (72-156 bytes), 8 warps use 208-230
# of their 255 registers and do not. So 16 warps at batch 1 (more warps to hide the latency of a
# chain of dependent cross-warp reductions), 8 above it.
def steps_warps(batch: int) -> int:
    return 16 if batch == 1 else 8


# fused_step: 32 rows per program, a K loop of 64 columns: per iteration an x chunk [32, 64] and a
# W1^T chunk [64, 16], brought in by cp.async three stages deep (Triton's software pipelining);
# 190 registers, no spill, 24 KB shared memory. A batch of 4096 gives 128 programs, about one
# per SM of an H200 (132), each streaming 100 KB of x; 256 gives 8 (that step is latency-bound
# anyway; block_m=16 doubles its programs). Each program adds 13002 gradient values with
# relaxed atomics (kernel B runs after kernel A in stream order, so no fence is needed): 1.6 M
# atomics at batch 4096, a cost that halves with every doubling of block_m and that only
# measuring on the GPU can weigh against the parallelism lost.
FUSED_BLOCK_M = 32
FUSED_BLOCK_K = 64
FUSED_WARPS = 4
UPDATE_BLOCK = 1024
UPDATE_WARPS = 4

K_IN = tl.constexpr(784)
K_PAD = tl.constexpr(1024)
HID = tl.constexpr(16)
N_CLS = tl.constexpr(10)
C_PAD = tl.constexpr(16)
# Offsets of each gradient in grad_buf, as constexprs for the kernels.
G_W1 = tl.constexpr(OFFSETS["w1"])
G_B1 = tl.constexpr(OFFSETS["b1"])
G_W2 = tl.constexpr(OFFSETS["w2"])
G_B2 = tl.constexpr(OFFSETS["b2"])
G_W3 = tl.constexpr(OFFSETS["w3"])
G_B3 = tl.constexpr(OFFSETS["b3"])


def available() -> tuple[bool, str]:
    """(True, '') if the kernels can be launched in this process; else (False, why)."""
    if _IMPORT_ERROR is not None:
        return False, _IMPORT_ERROR
    return True, ""


def interpreting() -> bool:
    """True if the kernels were defined under TRITON_INTERPRET=1 (they then run on cpu tensors)."""
    return _IMPORT_ERROR is None and not isinstance(_steps_kernel, triton.runtime.JITFunction)


# --- one sample: forward and backward on registers ----------------------------------------------


@triton.jit
def _sample(w1, b1, w2, b2, w3, b3, x, t, n, MSE: tl.constexpr):
    """One row's activations and deltas, the gradient of the batch's MEAN loss (hence / n).

    w1 [16, 1024], x [1024], w2 [16, 16], w3 [16, 16] (rows >= 10 zero), b3 and t [16] (zero
    beyond 10). Matrix-vector products as broadcast + reduce: at one row nothing is big enough for
    tl.dot (whose operands must be >= 16 in every dimension)."""
    a1 = tl.sigmoid(tl.sum(w1 * x[None, :], axis=1) + b1)  # [16]
    a2 = tl.sigmoid(tl.sum(w2 * a1[None, :], axis=1) + b2)  # [16]
    z3 = tl.sum(w3 * a2[None, :], axis=1) + b3  # [16], 10 real classes
    z3 = tl.where(tl.arange(0, C_PAD) < N_CLS, z3, float("-inf"))
    e = tl.exp(z3 - tl.max(z3, axis=0))
    s = e / tl.sum(e, axis=0)  # 0 on padded classes
    if MSE:
        g = 2.0 * (s - t) / n  # dL/ds
        d3 = s * (g - tl.sum(g * s, axis=0))  # the full softmax Jacobian
    else:
        d3 = (s - t) / n
    d2 = tl.sum(w3 * d3[:, None], axis=0) * a2 * (1.0 - a2)  # old W3
    d1 = tl.sum(w2 * d2[:, None], axis=0) * a1 * (1.0 - a1)  # old W2
    return a1, a2, d3, d2, d1


# --- path 1: many steps in one program ----------------------------------------------------------

# Triton compiles a variant per value class of an int argument (1, multiple of 16, other) and per
# 16-byte alignment of a pointer. A row of t is 40 bytes, so the chunks of an epoch would
# alternate between aligned and not, and a leftover call of 1 step would be new: each a compile
# (about a second) in the middle of a timed epoch. So no specialisation on those; a row of x is
# 3136 = 196 * 16 bytes, so its chunks are all aligned and keep the vectorised loads. One kernel
# per (batch, loss, num_warps), compiled by the first call.
_GENERIC = dict(do_not_specialize_on_alignment=["t_ptr"])


@triton.jit(do_not_specialize=["n_steps"], **_GENERIC)
def _steps_kernel(
    x_ptr,
    t_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    w3_ptr,
    b3_ptr,
    n_steps,
    lr,
    BATCH: tl.constexpr,
    MSE: tl.constexpr,
):
    """n_steps SGD steps of BATCH rows each, in row order, by one program.

    The weights live in registers from the first step to the last: per step the only memory
    traffic is the batch's x and t rows (3 KB per row), and the next row is loaded while the
    current one computes (x_nxt below), so its global-memory latency hides behind a row's chain
    of dependent reductions. A step is then that chain: three matrix-vector products reduced
    across warps, the softmax, two transposed products, the rank-1 updates; expected a few us on
    an H200 against ~50 us for a CUDA-graph replay of eager `module`."""
    k = tl.arange(0, K_PAD)
    h = tl.arange(0, HID)
    c = tl.arange(0, C_PAD)
    km = k < K_IN
    cm = c < N_CLS
    w1 = tl.load(w1_ptr + h[:, None] * K_IN + k[None, :], mask=km[None, :], other=0.0)  # [16, 1024]
    b1 = tl.load(b1_ptr + h)
    w2 = tl.load(w2_ptr + h[:, None] * HID + h[None, :])  # [16, 16]
    b2 = tl.load(b2_ptr + h)
    w3 = tl.load(w3_ptr + c[:, None] * HID + h[None, :], mask=cm[:, None], other=0.0)  # [16, 16]
    b3 = tl.load(b3_ptr + c, mask=cm, other=0.0)

    total = n_steps * BATCH
    x = tl.load(x_ptr + k, mask=km & (total > 0), other=0.0)
    t = tl.load(t_ptr + c, mask=cm & (total > 0), other=0.0)
    for s in range(n_steps):
        row = s * BATCH
        # Prefetch the next row (the next step's first when BATCH == 1).
        nxt = (row + 1).to(tl.int64)
        x_nxt = tl.load(x_ptr + nxt * K_IN + k, mask=km & (nxt < total), other=0.0)
        t_nxt = tl.load(t_ptr + nxt * N_CLS + c, mask=cm & (nxt < total), other=0.0)
        a1, a2, d3, d2, d1 = _sample(w1, b1, w2, b2, w3, b3, x, t, BATCH, MSE)
        # The step's gradient; its first row assigns (no zeroed accumulator: at batch 1 the
        # compiler fuses G1 into the update, W1 -= lr * d1 x^T, with no extra pass over W1).
        g1 = d1[:, None] * x[None, :]
        g2 = d2[:, None] * a1[None, :]
        g3 = d3[:, None] * a2[None, :]
        gb1, gb2, gb3 = d1, d2, d3
        for r in range(1, BATCH):  # the batch's other rows, with the same (old) weights
            x, t = x_nxt, t_nxt
            nxt = (row + r + 1).to(tl.int64)
            x_nxt = tl.load(x_ptr + nxt * K_IN + k, mask=km & (nxt < total), other=0.0)
            t_nxt = tl.load(t_ptr + nxt * N_CLS + c, mask=cm & (nxt < total), other=0.0)
            a1, a2, d3, d2, d1 = _sample(w1, b1, w2, b2, w3, b3, x, t, BATCH, MSE)
            g1 += d1[:, None] * x[None, :]
            g2 += d2[:, None] * a1[None, :]
            g3 += d3[:, None] * a2[None, :]
            gb1 += d1
            gb2 += d2
            gb3 += d3
        w1 -= lr * g1
        b1 -= lr * gb1
        w2 -= lr * g2
        b2 -= lr * gb2
        w3 -= lr * g3
        b3 -= lr * gb3
        x, t = x_nxt, t_nxt

    tl.store(w1_ptr + h[:, None] * K_IN + k[None, :], w1, mask=km[None, :])
    tl.store(b1_ptr + h, b1)
    tl.store(w2_ptr + h[:, None] * HID + h[None, :], w2)
    tl.store(b2_ptr + h, b2)
    tl.store(w3_ptr + c[:, None] * HID + h[None, :], w3, mask=cm[:, None])
    tl.store(b3_ptr + c, b3, mask=cm)


# --- path 2: one large-batch step, fused ----------------------------------------------------------


@triton.jit(do_not_specialize=["n_rows"], **_GENERIC)
def _grad_kernel(
    x_ptr,
    t_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    w3_ptr,
    b3_ptr,
    g_ptr,
    n_rows,
    MSE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Kernel A: forward, backward and the weight gradients of rows [pid*BLOCK_M, +BLOCK_M),
    added into g_ptr (grad_buf). Rows past n_rows read as zeros and contribute nothing.

    x is streamed twice per program in BLOCK_K-column chunks: for Z1 = X W1^T, then for
    dW1 = D1^T X after the backward pass. The second pass re-reads the program's own 100 KB just
    read, from L1/L2: HBM sees the batch once. Products are tl.dot with input_precision="ieee"
    (fp32 FMA, not TF32: TF32's 10-bit mantissa would break the float32 equivalence the tests
    hold every mode to; the step is bandwidth-bound anyway)."""
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rm = rows < n_rows
    h = tl.arange(0, HID)
    c = tl.arange(0, C_PAD)
    cm = c < N_CLS
    kk = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * K_IN

    z1 = tl.zeros([BLOCK_M, HID], dtype=tl.float32)
    for k0 in range(0, K_IN, BLOCK_K):
        kc = k0 + kk
        km = kc < K_IN
        xc = tl.load(x_rows + kc[None, :], mask=rm[:, None] & km[None, :], other=0.0)  # [M, K]
        w1t = tl.load(w1_ptr + h[None, :] * K_IN + kc[:, None], mask=km[:, None], other=0.0)  # [K, 16]
        z1 = tl.dot(xc, w1t, z1, input_precision="ieee")
    a1 = tl.sigmoid(z1 + tl.load(b1_ptr + h)[None, :])  # [M, 16]
    w2 = tl.load(w2_ptr + h[:, None] * HID + h[None, :])  # [out, in]
    w2t = tl.trans(w2)
    a2 = tl.sigmoid(tl.dot(a1, w2t, input_precision="ieee") + tl.load(b2_ptr + h)[None, :])
    w3 = tl.load(w3_ptr + c[:, None] * HID + h[None, :], mask=cm[:, None], other=0.0)  # [16 cls, 16]
    z3 = tl.dot(a2, tl.trans(w3), input_precision="ieee") + tl.load(b3_ptr + c, mask=cm, other=0.0)[None, :]
    z3 = tl.where(cm[None, :], z3, float("-inf"))
    e = tl.exp(z3 - tl.max(z3, axis=1)[:, None])
    s = e / tl.sum(e, axis=1)[:, None]
    t = tl.load(t_ptr + rows.to(tl.int64)[:, None] * N_CLS + c[None, :], mask=rm[:, None] & cm[None, :], other=0.0)
    if MSE:
        g = 2.0 * (s - t) / n_rows
        d3 = s * (g - tl.sum(g * s, axis=1)[:, None])
    else:
        d3 = (s - t) / n_rows
    d3 = tl.where(rm[:, None], d3, 0.0)  # padded rows: zero delta, so zero gradient everywhere
    d2 = tl.dot(d3, w3, input_precision="ieee") * a2 * (1.0 - a2)
    d1 = tl.dot(d2, w2, input_precision="ieee") * a1 * (1.0 - a1)

    g3 = tl.dot(tl.trans(d3), a2, input_precision="ieee")  # [16 cls, 16]
    tl.atomic_add(g_ptr + G_W3 + c[:, None] * HID + h[None, :], g3, mask=cm[:, None], sem="relaxed")
    tl.atomic_add(g_ptr + G_B3 + c, tl.sum(d3, axis=0), mask=cm, sem="relaxed")
    g2 = tl.dot(tl.trans(d2), a1, input_precision="ieee")
    tl.atomic_add(g_ptr + G_W2 + h[:, None] * HID + h[None, :], g2, sem="relaxed")
    tl.atomic_add(g_ptr + G_B2 + h, tl.sum(d2, axis=0), sem="relaxed")
    tl.atomic_add(g_ptr + G_B1 + h, tl.sum(d1, axis=0), sem="relaxed")
    d1t = tl.trans(d1)  # [16, M]
    for k0 in range(0, K_IN, BLOCK_K):
        kc = k0 + kk
        km = kc < K_IN
        xc = tl.load(x_rows + kc[None, :], mask=rm[:, None] & km[None, :], other=0.0)
        g1 = tl.dot(d1t, xc, input_precision="ieee")  # [16, K]
        tl.atomic_add(g_ptr + G_W1 + h[:, None] * K_IN + kc[None, :], g1, mask=km[None, :], sem="relaxed")


@triton.jit
def _apply(p_ptr, g_ptr, offs, numel, lr):
    m = offs < numel
    p = tl.load(p_ptr + offs, mask=m)
    g = tl.load(g_ptr + offs, mask=m)
    tl.store(p_ptr + offs, p - lr * g, mask=m)
    tl.store(g_ptr + offs, tl.zeros_like(g), mask=m)


@triton.jit
def _update_kernel(g_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, w3_ptr, b3_ptr, lr, BLOCK: tl.constexpr):
    """Kernel B: p -= lr * grad for all six parameters, and grad_buf back to zero for the next
    step. Programs 0 .. cdiv(12544, BLOCK)-1 take a block of W1 each; the last one the rest."""
    pid = tl.program_id(0)
    if pid < (K_IN * HID + BLOCK - 1) // BLOCK:
        _apply(w1_ptr, g_ptr + G_W1, pid * BLOCK + tl.arange(0, BLOCK), K_IN * HID, lr)
    else:
        _apply(b1_ptr, g_ptr + G_B1, tl.arange(0, HID), HID, lr)
        _apply(w2_ptr, g_ptr + G_W2, tl.arange(0, HID * HID), HID * HID, lr)
        _apply(b2_ptr, g_ptr + G_B2, tl.arange(0, HID), HID, lr)
        _apply(w3_ptr, g_ptr + G_W3, tl.arange(0, C_PAD * HID), N_CLS * HID, lr)
        _apply(b3_ptr, g_ptr + G_B3, tl.arange(0, C_PAD), N_CLS, lr)


# --- host side ----------------------------------------------------------------------------------


def _check(p, x, t):
    ok, why = available()
    if not ok:
        raise RuntimeError(why)
    for k in NAMES:
        v = p[k]
        if tuple(v.shape) != SHAPES[k] or v.dtype != torch.float32 or not v.is_contiguous():
            raise ValueError(
                f"{k}: need a contiguous float32 tensor of shape {SHAPES[k]}, got "
                f"{v.dtype} {tuple(v.shape)} contiguous={v.is_contiguous()}"
            )
        if v.device != x.device:
            raise ValueError(f"{k} is on {v.device}, x on {x.device}")
    for name, v, cols in (("x", x, 784), ("t", t, 10)):
        if v.dim() != 2 or v.shape[1] != cols or v.dtype != torch.float32 or not v.is_contiguous():
            raise ValueError(f"{name}: need contiguous float32 [N, {cols}], got {v.dtype} {tuple(v.shape)}")
    if x.shape[0] != t.shape[0] or t.device != x.device:
        raise ValueError("x and t must have the same rows, on the same device")
    if x.device.type != "cuda" and not interpreting():
        raise ValueError(f"the kernels run on cuda tensors (or under TRITON_INTERPRET=1), not {x.device}")


def params(p: dict) -> dict:
    """A copy of `p` the launchers accept: contiguous float32, same device and layout."""
    return {k: p[k].detach().float().contiguous().clone() for k in NAMES}


def steps(p: dict, x, t, batch: int, lr: float, mse: bool, num_warps: int | None = None) -> int:
    """len(x) // batch SGD steps in one launch, in row order; updates p in place. Returns the
    number of steps. len(x) must be a multiple of batch. Asynchronous on cuda, like any launch.

    Any batch size runs; a step costs about `batch` times a batch-1 step (the rows of a step go
    through the program one after another) and each new batch size compiles its own kernel, so
    it is meant for small batches (<= ~32): above that `fused_step` spreads rows over the SMs."""
    if batch < 1 or x.shape[0] % batch:
        raise ValueError(f"{x.shape[0]} rows are not whole batches of {batch}")
    _check(p, x, t)
    n = x.shape[0] // batch
    if n:
        _steps_kernel[(1,)](
            x,
            t,
            p["w1"],
            p["b1"],
            p["w2"],
            p["b2"],
            p["w3"],
            p["b3"],
            n,
            float(lr),
            BATCH=batch,
            MSE=bool(mse),
            num_warps=num_warps or steps_warps(batch),
            num_stages=1,  # no software pipelining: the kernel prefetches the next row itself
        )
    return n


def grad_buffer(device) -> torch.Tensor:
    """The zeroed float32 gradient buffer `fused_step` needs (GRAD_NUMEL values, OFFSETS). Kernel
    B leaves it zeroed after every step, so one buffer serves a whole run (and a CUDA graph)."""
    return torch.zeros(GRAD_NUMEL, dtype=torch.float32, device=device)


def fused_step(
    p: dict,
    x,
    t,
    lr: float,
    mse: bool,
    grad_buf,
    block_m: int = FUSED_BLOCK_M,
    block_k: int = FUSED_BLOCK_K,
    num_warps: int = FUSED_WARPS,
) -> None:
    """One SGD step on the whole batch x [B, 784], t [B, 10]: updates p in place. Two launches,
    no host sync, no allocation; grad_buf from grad_buffer(), zero on entry and on exit."""
    if block_m < 16 or block_m & (block_m - 1) or block_k < 16 or block_k & (block_k - 1):
        raise ValueError("block_m and block_k: powers of two >= 16 (tl.dot's smallest tile)")
    _check(p, x, t)
    if grad_buf.numel() != GRAD_NUMEL or grad_buf.dtype != torch.float32 or grad_buf.device != x.device:
        raise ValueError("grad_buf: use grad_buffer(device)")
    n = x.shape[0]
    if n == 0:
        return
    w = (p["w1"], p["b1"], p["w2"], p["b2"], p["w3"], p["b3"])
    _grad_kernel[(triton.cdiv(n, block_m),)](
        x, t, *w, grad_buf, n, MSE=bool(mse), BLOCK_M=block_m, BLOCK_K=block_k, num_warps=num_warps
    )
    _update_kernel[(triton.cdiv(784 * 16, UPDATE_BLOCK) + 1,)](
        grad_buf, *w, float(lr), BLOCK=UPDATE_BLOCK, num_warps=UPDATE_WARPS
    )
