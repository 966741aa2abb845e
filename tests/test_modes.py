"""Every mode of the ladder trains the same function, for every network it takes: proven against
float64 references on the seed's network, on odd shapes of the family (widths 1, 7 and 300, a
depth of 4) and on a user's own module."""

import math

import pytest
import rounding
import torch
import torch.nn.functional as F
import yaml
from beginner_reference import train_step as beginner_step
from conftest import REPO
from mnistbench.config import catalog, devices, networks
from mnistbench.data import download
from mnistbench.train import kernel, native, nets, runner, trainer
from mnistbench.train.ladder import implementation
from mnistbench.train.modes import Manual, Numpy, Seed
from mnistbench.train.native import nonzero_share
from mnistbench.train.needs import exists

LOSSES = ["mse_softmax", "cross_entropy"]
SEED = "mlp-16-16"
# Shapes that catch what a vectorised or hand-written layer gets wrong: a width of 1 and of 7 (no
# whole vector), 300 (a vector and a tail), and four layers of different widths (the loops over
# layers, each delta from the right weights).
ODD = ["mlp-1", "mlp-7", "mlp-300", "mlp-17-33-5-64"]
USER = "config/cnn.py:Net"  # the example module under config/ (networks.resolve finds it from any directory)
# Every mode on every device this machine has, for the seed's network and the odd shapes: cpu here
# and in CI, cuda/mps where present (run it on a GPU machine beside bench/gpu_check.py:
# bench/README.md). torch.compile takes seconds per test: those are slow, not in the edit loop.
ARCHES = [
    pytest.param(a, marks=pytest.mark.skipif(kernel.cannot_run(a) is not None, reason=str(kernel.cannot_run(a))))
    for a in kernel.ARCHES
]  # the vector code of the modes built from kernel.c, each that this cpu can run (test_kernel.py)
C_MODES = [m for m in catalog.MODES if catalog.MODES[m].needs == "compiler"]
CASES = [
    pytest.param(d, net, m, arch, marks=[pytest.mark.slow] if m == "compiled" else [], id=f"{d}-{net}-{m}{arch}")
    for d in devices.available()
    for net in [SEED, *ODD, USER]
    for m in catalog.MODES
    if exists(m, d, networks.build(trainer.DEFAULTS, net))
    for arch in ([f"-{a}" for a in kernel.ARCHES] if m in C_MODES else [""])
]
# Exact modes compute in float32 (u = 2^-24 = 6e-8) what the reference computes in float64. A sum
# of n products in float32 is within n * u of the sum of its terms' magnitudes, in any order and
# with or without fused multiply-adds (the standard bound, so on every cpu and every library's
# kernels: n <= 784 gives 5e-5 of those magnitudes, typically sqrt(n) * u = 2e-6), and a few steps
# at lr 0.5 carry it along without blowing it up (per-sample SGD does over thousands of steps, see
# tests/test_kernel.py): the weights, O(0.1) to O(1), end within TOL. Measured on cpus with AVX-512
# (native bf16), with AVX2 and with the kernel built for baseline x86-64: at most a tenth of it.
TOL = dict(rtol=1e-4, atol=2e-5)
# Modes that compute in a reduced format (amp: bfloat16 on cpu, float16 or bfloat16 on cuda) land
# as far from float64 as rounding in that format moves this run, which depends on the run and
# not on the cpu: they must end within REACH times the farthest of ROUNDINGS runs whose every
# result in the format was rounded with a random error of the format's unit roundoff
# (tests/rounding.py). REACH allows for a spread estimated from few runs and for kernels that round
# more than once per result (oneDNN's bf16 convolutions on a cpu without native bf16 round partial
# sums: measured 0.3-1.2 of the farthest of 8 on cpus with and without native bf16 and on every
# oneDNN ISA level, over 16 seeds of this test's networks); a gradient 10 % off ends 2.6-46 times
# as far as that, 5 % off 1.4-24 times.
ROUNDINGS = 8
REACH = 2.0
# Plain SGD trains the example CNN at lr 0.1 (config/cnn.py); at 0.5 its steps are chaotic, and a
# few of them amplify any rounding until a wrong gradient and bf16's rounding look alike.
LR = {USER: 0.1}
# `kernel` is built by the machine's C compiler; without one it is `unsupported` (tested below).
needs_cc = pytest.mark.skipif(kernel.compiler() is None, reason="no C compiler to build the kernel mode")


