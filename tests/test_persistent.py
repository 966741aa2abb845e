"""The `persistent` mode's Triton kernels (mnistbench/train/persistent.py) track float64 autograd SGD.

Where cuda is present the kernels run compiled, in this process. Elsewhere they run in Triton's
interpreter on cpu tensors, in a subprocess started with TRITON_INTERPRET=1. Triton 3.8 reads
TRITON_INTERPRET when a function is decorated with @triton.jit (triton.knobs.runtime.interpret,
looked up in os.environ at each access), and triton.language's own helpers (tl.sum, tl.sigmoid,
...) are decorated when triton is first imported: a process that imported triton without it,
as any test that touched torch._inductor has, cannot interpret a kernel that calls them. Setting
it in this process would also leak into the tests that compile with inductor, which reads the
same variable. A subprocess started with it set avoids both; one runs every interpreter case
(~6 s on 2 cores), and each case is still its own test.

Run as a script, this file is that subprocess: `python tests/test_persistent.py OUT.pt`.
"""

import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # the interpreter subprocess: not started by pytest
    sys.path.insert(0, str(REPO / "workflow/scripts"))

from mnistbench.train import modes, nets, persistent  # noqa: E402
from test_environment import pins  # noqa: E402

OK, WHY = persistent.available()
needs_triton = pytest.mark.skipif(not OK, reason=WHY)
DEVICE = "cuda" if torch.cuda.is_available() else "interpreter"
TOL = dict(rtol=1e-4, atol=2e-5)  # as tests/test_modes.py holds every exact mode
# ... and the updates themselves: with the beginner's init (weights ~N(0, 2)) at lr 0.001 a run of
# a few steps moves a weight by ~5e-4, less than TOL's rtol admits on a weight of 8. So the
# change from the start must match too: 1 % of each element's own change, plus a floor for float32
# rounding of weights up to ~8 (ulp 1e-6) over the run; a step left out would exceed it.
UPDATE_TOL = dict(rtol=1e-2, atol=5e-6)


