"""kernel.c's sgd_steps, many SGD steps per call, held step by step to float64 autograd; and its
generic path (mlp_steps, through native.Net) on networks of every depth and width, held the same.

Called through ctypes the way a mode calls it: contiguous float32 tensors by data_ptr(), W1
passed transposed ([784, 16]). Nothing here depends on speed.
"""

import ctypes
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO
from mnistbench.config import networks
from mnistbench.data import synthetic
from mnistbench.train import kernel, native, nets

SEED = networks.network(networks.SEED_NETWORK)  # the network of sgd_steps, the fast path: 784-16-16-10
NAMES = nets.names(SEED)
pytestmark = pytest.mark.skipif(kernel.compiler() is None, reason="no C compiler to build the kernel")

LOSSES = list(nets.LOSSES)
# As tests/test_modes.py: float32 round-off after a few dozen steps. Per-sample SGD at lr 0.5 is
# chaotic (round-off grows with every step), so those runs stay short.
TOL = dict(rtol=1e-4, atol=2e-5)


@pytest.fixture(scope="module", params=list(kernel.ARCHES))
def lib(request):
    """kernel.c built for each vector ISA (kernel.ARCHES): the native build's paths are those of
    this cpu, the others those kernel.c takes on a cpu with AVX2 or with SSE2 only (the paths differ
    by vector width, see kernel.c's VN_BYTES); what this cpu cannot execute is skipped, saying so."""
    why = kernel.cannot_run(request.param)
    if why:
        pytest.skip(why)
    return kernel.load(request.param)


