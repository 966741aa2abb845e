"""The mode ladder: each network, trained by implementations from the beginner's code to the fastest.

The contract of a mode, written here only (tests/test_modes.py holds every registered mode to it,
through the train job's own builder and evaluation):

    mode = ladder.implementation(name)(spec, state, device, batch_size, models_at_once)   # runner.build
    mode.setup(item)       # one-off cost (compile, graph capture, build), timed apart; never trains
    for item in mode.epoch(data, perm):
        mode.step(item)    # None for one training step, or the int count of the steps it did
    mode.params()          # {name: float32 tensor or array} named and shaped as nets.initial_state

`spec` (networks.Spec) is the network and its training settings (loss, lr, ...), `state` its
initial parameters (nets.initial_state): every mode of a repeat starts from the same. With
models_at_once = K > 1 (a mode whose registry entry takes it) `state` holds K copies stacked along
a first dimension, every step trains each copy on the same batch, and params() returns them
stacked the same way: copy i must end as it would trained alone. A mode that
does several steps per call (`compiled`, `kernel` and `sparse` at small batch sizes) yields that
many steps' samples per item. `data` holds x [N, 784] float32, y [N] int64 and t [N, 10] one-hot
float32 on the device (or on the host for `dataloader`); `perm` is the epoch's sample order; an
item is the tuple of one call's rows (a mode may add its own form of them, as `sparse` its lists).
Every mode computes the true gradient of the mean loss over the batch, except `seed`, which
reproduces the beginner's code, diagonal-only softmax derivative included.

To add a mode: its class here (or in native.py where its step is a hand-written kernel), its
entry in the registry catalog.MODES (name, order, device kinds, networks, settings, colour), its
words in the docs (README.md, config/README.md: tests/test_docs.py checks them); tests/test_modes.py
then proves it against float64 and the contract.
"""

import getpass
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from mnistbench.config import devices, networks
from mnistbench.train import nets
from mnistbench.train.needs import Unsupported
from mnistbench.train.stacked import Stacked


class Mode:
    steps_per_call = 1  # training steps per call of step()
    host_data = False  # True: the data stays in host memory and each batch is copied (dataloader)
    prepared_s = 0.0  # seconds spent building a form of the data of the mode's own (sparse): one-off

    def __init__(self, s: networks.Spec, state: dict, device: str, batch_size: int, models_at_once: int = 1):
        self.spec, self.device, self.batch_size, self.models = s, device, batch_size, models_at_once
        self.loss, self.lr = s.loss, s.lr
        self.p = {k: v.detach().to(device).clone() for k, v in state.items()}

    def epoch(self, data, perm):
        """Items of one epoch in `perm` order, each the samples of steps_per_call whole batches (the
        last item may hold fewer); the reordering happens here, before any clock runs."""
        x, y, t = data["x"][perm], data["y"][perm], data["t"][perm]
        n = len(perm) - len(perm) % self.batch_size  # whole batches only
        c = self.batch_size * self.steps_per_call
        return ((x[i : i + c], y[i : i + c], t[i : i + c]) for i in range(0, n, c))

    def setup(self, batch):
        pass

    def step(self, batch):
        raise NotImplementedError

    def params(self) -> dict:
        return self.p


# --- the beginner's code ------------------------------------------------------------------------
# Written the way the original was: small helper functions, derivatives that recompute the
# forward function, new tensors every step, and the loss of every sample computed by a second
# forward pass after the update and fetched with .item() (a host sync per step, on purpose).


def _sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def _dsigmoid(x):
    return _sigmoid(x) * (1 - _sigmoid(x))


def _softmax(x):
    return torch.exp(x) / torch.sum(torch.exp(x), dim=-1, keepdim=True)


def _dsoftmax(x):
    # Only the diagonal of the softmax Jacobian: the beginner's bug, kept on purpose.
    return _softmax(x) * (1 - _softmax(x))