def spec_of(network=SEED, **settings) -> networks.Spec:
    cfg = dict(trainer.DEFAULTS, training=dict(trainer.DEFAULTS["training"], **settings))
    return networks.build(cfg, network)


def batch(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return x, y, torch.nn.functional.one_hot(y, 10).float()


def autograd64(p, x, y, loss):
    p64 = {k: v.detach().double().clone().requires_grad_(True) for k, v in p.items()}
    nets.loss_fn(nets.forward(p64, x.double()), y, loss).backward()
    return {k: v.grad for k, v in p64.items()}


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("network", [SEED, *ODD])
@pytest.mark.parametrize("impl", ["grads", "manual", "numpy"])
def test_hand_gradients_equal_float64_autograd(impl, network, loss):
    s = spec_of(network, loss=loss)
    p = nets.init_params(s.network, "default", 3)
    x, y, t = batch()
    ref = autograd64(p, x, y, loss)
    if impl == "grads":
        got = nets.grads(p, x, t, loss)
    else:
        mode = (Manual if impl == "manual" else Numpy)(s, p, "cpu", len(x))
        mode.backward(x if impl == "manual" else x.numpy(), t if impl == "manual" else t.numpy())
        got = {k: torch.as_tensor(v) for k, v in mode.g.items()}
    assert set(got) == set(nets.names(s.network))
    for k in nets.names(s.network):
        torch.testing.assert_close(got[k].double(), ref[k], rtol=1e-4, atol=1e-6, msg=k)


def test_seed_gradient_is_not_the_true_one_for_mse_softmax():
    """The beginner's dsoftmax keeps only the Jacobian's diagonal: a real difference."""
    s = spec_of(loss="mse_softmax", lr=0.1)
    p = nets.init_params(s.network, "default", 3)
    x, y, t = batch(n=1)
    true_step = {k: v - 0.1 * nets.grads(p, x, t, "mse_softmax")[k] for k, v in p.items()}
    seed = Seed(s, p, "cpu", 1)
    seed.step((x, y, t))
    assert not torch.allclose(seed.params()["w3"], true_step["w3"], atol=1e-7)


def reference_training(p, batches, loss, lr):
    """Plain SGD in float64 with the true gradient: what every exact mode must track."""
    p = {k: v.double() for k, v in p.items()}
    for x, y, _t in batches:
        g = autograd64(p, x, y, loss)
        p = {k: v - lr * g[k] for k, v in p.items()}
    return p


# A float64 reference of a network with kinks (ReLU: which side of 0; max-pool: which of its
# window) holds a float32 run only where each of its choices lies farther from the kink than
# float32 rounding reaches; nearer, float32 goes either way, as the kernels a library picks on that
# cpu decide. KINK, relative to the layer's largest value, is 16 units of float32's roundoff: more
# than the typical error of the sums these layers make (sqrt(150) * 2^-24 = 7e-7 for the 150 terms
# of config/cnn.py's second convolution). The premise is checked, not assumed: a reference nearer
# a kink fails here, on every cpu, instead of failing on some cpus as a mode's error.
KINK = 1e-6


def kink_margin(net: torch.nn.Module) -> list:
    """[smallest margin so far]: forward hooks on `net`'s ReLUs and 2x2 max-pools record how near
    their choices come to a kink, relative to the layer's largest input."""
    margin = [float("inf")]

    def relu(_m, inp, _out):
        z = inp[0].detach()
        margin[0] = min(margin[0], float(z.abs().min() / z.abs().max()))

    def pool(m, inp, _out):
        z = inp[0].detach()
        windows = F.unfold(z.flatten(0, 1).unsqueeze(1), m.kernel_size, stride=m.stride)
        top = windows.topk(2, dim=1).values
        gap = (top[:, 0] - top[:, 1])[top[:, 0] > 0]  # ties among zeros of a ReLU carry no gradient
        if gap.numel():
            margin[0] = min(margin[0], float(gap.min() / z.abs().max()))

    for m in net.modules():
        if isinstance(m, torch.nn.ReLU):
            m.register_forward_hook(relu)
        elif isinstance(m, torch.nn.MaxPool2d):
            m.register_forward_hook(pool)
    return margin


def module_reference(s, state, batches, lr):
    """A user's module trained in float64 with autograd and plain SGD, from `state`; every choice
    at a kink at least KINK from it."""
    net = nets.module(s, state, "cpu").double()
    margin = kink_margin(net)
    for x, y, _t in batches:
        net.zero_grad()
        nets.loss_fn(net(x.double()), y, s.loss).backward()
        with torch.no_grad():
            for v in net.parameters():
                v -= lr * v.grad
    assert margin[0] >= KINK, f"a choice of the float64 run lies {margin[0]:.2g} from its kink: float32 may take either"
    return {k: v.detach() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("device,network,name,arch", CASES)
def test_every_mode_tracks_the_float64_reference(device, network, name, arch, loss, monkeypatch):
    if name == "seed" and loss == "mse_softmax":
        pytest.skip("seed's mse_softmax gradient is the beginner's, checked against the verbatim code")
    if arch:
        why = kernel.cannot_run(arch[1:])
        if why:
            pytest.skip(why)
        monkeypatch.setattr(implementation(name), "ARCH", arch[1:])
    lr = LR.get(network, 0.5)
    s = spec_of(network, loss=loss, lr=lr)
    state = nets.initial_state(s, 7)
    x, y, t = batch(n=48, seed=1)
    home = "cpu" if implementation(name).host_data else device  # as train.py places the data
    data = {"x": x.to(home), "y": y.to(home), "t": t.to(home)}
    perm = torch.randperm(48, generator=torch.Generator().manual_seed(2)).to(home)

    def trained(arithmetic):
        mode = implementation(name)(s, state, device, 8)
        batches = list(mode.epoch(data, perm))
        with arithmetic:
            mode.setup(batches[0])  # must not train
            for b in batches:
                mode.step(b)
        return {k: torch.as_tensor(v).cpu().double() for k, v in mode.params().items()}

    got = trained(rounding.plain())
    perm = perm.cpu()
    ref_batches = [(x[perm[i : i + 8]], y[perm[i : i + 8]], t[perm[i : i + 8]]) for i in range(0, 48, 8)]
    if s.network.family:
        ref = reference_training(state, ref_batches, loss, lr)
    else:
        ref = module_reference(s, state, ref_batches, lr)
    assert set(got) == set(ref)
    moved = {k: float((ref[k] - state[k].double()).abs().max()) for k in ref if state[k].is_floating_point()}
    assert sum(moved.values()) > 1e-3  # the reference really trained
    if catalog.MODES[name].exact:
        for k in ref:
            torch.testing.assert_close(got[k], ref[k], **TOL, msg=f"{name} {k}")
        return
    rounded = rounding.spread(trained, ROUNDINGS)
    for k in moved:
        error = float((got[k] - ref[k]).abs().max())
        reach = max(float((r[k] - ref[k]).abs().max()) for r in rounded)
        assert error <= REACH * reach, (
            f"{name} {k}: {error:.3g} from the reference, {error / reach:.2f} times as far as the farthest "
            f"of {ROUNDINGS} runs rounded at the format's precision ({reach:.3g}); it moved {moved[k]:.3g}"
        )


CONTRACT = [
    pytest.param(d, net, m, marks=[pytest.mark.slow] if m == "compiled" else [], id=f"{d}-{net}-{m}")
    for d in devices.available()
    for net in [SEED, USER]
    for m in catalog.MODES
    if exists(m, d, networks.build(trainer.DEFAULTS, net))
]


@pytest.mark.parametrize("device,network,name", CONTRACT)
def test_every_registered_mode_keeps_the_contract(device, network, name):
    """modes.py's contract, for every mode of the registry that exists here, built and evaluated as
    a train job does (runner.build, nets.evaluate): setup trains nothing, a step returns None or
    its count of steps, params() is named and shaped as the initial state, in float32."""
    cfg = dict(trainer.DEFAULTS, training=dict(trainer.DEFAULTS["training"], lr=LR.get(network, 0.5)))
    s = networks.build(cfg, network)
    mode = runner.build(cfg, s, name, device, 8)
    start = nets.initial_state(s, runner.seed_of(cfg, 0))
    x, y, t = batch(n=48, seed=1)
    home = "cpu" if mode.host_data else device
    items = list(mode.epoch({"x": x.to(home), "y": y.to(home), "t": t.to(home)}, torch.arange(48).to(home)))
    mode.setup(items[0])

    def state():
        return {k: torch.as_tensor(v).detach().cpu() for k, v in mode.params().items()}

    assert {k: torch.equal(v, start[k].cpu()) for k, v in state().items()} == dict.fromkeys(start, True)
    done = [mode.step(item) for item in items]
    assert all(n is None or (isinstance(n, int) and n >= 1) for n in done), done
    assert sum(1 if n is None else n for n in done) == 48 // 8
    after = state()
    assert list(after) == list(start)
    for k, v in after.items():
        assert v.shape == start[k].shape and (v.dtype == torch.float32 or not start[k].is_floating_point()), k
    loss, accuracy = nets.evaluate(s, mode.params(), x.to(device), y.to(device))
    assert math.isfinite(loss) and 0 <= accuracy <= 1
    assert any(not torch.equal(after[k], start[k].cpu()) for k in start)  # it trained


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs cuda")
@pytest.mark.parametrize("loss", LOSSES)
def test_persistent_on_its_graph_path_trains_items_made_before_setup(loss):
    """At batch 8 `persistent` starts looped (one item = a call of many batches); where setup then
    times the replayed graph faster (seen on an H200 with mse_softmax), the items made before it
    still hold many batches: each is trained one batch per replay, in order."""
    s = spec_of(loss=loss, lr=0.5)
    p = nets.init_params(s.network, "default", 7)
    x, y, t = (v.cuda() for v in batch(n=48, seed=1))
    perm = torch.randperm(48, generator=torch.Generator().manual_seed(2)).cuda()
    mode = implementation("persistent")(s, p, "cuda", 8)
    items = list(mode.epoch({"x": x, "y": y, "t": t}, perm))
    mode.setup(items[0])
    mode.looped, mode.steps_per_call = False, 1  # the graph path, whatever setup measured
    assert len(items) == 1 and [mode.step(b) for b in items] == [6]
    perm = perm.cpu()
    ref_batches = [
        (x.cpu()[perm[i : i + 8]], y.cpu()[perm[i : i + 8]], t.cpu()[perm[i : i + 8]]) for i in range(0, 48, 8)
    ]
    ref = reference_training(p, ref_batches, loss, 0.5)
    for k in nets.names(s.network):
        torch.testing.assert_close(torch.as_tensor(mode.params()[k]).cpu().double(), ref[k], **TOL, msg=k)


@pytest.mark.slow  # torch.compile
@pytest.mark.parametrize("network", [SEED, "mlp-17-33-5-64"])
@pytest.mark.parametrize("loss", LOSSES)
def test_compiled_at_batch_1_fuses_steps_and_still_trains_sample_by_sample(loss, network):
    """At batch size 1 on the cpu one compiled call does several steps; the epoch's last item
    holds the steps left over. Every step is still one sample's update, in order."""
    s = spec_of(network, loss=loss, lr=0.5)
    p = nets.init_params(s.network, "default", 5)
    x, y, t = batch(n=13, seed=6)  # 13 = one call of 8 steps + 5 left over
    mode = implementation("compiled")(s, p, "cpu", 1)
    items = list(mode.epoch({"x": x, "y": y, "t": t}, torch.arange(13)))
    assert mode.steps_per_call > 1 and [len(b[0]) for b in items] == [8, 5]
    mode.setup(items[0])  # must not train
    assert [mode.step(b) for b in items] == [8, 5]
    ref = reference_training(p, [(x[i : i + 1], y[i : i + 1], t[i : i + 1]) for i in range(13)], loss, 0.5)
    for k in nets.names(s.network):
        torch.testing.assert_close(mode.params()[k].double(), ref[k], **TOL, msg=k)


@needs_cc
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("network", [SEED, "mlp-7-300"])
@pytest.mark.parametrize("n", [1, 37, 600])
def test_kernel_step_is_one_step_of_the_float64_gradient(n, network, loss, arch, monkeypatch):
    """The C kernel takes rows in blocks, the last one partial, and splits a batch among threads
    (600 rows, 3 threads): one step must still be the whole batch's true gradient, every row
    counted once."""
    s = spec_of(network, loss=loss, lr=100.0)  # a step far above float32 round-off
    p = nets.init_params(s.network, "default", 8)
    x, y, t = batch(n=n, seed=3)
    ref = autograd64(p, x, y, loss)
    monkeypatch.setattr(implementation("kernel"), "ARCH", arch)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        mode = implementation("kernel")(s, p, "cpu", n)
        mode.setup((x, y, t))
        mode.step((x, y, t))
    finally:
        torch.set_num_threads(threads)
    for k in nets.names(s.network):
        got = (p[k].double() - mode.params()[k].double()) / 100.0
        torch.testing.assert_close(got, ref[k], rtol=1e-3, atol=1e-4 * float(ref[k].abs().max()), msg=k)


def mnist_like(n, seed=0, normalised=False):
    """Rows with MNIST's structure: ~80 % of the pixels exactly 0 (a centred blob of strokes),
    as the pipeline's x / 255; `normalised`: then (x - mean) / std, where the background is
    -mean / std, not 0."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.zeros(28, 28)
    centre[4:24, 6:22] = 0.6
    x = torch.rand(n, 784, generator=g) * (torch.rand(n, 784, generator=g) < centre.reshape(-1))
    if normalised:
        x = (x - 0.1307) / 0.3081
    y = torch.randint(0, 10, (n,), generator=g)
    return x.contiguous(), y, torch.nn.functional.one_hot(y, 10).float()


@needs_cc
@pytest.mark.parametrize("normalised", [False, True])
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("network", [SEED, "mlp-7-300"])
@pytest.mark.parametrize("n", [1, 37, 600])
@pytest.mark.parametrize("arch", ARCHES)
def test_sparse_step_is_one_step_of_the_float64_gradient(arch, n, network, loss, normalised, monkeypatch):
    """One step of `sparse` on mostly-background rows (0, or -mean/std once normalised: then W1
    is held as A + u and the forward product uses A's running row sum) is the whole batch's true
    gradient, with the layer-1 update split among threads by columns (600 rows, 3 threads)."""
    s = spec_of(network, loss=loss, lr=100.0)
    p = nets.init_params(s.network, "default", 8)
    x, y, t = mnist_like(n, seed=3, normalised=normalised)
    ref = autograd64(p, x, y, loss)
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    monkeypatch.setattr(implementation("sparse"), "PATHS", ("sparse",))  # not the dense path, whatever is faster
    monkeypatch.setattr(implementation("sparse"), "ARCH", arch)
    try:
        mode = implementation("sparse")(s, p, "cpu", n)
        (item,) = mode.epoch({"x": x, "y": y, "t": t}, torch.arange(n))  # one step: its rows' lists with them
        mode.setup(item)
        mode.step(item)
    finally:
        torch.set_num_threads(threads)
    assert mode.path == "sparse"
    assert mode.background == pytest.approx(-0.1307 / 0.3081 if normalised else 0.0)
    share = nonzero_share(x)  # what a sparse run records of its training inputs
    assert share == pytest.approx(float((x != mode.background).float().mean())) and 0.1 < share < 0.5
    for k in nets.names(s.network):
        got = (p[k].double() - mode.params()[k].double()) / 100.0
        torch.testing.assert_close(got, ref[k], rtol=1e-3, atol=1e-4 * float(ref[k].abs().max()), msg=k)


@needs_cc
@pytest.mark.parametrize("normalised", [False, True])
@pytest.mark.parametrize("network", [SEED, "mlp-17-33-5-64", "mlp-1", "mlp-5-16-3-9"])
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("arch", ARCHES)
def test_sparse_trains_as_kernel_and_float64_over_a_short_run(arch, batch_size, network, normalised, monkeypatch):
    """Several consecutive steps (the mode's calls, an epoch in items): `sparse` ends where
    the float64 reference and `kernel` end, on mostly-background rows. At batch 1 the networks at
    most 16 wide take the kernel's narrow path (mlp-1, the seed's, four odd layers), the others
    the general one."""
    s = spec_of(network, loss="cross_entropy", lr=0.5)
    state = nets.initial_state(s, 4)
    x, y, t = mnist_like(96, seed=5, normalised=normalised)
    data, perm = {"x": x, "y": y, "t": t}, torch.randperm(96, generator=torch.Generator().manual_seed(1))
    got = {}
    monkeypatch.setattr(implementation("sparse"), "PATHS", ("sparse",))
    for name in ("sparse", "kernel"):
        monkeypatch.setattr(implementation(name), "ARCH", arch)
        mode = implementation(name)(s, state, "cpu", batch_size)
        items = list(mode.epoch(data, perm))
        mode.setup(items[0])
        assert sum(mode.step(b) for b in items) == 96 // batch_size
        got[name] = {k: v.double() for k, v in mode.params().items()}
    ref_batches = [
        (x[perm[i : i + batch_size]], y[perm[i : i + batch_size]], t[perm[i : i + batch_size]])
        for i in range(0, 96, batch_size)
    ]
    ref = reference_training(state, ref_batches, "cross_entropy", 0.5)
    assert sum(float((ref[k] - state[k].double()).abs().max()) for k in ref) > 1e-2  # it really trained
    for k in ref:
        torch.testing.assert_close(got["sparse"][k], ref[k], **TOL, msg=f"sparse {k}")
        torch.testing.assert_close(got["sparse"][k], got["kernel"][k], **TOL, msg=f"sparse vs kernel {k}")


@needs_cc
def test_sparse_builds_its_lists_once_and_counts_them_in_its_one_off_cost(monkeypatch):
    """The lists of nonzeros are built the first time an epoch is asked for, timed into
    prepared_s, which runner.setup adds to the setup seconds; later epochs reorder the same lists
    (no rebuild), and each item's lists are its own rows' (the pixels of x that differ from 0)."""
    s = spec_of()
    x, y, t = mnist_like(40, seed=2, normalised=False)
    data = {"x": x, "y": y, "t": t}
    mode = implementation("sparse")(s, nets.initial_state(s, 1), "cpu", 4)
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(3))
    items = list(mode.epoch(data, perm))
    built = mode.prepared_s
    assert built > 0
    monkeypatch.setattr(native.Lists, "of", None)  # a rebuild would fail
    again = list(mode.epoch(data, torch.arange(40)))
    assert mode.prepared_s == built and sum(i[0].shape[0] for i in again) == 40
    monkeypatch.undo()
    x0, lists = items[0][0], items[0][3]
    for r in range(x0.shape[0]):
        entries = slice(int(lists.off[r]), int(lists.off[r + 1]))
        pixels = (x0[r] != 0).nonzero().flatten()
        assert torch.equal(lists.idx[entries].long(), pixels * 16) and torch.equal(lists.val[entries], x0[r][pixels])
    assert runner.setup(mode, items[0], "cpu") >= built


@needs_cc
def test_sparse_running_row_sum_does_not_drift_over_an_epoch():
    """The kernel keeps S = sum_k A[k] as a running row (for a background other than 0) and
    recomputes it at the start of every call (the mode's calls are at most 1024 steps). Measured
    over a whole epoch of 60000 real-size synthetic samples, normalised, at batch 1: run in ONE
    call (no resync, the worst case) S drifts 2.3e-5 of its scale from A's true sum; over one call
    of 1024 steps, 1.2e-6 (float32 round-off). The bounds hold both with room."""
    from mnistbench.data import synthetic

    files = synthetic.make(n_train=60000, n_test=1, seed=2)
    x = torch.from_numpy(files["train-images-idx3-ubyte.gz"].reshape(60000, 784)).float() / 255.0
    x = ((x - x.mean()) / x.std()).contiguous()
    y = torch.from_numpy(files["train-labels-idx1-ubyte.gz"]).long()
    t = torch.nn.functional.one_hot(y, 10).float()
    s = spec_of(loss="cross_entropy", lr=0.05)
    p = nets.init_params(s.network, "default", 1)
    lib = kernel.load()
    background = float(torch.mode(x[:256].reshape(-1)).values)
    assert background != 0.0
    net = native.SparseNet(lib, s.network.sizes, p, 1, background)

    def drift():
        exact = net.wt[0][:784].double().sum(0)
        return float((net.s.double() - exact).abs().max() / exact.abs().max())

    lists = native.Lists.of(x, background, 16)
    net.steps(lists, t, 60000, 1, 0.05, False)
    epoch = drift()
    steps = implementation("kernel").ROWS_PER_CALL
    net.steps(lists, t, steps, 1, 0.05, False)  # one call of the mode: S recomputed at its start
    call = drift()
    print(f"drift of S: {epoch:.3g} after an epoch in one call, {call:.3g} after a call of {steps} steps")
    assert epoch < 1e-4 and call < 1e-5


def test_kernel_without_a_c_compiler_is_unsupported_not_a_crash(monkeypatch):
    from mnistbench.train.modes import Unsupported

    monkeypatch.setenv("CC", "no-such-cc")
    x, y, t = batch(n=4)
    s = spec_of()
    mode = implementation("kernel")(s, nets.init_params(s.network, "default", 0), "cpu", 4)
    with pytest.raises(Unsupported, match="no C compiler: no-such-cc"):
        mode.setup((x, y, t))


def beginner_run(p, xs, ys, lr):
    """The verbatim code on samples one by one; parameters in its own layout (same as nn.Linear)."""
    names = ("w1", "b1", "w2", "b2", "w3", "b3")
    W1, b1, W2, b2, W3, b3 = (p[k].clone() for k in names)
    losses = []
    for x, y in zip(xs, ys):
        W1, b1, W2, b2, W3, b3, loss = beginner_step(x, int(y), W1, b1, W2, b2, W3, b3, lr)
        losses.append(loss)
    return dict(zip(names, (W1, b1, W2, b2, W3, b3))), losses


def test_seed_mode_reproduces_the_verbatim_beginner_code():
    s = spec_of(loss="mse_softmax", lr=0.001)
    p = nets.init_params(s.network, "seed", 11)
    x, y, t = batch(n=6, seed=4)
    ref, losses = beginner_run(p, x, y, lr=0.001)
    mode = Seed(s, p, "cpu", 1)
    for i in range(6):
        mode.step((x[i : i + 1], y[i : i + 1], t[i : i + 1]))
    for k in nets.names(s.network):
        torch.testing.assert_close(mode.params()[k], ref[k], rtol=1e-5, atol=1e-6, msg=k)
    assert mode.last_loss == pytest.approx(losses[-1], rel=1e-4, abs=1e-6)


def test_seed_preset_is_the_original_experiment():
    from snakemake.utils import validate

    cfg = yaml.safe_load((REPO / "config/seed.yaml").read_text())
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))  # fills defaults
    assert cfg["modes"] == ["seed"] and cfg["batch_sizes"] == [1] and cfg["train_samples"] == 60000
    assert cfg["models"] == [SEED]
    m = cfg["training"]
    assert (m["loss"], m["init"], m["lr"]) == ("mse_softmax", "seed", 0.001)
    # Weights and biases from N(0, 2): std 2.
    s = networks.build(cfg, cfg["models"][0])
    p = nets.initial_state(s, runner.seed_of(cfg, 0))
    allv = torch.cat([v.flatten() for v in p.values()])
    assert allv.mean().abs() < 0.1 and allv.std() == pytest.approx(2.0, rel=0.05)
    # The preset's run performs the verbatim code's update, sample by sample.
    x, y, t = batch(n=5, seed=9)
    ref, _ = beginner_run(p, x, y, lr=m["lr"])
    mode = implementation(cfg["modes"][0])(s, p, "cpu", cfg["batch_sizes"][0])
    for b in mode.epoch({"x": x, "y": y, "t": t}, torch.arange(5)):
        mode.step(b)
    for k in nets.names(s.network):
        torch.testing.assert_close(mode.params()[k], ref[k], rtol=1e-5, atol=1e-6, msg=k)


def test_flop_per_sample_of_the_family_is_what_torch_counts():
    """A network of the family counts its arithmetic by formula (networks.Network.flop_per_sample), a
    user's module by torch's FLOP counter (nets.flop_per_sample): on the family the two agree,
    for the seed's network and the odd shapes, so the arithmetic limit means one thing for both."""
    from torch.utils.flop_counter import FlopCounterMode

    for network in [SEED, *ODD]:
        s = spec_of(network)
        p = {k: v.requires_grad_(True) for k, v in nets.init_params(s.network, "default", 8).items()}
        x, y, _ = batch(1, seed=5)
        with FlopCounterMode(display=False) as counter:
            nets.loss_fn(nets.forward(p, x), y, "cross_entropy").backward()
        assert s.network.flop_per_sample() == counter.get_total_flops(), network
    assert spec_of(SEED).network.flop_per_sample() == 52_672
    cnn = spec_of(USER)
    assert nets.flop_per_sample(cnn) > 100 * spec_of("mlp-1").network.flop_per_sample()


def test_initial_weights_and_order_depend_on_repeat_not_mode(tmp_path):
    from mnistbench.data import preload, synthetic

    md5 = synthetic.write(tmp_path / "m", n_train=96, n_test=32)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    # retime=0 here and below: these check the training, not its timing, so a busy machine must
    # not make them wait for it to settle.
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=96, test_samples=32, warmup_steps=1, epochs=2, retime=0)
    quiet = dict(log=lambda m: None)
    for network in (SEED, "mlp-7-30"):
        rows = {
            (mode, r): trainer.train(cfg, tmp_path / "t.pt", "cpu", network, mode, 8, r, **quiet)[0]
            for mode in ["numpy", "module", "seed"]
            for r in (0, 1)
        }
        for r in (0, 1):
            losses = [rows[m, r]["final_loss"] for m in ["numpy", "module", "seed"]]
            assert max(losses) - min(losses) < 1e-5, (network, losses)
        assert abs(rows["module", 0]["final_loss"] - rows["module", 1]["final_loss"]) > 1e-4


def test_nan_loss_is_a_recorded_row_not_a_crash(tmp_path):
    from mnistbench.data import preload, synthetic

    md5 = synthetic.write(tmp_path / "m", n_train=64, n_test=16)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    cfg = dict(trainer.DEFAULTS, min_timed_s=0, train_samples=64, test_samples=16, warmup_steps=1, epochs=1, retime=0)
    cfg["training"] = dict(cfg["training"], lr=1e38, init="seed")
    row, _ = trainer.train(cfg, tmp_path / "t.pt", "cpu", SEED, "manual", 8, 0, log=lambda m: None)
    assert row["status"] == "diverged" and "lr" in row["message"]


@pytest.mark.slow  # torch.compile
def test_a_run_of_compiled_at_batch_1_times_every_step(tmp_path):
    """Through the train job's own code: one step time per training step, leftover included."""
    from mnistbench.data import preload, synthetic
    from mnistbench.train import records

    md5 = synthetic.write(tmp_path / "m", n_train=64, n_test=16)
    download.download(tmp_path / "d", [f"file://{tmp_path}/m/"], md5, log=lambda m: None)
    preload.save_tensors(preload.load_raw(tmp_path / "d"), tmp_path / "t.pt")
    cfg = dict(
        trainer.DEFAULTS, min_timed_s=0, train_samples=20, test_samples=16, warmup_steps=2, epochs=2, retime=0
    )  # 8 + 8 + 4 per epoch
    row, record = trainer.train(cfg, tmp_path / "t.pt", "cpu", SEED, "compiled", 1, 0, log=lambda m: None)
    assert row["status"] == "ok" and record["steps_per_call"] == 8
    assert len(records.step_times(record)) == row["steps"] == 40 and row["timed_steps"] == 38
    # The record keeps each call's time once (calls of 8, 8 and 4 steps per epoch), not once per step.
    assert sum(n for _, n in record["step_times_rle"]) == 40 and len(record["step_times_rle"]) <= 6