def test_asking_whether_the_kernel_builds_here_loads_no_torch():
    """Every snakemake call reads the Snakefile, which asks whether this machine builds kernel.c
    (train/needs.py) for each mode of the grid: the answer must not load torch, which took 1.9 s of
    a 4 s dry run of the default config when the ctypes wrappers lived beside the build."""
    imports = [ln for ln in (REPO / "workflow/rules/common.smk").read_text().splitlines() if ln.startswith("from ")]
    ask = "from mnistbench.config import catalog\nfor m in catalog.MODES: needs.why_not(m, 'cpu')"
    code = "\n".join([*imports, ask, "import sys; print('torch' in sys.modules, needs.why_not('kernel', 'cpu'))"])
    env = dict(os.environ, PYTHONPATH=str(REPO / "workflow" / "scripts"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["False", "None"], out.stdout


def data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 784, generator=g)  # dense, as the bench's data
    y = torch.randint(0, 10, (n,), generator=g)
    return x, y, torch.nn.functional.one_hot(y, 10).float()


def reference(p, x, y, batch, loss, lr):
    """Plain SGD in float64 with autograd's gradient, the batches of `batch` rows in order."""
    p = {k: v.double() for k, v in p.items()}
    for i in range(0, len(x), batch):
        p64 = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        nets.loss_fn(nets.forward(p64, x[i : i + batch].double()), y[i : i + batch], loss).backward()
        p = {k: (v - lr * p64[k].grad).detach() for k, v in p.items()}
    return p


def kernel_run(lib, p, x, t, batch, loss, lr, calls, threads=1):
    """sgd_steps called once per entry of `calls` (steps per call) on consecutive rows; returns
    the parameters in model layout. b3 (10 floats) is trained in the head of a 16-float buffer,
    and the kernel's 16-lane vectors must leave the 6 floats after it alone."""
    s = {k: v.clone().contiguous() for k, v in p.items()}
    guard = torch.full((16,), 123.0)
    s["b3"] = guard[:10].copy_(p["b3"])
    w1t = p["w1"].t().contiguous()
    ptrs = [w1t.data_ptr()] + [s[k].data_ptr() for k in NAMES[1:]]
    work = torch.empty(lib.work_floats(threads))
    row = 0
    for n in calls:
        xs, ts = x[row : row + n * batch], t[row : row + n * batch]
        assert xs.is_contiguous() and ts.is_contiguous() and len(xs) == n * batch > 0
        lib.sgd_steps(
            xs.data_ptr(), ts.data_ptr(), n, batch, *ptrs, lr, loss != "cross_entropy", threads, work.data_ptr()
        )
        row += n * batch
    assert row == len(x)
    assert torch.equal(guard[10:], torch.full((6,), 123.0)), "wrote past b3"
    s["w1"] = w1t.t()
    return s


def assert_tracks(got, ref, p, moved_at_least):
    moved = sum(float((ref[k] - p[k].double()).abs().max()) for k in NAMES)
    assert moved > moved_at_least  # the reference really trained
    for k in NAMES:
        torch.testing.assert_close(got[k].double(), ref[k], **TOL, msg=k)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("init,lr,steps", [("default", 0.5, 37), ("seed", 0.001, 100)])
def test_batch_1_run_in_one_call_tracks_float64_sgd(lib, init, lr, steps, loss):
    """One call, one sample per step: every step sees the weights its predecessor left, the first
    and the last sample of the call included. 'seed' is the beginner's init and lr
    (config/seed.yaml): saturated sigmoids, small steps, so a longer run."""
    p = nets.init_params(SEED, init, 4)
    x, y, t = data(steps, seed=1)
    got = kernel_run(lib, p, x, t, 1, loss, lr, [steps])
    assert_tracks(got, reference(p, x, y, 1, loss, lr), p, 1e-3)


@pytest.mark.parametrize("loss", LOSSES)
def test_batch_1_run_split_into_calls_of_any_size(lib, loss):
    """Calls of 1, 2, 7 and 27 steps (none a multiple of another): a run is the same whether it
    is one call or many, each call picking up the weights the last one left."""
    p = nets.init_params(SEED, "default", 5)
    x, y, t = data(37, seed=2)
    got = kernel_run(lib, p, x, t, 1, loss, 0.5, [1, 2, 7, 27])
    assert_tracks(got, reference(p, x, y, 1, loss, 0.5), p, 1e-3)
    whole = kernel_run(lib, p, x, t, 1, loss, 0.5, [37])
    for k in NAMES:
        torch.testing.assert_close(got[k], whole[k], **TOL, msg=k)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("batch,steps,threads", [(16, 6, 1), (16, 6, 2), (600, 3, 3)])
def test_batches_of_many_rows_step_by_step(lib, batch, steps, threads, loss):
    """batch > 1: each step the mean gradient of its rows. 600 rows on 3 threads: each step's
    rows split among threads (kernel.c's MIN_ROWS keeps 16 rows on one)."""
    p = nets.init_params(SEED, "default", 6)
    x, y, t = data(batch * steps, seed=3)
    got = kernel_run(lib, p, x, t, batch, loss, 0.5, [2, steps - 2], threads=threads)
    assert_tracks(got, reference(p, x, y, batch, loss, 0.5), p, 1e-2)


def test_a_call_of_no_steps_changes_nothing(lib):
    p = nets.init_params(SEED, "default", 7)
    x, _, t = data(2, seed=4)
    s = {k: v.clone().contiguous() for k, v in p.items()}
    w1t = p["w1"].t().contiguous()
    ptrs = [w1t.data_ptr()] + [s[k].data_ptr() for k in NAMES[1:]]
    work = torch.empty(lib.work_floats(1))
    for batch in (1, 2):
        lib.sgd_steps(x.data_ptr(), t.data_ptr(), 0, batch, *ptrs, 0.5, 0, 1, work.data_ptr())
    s["w1"] = w1t.t()
    for k in NAMES:
        assert torch.equal(s[k], p[k]), k


def test_fma_rate_is_a_rate_and_the_limit_follows_from_it(lib):
    """fma_gflops divides its work by its own clock: four times the iterations, about the same
    rate, not 4x or 1/4 of it (the best of calls made in turn, so that a neighbour's time slices
    fall on both alike and do not decide)."""
    calls = [(lib.fma_gflops(200_000), lib.fma_gflops(800_000)) for _ in range(5)]
    short, long = (max(c[i] for c in calls) for i in (0, 1))
    assert short > 0 and 1 / 3 < long / short < 3, (short, long)
    rate = kernel.fma_gflops(iters=200_000, repeats=3)
    # The limit takes the native build's rate, which may be several times a narrower build's
    # (this `lib`): compared with the best rate the native build gives here (the rate's own calls
    # may have been slowed).
    best = max(kernel.load().fma_gflops(200_000) for _ in range(3))
    assert math.isfinite(rate) and best / 4 < rate < best * 4, (rate, best)


# ---- The generic path (mlp_steps through native.Net): any network 784 -> w1..wL -> 10 ----------

# Widths that are not multiples of the 16-float pad or of any vector (1, 7, 17, 33, 5), one wider
# than the batch-1 path's strips (300), the seed's hidden shape, depth 8, and a hidden-to-hidden
# layer large enough for few rows' backward product to be taken transposed (300 -> 100).
HIDDEN = [(1,), (7,), (300,), (16, 16), (17, 33, 5, 64), (3,) * 8, (300, 100)]
# (rows per step, steps per call, threads): batch 1 as the mode runs it (many steps in one call)
# and split into calls of any size; batches whose rows split among threads or not. 12 steps at
# batch 1: per-sample SGD at lr 0.5 is chaotic, and after 20 steps of 784-300-10 float32 autograd
# itself is outside TOL of float64.
RUNS = {
    "bs1-one-call": (1, [12], 1),
    "bs1-calls": (1, [1, 2, 4, 5], 3),
    "b9-threads": (9, [2, 3], 3),
    "b37": (37, [1, 3], 1),
    "b37-threads": (37, [1, 3], 3),
    "b600-threads": (600, [2, 1], 3),
}


def mlp_init(sizes, seed):
    """nn.Linear's init for every layer, in train/nets.py's parameter names (w1, b1, ...)."""
    g = torch.Generator().manual_seed(seed)
    p = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        bound = fan_in**-0.5
        p[f"w{i}"] = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=g)
        p[f"b{i}"] = torch.empty(fan_out).uniform_(-bound, bound, generator=g)
    return p