class Seed(Mode):
    """Its weights as the beginner held them: one (W, b) pair per layer, each step making new ones."""

    def __init__(self, *args):
        super().__init__(*args)
        self.layers = [(self.p[f"w{i}"], self.p[f"b{i}"]) for i in range(1, len(self.p) // 2 + 1)]

    def _forward(self, x):
        """The pre-activations of every hidden layer, the activations (the input first) and the
        output layer's z."""
        zs, acts = [], [x]
        for W, b in self.layers[:-1]:
            z = acts[-1] @ W.T + b
            zs.append(z)
            acts.append(_sigmoid(z))
        W, b = self.layers[-1]
        return zs, acts, acts[-1] @ W.T + b

    def step(self, batch):
        x, y, _ = batch
        target = F.one_hot(y, 10).float()
        zs, acts, z = self._forward(x)
        out = _softmax(z)
        if self.loss == "cross_entropy":
            d = (out - target) / len(x)
        else:
            d = 2 * (out - target) / len(x) * _dsoftmax(z)
        lr, new = self.lr, []
        for i in range(len(self.layers) - 1, -1, -1):
            W, b = self.layers[i]
            new.append((W - lr * (d.T @ acts[i]), b - lr * d.sum(0)))
            if i > 0:
                d = (d @ W) * _dsigmoid(zs[i - 1])
        self.layers = new[::-1]
        out = _softmax(self._forward(x)[-1])
        if self.loss == "cross_entropy":
            loss = -(target * torch.log(out)).sum(-1).mean()
        else:
            loss = ((out - target) ** 2).sum(-1).mean()
        self.last_loss = loss.item()

    def params(self):
        return {f"{k}{i}": v for i, (W, b) in enumerate(self.layers, 1) for k, v in (("w", W), ("b", b))}


# --- correct hand-written backprop --------------------------------------------------------------


class Manual(Mode):
    """True gradients by hand into preallocated buffers, in-place SGD: no allocation per step. K
    copies at once: every buffer gains a first dimension of K and each matrix product is a batched
    one (bmm), the input shared by all copies (an expanded view, not K copies of it)."""

    def __init__(self, *args):
        super().__init__(*args)
        b, dev, sizes, k = self.batch_size, self.device, self.spec.network.sizes, self.models
        lead = (k,) if k > 1 else ()
        e = lambda *shape: torch.empty(*lead, *shape, device=dev)  # noqa: E731
        self.a = [e(b, w) for w in sizes[1:-1]]  # hidden activations
        self.d = [e(b, w) for w in sizes[1:]]  # every layer's delta
        self.h = [e(b, w) for w in sizes[1:-1]]  # sigmoid's derivative of each hidden layer
        self.s, self.r, self.u = e(b, sizes[-1]), e(b, 1), e(b, sizes[-1])
        self.g = {k: torch.empty_like(v) for k, v in self.p.items()}
        # Per layer: its weight, bias and their gradients (updated in place, so named once here).
        names = [(f"w{i}", f"b{i}") for i in range(1, len(sizes))]
        # A copy's bias broadcast over the batch's rows: [K, 1, width] for K copies.
        bias = (lambda v: v.unsqueeze(1)) if k > 1 else (lambda v: v)  # noqa: E731
        self.layers = [(self.p[w], bias(self.p[b]), self.g[w], self.g[b]) for w, b in names]
        self.mm, self.addmm = (torch.bmm, torch.baddbmm) if k > 1 else (torch.mm, torch.addmm)

    def backward(self, x, t):
        """Fill self.g with the gradients of the mean loss at (x, t)."""
        layers, n, s, mm, addmm = self.layers, x.shape[0], self.s, self.mm, self.addmm
        if self.models > 1:
            x, t = x.expand(self.models, *x.shape), t.expand(self.models, *t.shape)
        acts = [x, *self.a]
        for (w, b, _, _), a_in, a in zip(layers, acts, self.a):
            addmm(b, a_in, w.mT, out=a).sigmoid_()
        w, b, _, _ = layers[-1]
        addmm(b, acts[-1], w.mT, out=s)
        torch.softmax(s, dim=-1, out=s)
        d = self.d[-1]
        if self.loss == "cross_entropy":
            torch.sub(s, t, out=d).div_(n)
        else:
            torch.sub(s, t, out=d).mul_(2.0 / n)  # dL/ds
            torch.sum(torch.mul(d, s, out=self.u), dim=-1, keepdim=True, out=self.r)
            d.sub_(self.r).mul_(s)
        for i in range(len(layers) - 1, -1, -1):
            w, _, gw, gb = layers[i]
            a = acts[i]
            mm(d.mT, a, out=gw)
            torch.sum(d, -2, out=gb)
            if i > 0:
                h = torch.addcmul(a, a, a, value=-1.0, out=self.h[i - 1])
                d = mm(d, w, out=self.d[i - 1]).mul_(h)

    def step(self, batch):
        x, _, t = batch
        self.backward(x, t)
        for k, v in self.p.items():
            v.sub_(self.g[k], alpha=self.lr)


# --- autograd -----------------------------------------------------------------------------------


class Autograd(Mode):
    def __init__(self, *args):
        super().__init__(*args)
        for v in self.p.values():
            v.requires_grad_(True)

    def step(self, batch):
        x, y, _ = batch
        nets.loss_fn(nets.forward(self.p, x), y, self.loss).backward()
        with torch.no_grad():
            for v in self.p.values():
                v.sub_(v.grad, alpha=self.lr)
                v.grad = None

    def params(self):
        return {k: v.detach() for k, v in self.p.items()}


# --- nn.Module + torch.optim --------------------------------------------------------------------


def sgd(params, s: networks.Spec, fused: bool = False) -> torch.optim.SGD:
    """The optimiser of every mode that trains with torch.optim, built here only: plain SGD with the
    training settings of `s` (a setting the config gains is set here, for all of them) over
    `params` (a module's parameters, or K copies' stacked ones: SGD updates each element alone, so
    one step over the stack is each copy's own step). `fused`: one kernel for the whole update (amp
    on cuda, where it reads the GradScaler's flag on the device)."""
    return torch.optim.SGD(list(params), lr=s.lr, fused=fused or None)


class SoftmaxMSELoss(nn.Module):
    """The beginner's loss as a module: squared error of softmax vs one-hot, summed over classes
    (`stacked`: for K copies under vmap, which runs an in-place scatter_ copy by copy)."""

    def __init__(self, stacked: bool = False):
        super().__init__()
        self.stacked = stacked

    def forward(self, z, y):
        # Not F.one_hot: no device->host sync, so it can live in a CUDA graph. One model keeps
        # scatter_ (a comparison cost it 5 % of a batch-1 step, measured).
        if self.stacked:
            t = (y.unsqueeze(1) == torch.arange(z.shape[-1], device=z.device)).to(z.dtype)
        else:
            t = torch.zeros_like(z).scatter_(1, y.unsqueeze(1), 1.0)
        return (torch.softmax(z, dim=1) - t).square().sum(1).mean()


def criterion(loss: str, models_at_once: int) -> nn.Module:
    """The loss module of the modes that train an nn.Module, built here only."""
    return nn.CrossEntropyLoss() if loss == "cross_entropy" else SoftmaxMSELoss(stacked=models_at_once > 1)


class Module(Mode):
    """The network as an nn.Module (nn.Linear layers for the family, a user's own class) trained
    with torch.optim.SGD: the way a tutorial writes it. K copies at once through torch.func
    (Stacked), one SGD step over all of them."""

    def __init__(self, *args):
        super().__init__(*args)
        self.criterion = criterion(self.loss, self.models)
        if self.models > 1:
            self.stack = Stacked(self.spec, self.p, self.device, self.criterion, self.models)
            self.opt = sgd(self.stack.params.values(), self.spec)
            return
        self.net = nets.module(self.spec, self.p, self.device)
        self.opt = sgd(self.net.parameters(), self.spec)

    def train(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        if self.models > 1:
            self.stack.backward(x, y)
        else:
            self.criterion(self.net(x), y).backward()
        self.opt.step()

    def step(self, batch):
        x, y, _ = batch
        self.train(x, y)

    def params(self):
        return self.stack.state() if self.models > 1 else nets.module_state(self.spec, self.net)


class DataLoaderMode(Module):
    """`module` fed the way most tutorials do: a DataLoader over host memory, one copy per batch."""

    host_data = True

    def epoch(self, data, perm):
        ds = torch.utils.data.TensorDataset(data["x"], data["y"])
        b = self.batch_size
        order = perm.tolist()
        batches = [order[i : i + b] for i in range(0, len(order) - b + 1, b)]
        pin = devices.traits(self.device).pinned_memory
        loader = torch.utils.data.DataLoader(ds, batch_sampler=batches, pin_memory=pin, num_workers=0)
        return ((x.to(self.device, non_blocking=pin), y.to(self.device, non_blocking=pin), None) for x, y in loader)


def _sgd_step_one(p, x, t, loss, lr):
    """One SGD step on one sample (x [1, 784], t [1, 10]) of a family network, the true gradient of
    `nets.grads` with its matrix products written as broadcasts: at one sample they are
    matrix-vector and outer products, and in this form inductor fuses each gradient into its
    weight's update (no gradient buffer, no BLAS call). Every gradient is computed before any
    weight changes."""
    ws = nets.layers(p)
    acts = [x[0]]
    for w, b in ws[:-1]:
        acts.append(torch.sigmoid((w * acts[-1]).sum(1) + b))
    w, b = ws[-1]
    d = nets.output_delta(torch.softmax((w * acts[-1]).sum(1) + b, dim=0)[None], t, loss, 1)[0]
    deltas = []
    for i in range(len(ws), 0, -1):
        deltas.append((i, d))
        if i > 1:
            a = acts[i - 1]
            d = (d[:, None] * ws[i - 1][0]).sum(0) * a * (1.0 - a)
    for i, d in deltas:
        w, b = ws[i - 1]
        w.sub_(d[:, None] * acts[i - 1], alpha=lr)
        b.sub_(d, alpha=lr)


def _compile_afresh() -> None:
    # Each mode object compiles its own graphs from an empty in-memory state: torch.compile's
    # recompile limit (8) counts every earlier compile of the same function in the process, which
    # a process of many runs (the profile job, a warm worker) would pass, and a setup time would
    # depend on what ran before. Inductor's disk cache stays: a second run compiles warm.
    torch.compiler.reset()
    # Inductor generates C++ for the vector ISA that ATEN_CPU_CAPABILITY allows, but its disk cache
    # does not tell code generated under one capability from another's: a process under `avx2`
    # loaded what one under `avx512` had cached and trained to NaN (torch 2.14, measured). Each
    # capability set by hand gets a cache folder of its own inside inductor's.
    capability = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if capability:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # a uid without a name: inductor's own default says uid_N
            user = f"uid_{os.getuid()}"
        base = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
        own = f"aten-{capability}"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = base if os.path.basename(base) == own else os.path.join(base, own)
    # Compile in this process: inductor's pool of compile processes each import torch first,
    # which for the few small graphs of these networks costs more than it saves (2-core machine,
    # one process compiling every batch size from a warm cache: 5.7-5.8 s against 7.4 s).
    try:
        import torch._inductor.config as inductor

        inductor.compile_threads = 1
    except (ImportError, AttributeError):  # another torch: its default stands
        pass


class Compiled(Mode):
    """The whole step (hand-derived gradients + SGD update) as one function through torch.compile;
    a user's module is compiled as a tutorial does it (torch.compile(net), then autograd and
    torch.optim.SGD).

    A compiled call costs ~27 µs of host time before any work (guards, wrappers: measured with an
    empty compiled function on the 2-core dev machine), most of a batch-1 step on the cpu. So at
    batch size 1 on the cpu, UNROLL consecutive steps of a family network go into one compiled
    call: still one sample and one update per step, in order, only without a Python round trip
    between them. (On cuda the cure for per-call cost is graph replay: the `cudagraph` mode.)
    """

    UNROLL = 8

    def __init__(self, *args):
        super().__init__(*args)
        if not self.spec.network.family:
            self.criterion = criterion(self.loss, self.models)
            _compile_afresh()
            if self.models > 1:  # the copies' gradients in one compiled call (vmap of grad)
                self.stack = Stacked(self.spec, self.p, self.device, self.criterion, self.models)
                self.stack.grads = torch.compile(self.stack.grads, dynamic=False)
                self.opt = sgd(self.stack.params.values(), self.spec)
                return
            self.net = nets.module(self.spec, self.p, self.device)
            self.opt = sgd(self.net.parameters(), self.spec)
            self.cnet = torch.compile(self.net, dynamic=False)
            return
        loss, lr, b = self.loss, self.lr, self.batch_size
        one = devices.is_cpu(self.device) and b == 1 and self.models == 1
        self.steps_per_call = self.UNROLL if one else 1
        # K copies: the hand-derived gradients of every copy at once (vmap), in the same graph.
        grads = torch.func.vmap(nets.grads, in_dims=(0, None, None, None)) if self.models > 1 else nets.grads

        def sgd_step(p, x, t):
            if one:
                return _sgd_step_one(p, x, t, loss, lr)
            g = grads(p, x, t, loss)
            for k in p:
                p[k].sub_(g[k], alpha=lr)

        def sgd_steps(p, xs, ts):  # unrolled by torch.compile: one graph for all of them
            for i in range(0, xs.shape[0], b):
                sgd_step(p, xs[i : i + b], ts[i : i + b])

        _compile_afresh()
        self.fn = torch.compile(sgd_steps, fullgraph=True, dynamic=False)
        self.fn_last = torch.compile(sgd_step, fullgraph=True, dynamic=False) if one else None

    def setup(self, batch):
        # Compile without training: on copies of the parameters (a family network), or on the
        # module whose weights are put back afterwards (a user's); every function the epoch may
        # need, so nothing compiles inside a timed loop.
        x, y, t = batch
        b = self.batch_size
        try:
            if not self.spec.network.family and self.models > 1:
                self.stack.grads(self.stack.params, x[:b], y[:b])  # gradients only: trains nothing
                return
            if not self.spec.network.family:
                saved = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
                self._module_step(x[:b], y[:b])
                self.net.load_state_dict(saved)
                return
            if x.shape[0] == b * self.steps_per_call:
                self.fn({k: v.clone() for k, v in self.p.items()}, x, t)
            if self.fn_last is not None:
                self.fn_last({k: v.clone() for k, v in self.p.items()}, x[:b], t[:b])
        except Exception as e:  # inductor raises many types; all mean "cannot compile here"
            raise Unsupported(f"torch.compile failed on {self.device}: {' '.join(str(e).split())[:200]}") from e

    def _module_step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        if self.models > 1:
            self.stack.backward(x, y)
        else:
            self.criterion(self.cnet(x), y).backward()
        self.opt.step()

    def step(self, batch):
        x, y, t = batch
        if not self.spec.network.family:
            self._module_step(x, y)
            return None
        n = x.shape[0] // self.batch_size
        if n == self.steps_per_call:
            self.fn(self.p, x, t)
        else:  # the epoch's last few steps
            b = self.batch_size
            for i in range(0, x.shape[0], b):
                self.fn_last(self.p, x[i : i + b], t[i : i + b])
        return n

    def params(self):
        if self.spec.network.family:
            return self.p
        return self.stack.state() if self.models > 1 else nets.module_state(self.spec, self.net)


class Amp(Module):
    """`module` under autocast: bf16 on cpu; on cuda fp16 with a GradScaler, or bf16 (config)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.kind = devices.kind(self.device)
        if not devices.is_cpu(self.device):
            # The fused SGD reads the scaler's overflow flag on the device; with the default one
            # GradScaler.step fetches it to the host (a sync every step).
            self.opt = sgd(self.net.parameters(), self.spec, fused=True)
        self.dtype = devices.autocast_dtype(self.device, self.spec.training["amp_dtype"])
        self.scaler = torch.amp.GradScaler(self.kind, enabled=self.dtype == torch.float16)

    def step(self, batch):
        x, y, _ = batch
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.kind, dtype=self.dtype):
            loss = self.criterion(self.net(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()


def capture(step, params: dict):
    """`step()` captured once as a CUDA graph and returned, for replay. It runs a few times first on
    a side stream (as the CUDA graphs docs require; compiled kernels compile there, outside the
    capture), which trains: `params` are put back afterwards, so every mode starts from the same
    weights."""
    saved = {k: v.detach().clone() for k, v in params.items()}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    with torch.no_grad():
        for k, v in params.items():
            v.copy_(saved[k])
    return graph


class CudaGraph(Module):
    """The whole `module` step captured once as a CUDA graph and replayed: one launch per step."""

    def setup(self, batch):
        x, y, _ = batch
        self.sx, self.sy = x.clone(), y.clone()
        self.graph = capture(self.train_step, self.params())

    def train_step(self):
        # set_to_none (Module.train): inside the capture, backward allocates the gradients in the
        # graph's pool.
        self.train(self.sx, self.sy)

    def step(self, batch):
        x, y, _ = batch
        self.sx.copy_(x)
        self.sy.copy_(y)
        self.graph.replay()


class Numpy(Mode):
    """Hand-written forward/backward in NumPy float32, preallocated buffers, in-place SGD. K copies
    at once: every array gains a first dimension of K and np.matmul multiplies them as a stack."""

    def __init__(self, *args):
        super().__init__(*args)
        self.np = {k: v.numpy() for k, v in self.p.items()}  # shares memory with self.p
        b, sizes, k = self.batch_size, self.spec.network.sizes, self.models
        lead = (k,) if k > 1 else ()
        e = lambda *shape: np.empty((*lead, *shape), dtype=np.float32)  # noqa: E731
        self.a = [e(b, w) for w in sizes[1:-1]]  # hidden activations
        self.d = [e(b, w) for w in sizes[1:]]  # every layer's delta
        self.h = [e(b, w) for w in sizes[1:-1]]  # sigmoid's derivative of each hidden layer
        self.s, self.r, self.u = e(b, sizes[-1]), e(b, 1), e(b, sizes[-1])
        self.g = {k: np.empty_like(v) for k, v in self.np.items()}
        # Per layer: its weight, bias and their gradients (updated in place, so named once here).
        names = [(f"w{i}", f"b{i}") for i in range(1, len(sizes))]
        # A copy's bias broadcast over the batch's rows: [K, 1, width] for K copies.
        bias = (lambda v: v[:, None, :]) if k > 1 else (lambda v: v)  # noqa: E731
        self.layers = [(self.np[w], bias(self.np[b]), self.g[w], self.g[b]) for w, b in names]

    def epoch(self, data, perm):
        x, t = data["x"][perm].numpy(), data["t"][perm].numpy()
        b = self.batch_size
        return ((x[i : i + b], None, t[i : i + b]) for i in range(0, len(perm) - b + 1, b))

    def backward(self, x, t):
        layers, n, s, r = self.layers, x.shape[0], self.s, self.r
        acts = [x, *self.a]
        for (w, b, _, _), a_in, a in zip(layers, acts, self.a):
            np.matmul(a_in, w.swapaxes(-1, -2), out=a)
            a += b
            np.negative(a, out=a)
            np.exp(a, out=a)
            a += 1.0
            np.reciprocal(a, out=a)
        w, b, _, _ = layers[-1]
        np.matmul(acts[-1], w.swapaxes(-1, -2), out=s)
        s += b
        s -= np.max(s, axis=-1, keepdims=True, out=r)
        np.exp(s, out=s)
        s /= np.sum(s, axis=-1, keepdims=True, out=r)
        d = self.d[-1]
        np.subtract(s, t, out=d)
        if self.loss == "cross_entropy":
            d /= n
        else:
            d *= 2.0 / n
            np.sum(np.multiply(d, s, out=self.u), axis=-1, keepdims=True, out=r)
            d -= r
            d *= s
        for i in range(len(layers) - 1, -1, -1):
            w, _, gw, gb = layers[i]
            a = acts[i]
            np.matmul(d.swapaxes(-1, -2), a, out=gw)  # the input x is shared: broadcast over copies
            np.sum(d, axis=-2, out=gb)
            if i > 0:
                h = self.h[i - 1]
                np.subtract(1.0, a, out=h)
                h *= a
                d = np.matmul(d, w, out=self.d[i - 1])
                d *= h

    def step(self, batch):
        x, _, t = batch
        self.backward(x, t)
        for k, v in self.np.items():
            g = self.g[k]
            g *= self.lr
            v -= g