def case(path, batch, steps, loss, init="default", lr=0.5, seed=0, **kw):
    extra = "".join(f"-{k}{'+'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in kw.items())
    name = f"{path}-b{batch}-n{steps}-{loss}-{init}-lr{lr}{extra}"
    return dict(id=name, path=path, batch=batch, steps=steps, loss=loss, init=init, lr=lr, seed=seed, **kw)


CE, MSE = "cross_entropy", "mse_softmax"
# Per-sample SGD at lr 0.5 is chaotic over thousands of steps: runs of tens of steps.
CASES = [
    # One program, all steps in one launch.
    case("steps", 1, 13, CE, seed=1),  # 13: no multiple of anything
    case("steps", 1, 13, MSE, seed=2, calls=(8, 5)),  # two launches: written back, resumed
    case("steps", 1, 13, MSE, "seed", 0.001, seed=3),  # the beginner's experiment
    case("steps", 3, 7, CE, seed=4),
    case("steps", 3, 7, MSE, "seed", 0.001, seed=5),
    case("steps", 37, 3, MSE, seed=6),
    case("steps", 37, 2, CE, "seed", 0.001, seed=7),
    # Kernel A over blocks of rows (the last one partial) + kernel B, one step per call.
    case("fused", 3, 5, CE, seed=8),  # one program, 29 of its 32 rows padding
    case("fused", 3, 5, MSE, "seed", 0.001, seed=9),
    case("fused", 37, 4, MSE, seed=10, block_m=16),  # 3 programs: 16 + 16 + 5 rows
    case("fused", 37, 3, CE, "seed", 0.001, seed=11, block_m=16),
    case("fused", 100, 3, CE, seed=12),  # default block: 32 + 32 + 32 + 4 rows
    case("fused", 100, 3, MSE, seed=13, block_m=64, block_k=32),
]


def inputs(c):
    g = torch.Generator().manual_seed(c["seed"])
    n = c["batch"] * c["steps"]
    x = torch.rand(n, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return nets.init_params(persistent.NETWORK, c["init"], c["seed"]), x, y, F.one_hot(y, 10).float()


def run(c, device):
    """The case through the kernels on `device` ('cpu' under the interpreter): final params."""
    p0, x, _, t = inputs(c)
    p = {k: v.to(device) for k, v in persistent.params(p0).items()}
    x, t = x.to(device), t.to(device)
    b, mse = c["batch"], c["loss"] == MSE
    if c["path"] == "steps":
        done = 0
        for n in c.get("calls", (c["steps"],)):
            rows = slice(done * b, (done + n) * b)
            assert persistent.steps(p, x[rows], t[rows], b, c["lr"], mse) == n
            done += n
    else:
        kw = {k: c[k] for k in ("block_m", "block_k") if k in c}
        buf = persistent.grad_buffer(device)
        for s in range(c["steps"]):
            persistent.fused_step(p, x[s * b : (s + 1) * b], t[s * b : (s + 1) * b], c["lr"], mse, buf, **kw)
        assert not buf.any(), "kernel B must leave the gradient buffer zeroed"
    return {k: v.cpu() for k, v in p.items()}


def reference(c):
    """Plain SGD in float64 with autograd's gradient of the mean loss: the same batches, in order."""
    p0, x, y, _ = inputs(c)
    p, b = {k: v.double() for k, v in p0.items()}, c["batch"]
    for s in range(c["steps"]):
        q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        nets.loss_fn(nets.forward(q, x[s * b : (s + 1) * b].double()), y[s * b : (s + 1) * b], c["loss"]).backward()
        p = {k: (q[k] - c["lr"] * q[k].grad).detach() for k in p}
    return p0, p


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """case -> final params (or the error it raised), from the kernels on DEVICE."""
    if DEVICE == "cuda":
        return lambda c: run(c, "cuda")
    out = tmp_path_factory.mktemp("interp") / "out.pt"
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "workflow/scripts"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, __file__, str(out)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"interpreter subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    got = torch.load(out)

    def result(c):
        r = got[c["id"]]
        if isinstance(r, str):
            pytest.fail(f"{c['id']} under the interpreter raised:\n{r}")
        return r

    return result


@needs_triton
@pytest.mark.slow  # the interpreter subprocess, where there is no GPU
@pytest.mark.parametrize("c", CASES, ids=[c["id"] for c in CASES])
def test_kernels_track_the_float64_reference(c, results):
    p0, ref = reference(c)
    got = results(c)
    moved = max(float((ref[k] - p0[k].double()).abs().max()) for k in persistent.NAMES)
    assert moved > 20 * UPDATE_TOL["atol"], moved  # the reference really trained
    for k in persistent.NAMES:
        torch.testing.assert_close(got[k].double(), ref[k], **TOL, msg=f"{c['id']} {k}")
        start = p0[k].double()
        torch.testing.assert_close(got[k].double() - start, ref[k] - start, **UPDATE_TOL, msg=f"{c['id']} {k} update")


def test_the_module_imports_where_triton_is_missing(monkeypatch):
    import importlib.util

    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now raises ImportError
    spec = importlib.util.spec_from_file_location("persistent_without_triton", persistent.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ok, why = mod.available()
    assert not ok and "triton" in why
    p, x, _, t = inputs(CASES[0])
    with pytest.raises(RuntimeError, match="triton"):
        mod.steps(mod.params(p), x, t, 1, 0.1, False)


@needs_triton
def test_bad_arguments_are_refused_before_any_launch():
    p, x, _, t = inputs(CASES[0])
    p = persistent.params(p)
    with pytest.raises(ValueError, match="whole batches"):
        persistent.steps(p, x[:5], t[:5], 2, 0.1, False)
    with pytest.raises(ValueError, match="w1"):
        persistent.steps(dict(p, w1=p["w1"].t()), x, t, 1, 0.1, False)  # not contiguous
    with pytest.raises(ValueError, match="block_m"):
        persistent.fused_step(p, x, t, 0.1, False, persistent.grad_buffer("cpu"), block_m=8)
    if not persistent.interpreting():
        with pytest.raises(ValueError, match="cuda"):
            persistent.steps(p, x, t, 1, 0.1, False)  # cpu tensors, compiled kernels


def other_triton(why: str):
    """The compile test reads Triton's compiler internals, not its public API. They may change
    with any release: where this Triton is not the pinned one, the test skips saying so; with
    the pinned one (CI's), a difference is a failure to fix here."""
    version = persistent.triton.__version__
    pinned = pins((REPO / "requirements.txt").read_text().splitlines())["triton"]
    message = f"Triton {version} (requirements.txt pins {pinned}): {why}"
    if version == pinned:
        pytest.fail(message)
    pytest.skip(message)


@needs_triton
@pytest.mark.skipif(persistent.interpreting(), reason="the kernels are interpreted in this process")
def test_kernels_compile_for_hopper_in_fp32_with_weights_in_registers(tmp_path):
    """Compiled for sm_90 here, with no GPU needed: catches what the interpreter accepts but the
    compiler does not, TF32 in a product (the interpreter computes every tl.dot in fp32), and a
    batch-1 kernel whose weights no longer fit in registers."""
    import re

    try:
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
        from triton.compiler import ASTSource
    except ImportError as e:
        other_triton(f"its compiler internals differ: {e}")

    target = GPUTarget("cuda", 90, 32)
    w = {k: "*fp32" for k in ("w1_ptr", "b1_ptr", "w2_ptr", "b2_ptr", "w3_ptr", "b3_ptr")}
    xt = {"x_ptr": "*fp32", "t_ptr": "*fp32"}
    kernels = [
        (
            persistent._steps_kernel,
            {**xt, **w, "n_steps": "i32", "lr": "fp32", "BATCH": "constexpr", "MSE": "constexpr"},
            {"BATCH": 1, "MSE": True},
            dict(num_warps=persistent.steps_warps(1), num_stages=1),
        ),
        (
            persistent._grad_kernel,
            {
                **xt,
                **w,
                "g_ptr": "*fp32",
                "n_rows": "i32",
                "MSE": "constexpr",
                "BLOCK_M": "constexpr",
                "BLOCK_K": "constexpr",
            },
            {"MSE": True, "BLOCK_M": persistent.FUSED_BLOCK_M, "BLOCK_K": persistent.FUSED_BLOCK_K},
            dict(num_warps=persistent.FUSED_WARPS),
        ),
        (
            persistent._update_kernel,
            {"g_ptr": "*fp32", **w, "lr": "fp32", "BLOCK": "constexpr"},
            {"BLOCK": persistent.UPDATE_BLOCK},
            dict(num_warps=persistent.UPDATE_WARPS),
        ),
    ]
    for fn, sig, consts, opts in kernels:
        try:
            src = ASTSource(fn=fn, signature=sig, constexprs=consts)
        except TypeError as e:
            other_triton(f"its ASTSource takes other arguments: {e}")
        k = persistent.triton.compile(src, target=target, options=opts)
        precisions = set(re.findall(r"inputPrecision = (\w+)", k.asm["ttgir"]))
        assert precisions <= {"ieee"}, (fn.__name__, precisions)
        if fn is persistent._steps_kernel:
            ptx = tmp_path / "k.ptx"
            ptx.write_text(k.asm["ptx"])
            try:
                ptxas = get_ptxas(90).path
            except (TypeError, AttributeError) as e:
                other_triton(f"its get_ptxas differs: {e}")
            log = subprocess.run(
                [ptxas, "-v", "--gpu-name", "sm_90a", str(ptx), "-o", str(ptx.with_suffix(".cubin"))],
                capture_output=True,
                text=True,
                check=True,
            ).stderr
            assert "0 bytes spill stores" in log, log


@needs_triton
@pytest.mark.skipif(DEVICE != "cuda", reason="needs cuda")
def test_fused_step_replays_in_a_cuda_graph():
    """How the Mode runs it: both launches captured once (modes.capture, which must leave the
    weights where they started), replayed per batch copied in."""
    c = case("fused", 256, 4, MSE, seed=14)
    p0, x, _, t = inputs(c)
    p = {k: v.cuda() for k, v in persistent.params(p0).items()}
    x, t, b = x.cuda(), t.cuda(), c["batch"]
    buf = persistent.grad_buffer("cuda")
    sx, st = x[:b].clone(), t[:b].clone()
    graph = modes.capture(lambda: persistent.fused_step(p, sx, st, c["lr"], True, buf), p)
    for i in range(c["steps"]):
        sx.copy_(x[i * b : (i + 1) * b])
        st.copy_(t[i * b : (i + 1) * b])
        graph.replay()
    _, ref = reference(c)
    for k in persistent.NAMES:
        torch.testing.assert_close(p[k].cpu().double(), ref[k], **TOL, msg=k)


def _interpreter_main(out):
    """The subprocess: every case through the interpreted kernels; a case's error is its result."""
    assert persistent.interpreting(), "start this with TRITON_INTERPRET=1 in the environment"
    got = {}
    for c in CASES:
        try:
            got[c["id"]] = run(c, "cpu")
        except Exception:
            got[c["id"]] = traceback.format_exc()
    torch.save(got, out)


if __name__ == "__main__":
    _interpreter_main(sys.argv[1])