def mlp_reference(p, x, y, batch, loss, lr):
    """Plain SGD in float64 with autograd's gradient of a general MLP: Linear layers, sigmoid
    between them, nets.loss_fn on the logits (the mean over the batch)."""
    layers = len(p) // 2
    p = {k: v.double() for k, v in p.items()}
    for i in range(0, len(x), batch):
        p64 = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        a = x[i : i + batch].double()
        for layer in range(1, layers + 1):
            a = torch.addmm(p64[f"b{layer}"], a, p64[f"w{layer}"].t())
            a = torch.sigmoid(a) if layer < layers else a
        nets.loss_fn(a, y[i : i + batch], loss).backward()
        p = {k: (v - lr * p64[k].grad).detach() for k, v in p.items()}
    return p


def net_run(lib, sizes, p, x, t, batch, loss, lr, calls, threads=1):
    """native.Net trained by one steps() call per entry of `calls` (steps per call) on consecutive
    rows; returns the Net, after checking that every pad of its storage is still exactly 0."""
    net = native.Net(lib, sizes, p, threads)
    row = 0
    for n in calls:
        net.steps(x[row : row + n * batch], t[row : row + n * batch], n, batch, lr, loss != "cross_entropy")
        row += n * batch
    assert row == len(x)
    for layer, (wt, b) in enumerate(zip(net.wt, net.b)):
        fan_in, fan_out = sizes[layer], sizes[layer + 1]
        assert wt.shape[0] % 16 == 0 and wt.shape[1] % 16 == 0 and b.shape[0] == wt.shape[1]
        assert not wt[fan_in:].any() and not wt[:, fan_out:].any() and not b[fan_out:].any(), (
            f"pad of layer {layer + 1}"
        )
    return net


def assert_tracks_all(got, ref, p, moved_at_least):
    moved = sum(float((ref[k] - p[k].double()).abs().max()) for k in p)
    assert moved > moved_at_least  # the reference really trained
    assert got.keys() == ref.keys()
    for k in ref:
        torch.testing.assert_close(got[k].double(), ref[k], **TOL, msg=k)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("hidden", HIDDEN, ids=lambda h: "-".join(map(str, h)))
def test_generic_path_tracks_float64_sgd(lib, hidden, run, loss):
    """Every step of every run the float64 autograd step, at lr 0.5 (runs at batch 1 stay short,
    see TOL); the pads stay 0 (net_run)."""
    batch, calls, threads = RUNS[run]
    sizes = (784, *hidden, 10)
    p = mlp_init(sizes, 9)
    x, y, t = data(batch * sum(calls), seed=10)
    net = net_run(lib, sizes, p, x, t, batch, loss, 0.5, calls, threads)
    assert_tracks_all(net.params(), mlp_reference(p, x, y, batch, loss, 0.5), p, 1e-3)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("batch,calls,threads", [(1, [37], 1), (16, [2, 4], 1), (600, [2, 1], 3)])
def test_generic_path_on_the_seed_shape_is_the_fast_path(lib, batch, calls, threads, loss):
    """On 784-16-16-10 both paths take the same steps, float32 round-off aside."""
    p = nets.init_params(SEED, "default", 11)
    x, _, t = data(batch * sum(calls), seed=12)
    fast = kernel_run(lib, p, x, t, batch, loss, 0.5, calls, threads)
    generic = net_run(lib, SEED.sizes, p, x, t, batch, loss, 0.5, calls, threads).params()
    for k in NAMES:
        torch.testing.assert_close(generic[k], fast[k], **TOL, msg=k)


def test_net_params_are_live_views_in_nn_linear_layout(lib):
    sizes = (784, 20, 10)
    p = mlp_init(sizes, 13)
    net = native.Net(lib, sizes, p, 1)
    before = net.params()
    for k in p:
        assert before[k].shape == p[k].shape and torch.equal(before[k], p[k]), k
    assert before["w1"].untyped_storage().data_ptr() == net.wt[0].untyped_storage().data_ptr()
    x, _, t = data(3, seed=14)
    net.steps(x, t, 3, 1, 0.5, False)
    after = net.params()
    for k in p:
        assert torch.equal(before[k], after[k]), k  # the views taken before show the new weights
    assert not torch.equal(after["w2"], p["w2"])


def test_a_call_of_no_steps_changes_nothing_in_the_generic_path(lib):
    sizes = (784, 5, 10)
    p = mlp_init(sizes, 15)
    net = native.Net(lib, sizes, p, 1)
    x, _, t = data(2, seed=16)
    for batch in (1, 2):
        net.steps(x, t, 0, batch, 0.5, False)
    for k, v in net.params().items():
        assert torch.equal(v, p[k]), k


@pytest.mark.parametrize("sizes", [(784, 10), (784, 16, 9), (783, 16, 10), (784, 0, 10), (784, *(3,) * 9, 10)], ids=str)
def test_shapes_outside_the_family_are_refused(lib, sizes):
    """784 -> 1..8 hidden layers of at least one unit -> 10, nothing else: Net refuses the rest
    before the kernel sees them, and the kernel itself does nothing with them."""
    p = mlp_init([max(s, 1) for s in sizes], 17)
    with pytest.raises(ValueError, match="family"):
        native.Net(lib, sizes, p, 1)
    c_sizes = (ctypes.c_int * len(sizes))(*sizes)
    assert lib.mlp_work_floats(1, len(sizes) - 1, c_sizes, 1) == -1
    assert lib.mlp_steps(0, 0, 1, 1, len(sizes) - 1, c_sizes, 0, 0, 0.5, 0, 1, 0) == -1


# ---- denormal numbers: every call computes with them flushed, and leaves the threads as it found them


def flush_calls(lib):
    """{name: a call} for every entry point a mode calls, each on a path that runs in the calling
    thread alone (batch 1) and on one that splits its work among a team of 2 threads (batch 256)."""
    seed, x, t = nets.init_params(SEED, "default", 8), *data(256, seed=6)[::2]
    calls = {}
    for batch in (1, 256):
        steps = 256 // batch
        calls[f"sgd_steps batch {batch}"] = lambda b=batch: kernel_run(
            lib, seed, x, t, b, "cross_entropy", 0.5, [256 // b], 2
        )
        for net in ("mlp-16-16", "mlp-64-48"):
            spec = networks.network(net)
            mlp = native.Net(lib, spec.sizes, nets.init_params(spec, "default", 9), 2)
            calls[f"mlp_steps {net} batch {batch}"] = lambda n=mlp, s=steps, b=batch: n.steps(x, t, s, b, 0.5, False)
            sparse = native.SparseNet(lib, spec.sizes, nets.init_params(spec, "default", 10), 2)
            rows = native.Lists.of(torch.where(x > 0.5, x, 0.0), 0.0, spec.sizes[1])
            calls[f"sparse_steps {net} batch {batch}"] = lambda n=sparse, r=rows, s=steps, b=batch: n.steps(
                r, t, s, b, 0.5, False
            )
    return calls


@pytest.mark.parametrize("torch_flushes", [False, True], ids=["torch computes denormals", "torch flushes them"])
def test_every_call_flushes_denormals_in_every_thread_and_restores_the_callers_state(lib, torch_flushes):
    """Inside every call each place that computes (the calling thread, each thread of a team) has
    flush-to-zero and denormals-are-zero set; after it, the calling thread's state is torch's own
    again (as torch.set_flush_denormal left it, either way) and so is the pool's."""
    if not lib.fp_flushes():
        pytest.skip("kernel.c cannot set the flush state on this cpu (neither x86 nor aarch64)")
    if not torch.set_flush_denormal(torch_flushes):
        pytest.skip("torch cannot flush denormals on this cpu")
    watch, seen, noted = (ctypes.c_int.in_dll(lib, name) for name in ("fp_watch", "fp_seen", "fp_noted"))
    try:
        mine, team = lib.fp_mode(), lib.fp_team_mode(2)
        assert mine == (3 if torch_flushes else 0)  # the premise: torch's setting is this thread's state
        for name, call in flush_calls(lib).items():
            seen.value, noted.value, watch.value = 3, 0, 1
            try:
                call()
            finally:
                watch.value = 0
            assert noted.value > 0 and seen.value == 3, (name, noted.value, seen.value)
            assert lib.fp_mode() == mine and lib.fp_team_mode(2) == team, name
            # torch's own arithmetic in this thread is as before: 1e-39 survives unless torch flushes
            assert (torch.full((1,), 1e-39) * 2).item() == (0.0 if torch_flushes else pytest.approx(2e-39, rel=1e-3))
    finally:
        torch.set_flush_denormal(False)


def test_per_sample_sgd_on_handwriting_like_digits_meets_denormal_numbers():
    """The premise of the flush: per-sample SGD at lr 0.5 on MNIST-like data saturates hidden units
    until their derivatives and the updates they scale fall below float32's smallest normal
    number. With flushing off, one batch-1 epoch of the kernel raises the cpu's denormal or
    underflow flag: they occur in this workload on any cpu, also on one that computes them at
    full speed, where no timing would show it."""
    lib = kernel.load()
    if not lib.fp_flushes():
        pytest.skip("kernel.c cannot read the status flags on this cpu (neither x86 nor aarch64)")
    x, y = synthetic.digits(16384, seed=0)
    t = torch.nn.functional.one_hot(y, 10).float()
    net = native.Net(lib, SEED.sizes, nets.init_params(SEED, "default", 0), 1)
    kernel.flush_denormals(lib, False)
    lib.fp_status(1)
    try:
        net.steps(x, t, len(x), 1, 0.5, False)
    finally:
        raised = lib.fp_status(1)
        kernel.flush_denormals(lib, True)
    assert raised, "no denormal operand and no underflow in an epoch: the workload no longer saturates"
