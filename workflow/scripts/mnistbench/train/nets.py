"""The networks every mode trains (config/networks.py says which): their parameters, forward pass, loss and
true gradients, a user's module loaded from its file, and the arithmetic of one training sample.

A network of the family (784 -> hidden widths -> 10, sigmoid hidden layers) keeps its parameters
in a dict with the same names in every mode, w1, b1, ..., w{L+1}, b{L+1}, laid out like nn.Linear
(weight is [out, in]), so any mode can start from, and be compared with, any other. A user's
module keeps its state_dict (parameters and buffers, the module's own names).
"""

import importlib.util
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from mnistbench.config.networks import CLASSES, INPUTS, Network, Spec

LOSSES = ("cross_entropy", "mse_softmax")


class BadModel(Exception):
    """A user's module file that cannot be trained; one line naming the file and the fix. A run
    records it as its status (`bad_model`) and the rest of the grid goes on."""


def names(network: Network) -> tuple:
    """The parameter names of a network of the family, in layer order."""
    return tuple(f"{k}{i}" for i in range(1, network.layers + 1) for k in ("w", "b"))


def init_params(network: Network, init: str, seed: int) -> dict[str, torch.Tensor]:
    """Initial float32 parameters of a network of the family on the cpu, drawn from a generator
    seeded only by `seed`.

    'default' is nn.Linear's own init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
    'seed' is the beginner's: every weight and bias from N(0, 2), i.e. torch.normal(0, 2): std 2.
    """
    g = torch.Generator().manual_seed(seed)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(network.sizes[:-1], network.sizes[1:]), start=1):
        w, b = torch.empty(fan_out, fan_in), torch.empty(fan_out)
        if init == "seed":
            w.normal_(0.0, 2.0, generator=g)
            b.normal_(0.0, 2.0, generator=g)
        elif init == "default":
            bound = fan_in**-0.5
            w.uniform_(-bound, bound, generator=g)
            b.uniform_(-bound, bound, generator=g)
        else:
            raise ValueError(f"unknown init {init!r}")
        params[f"w{i}"], params[f"b{i}"] = w, b
    return params


def layers(p: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight, bias) of each layer of a family network's parameters, input first."""
    return [(p[f"w{i}"], p[f"b{i}"]) for i in range(1, len(p) // 2 + 1)]


def forward(p: dict, x: torch.Tensor) -> torch.Tensor:
    """Logits for a batch x [B, 784] of a family network."""
    *hidden, (w, b) = layers(p)
    for wh, bh in hidden:
        x = torch.sigmoid(torch.addmm(bh, x, wh.t()))
    return torch.addmm(b, x, w.t())


def loss_fn(z: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Mean over the batch, so batch size 1 is exactly the per-sample original.

    mse_softmax is the beginner's loss: squared error between softmax(z) and the one-hot label,
    summed over the 10 classes.
    """
    if loss == "cross_entropy":
        return F.cross_entropy(z, y)
    t = F.one_hot(y, CLASSES).to(z.dtype)
    return (torch.softmax(z, dim=1) - t).square().sum(dim=1).mean()


def output_delta(s: torch.Tensor, t: torch.Tensor, loss: str, n: int) -> torch.Tensor:
    """dL/dz of the mean loss over n rows, from the softmax s and the one-hot target t."""
    if loss == "cross_entropy":
        return (s - t) / n
    g = 2.0 * (s - t) / n  # dL/ds
    return s * (g - (g * s).sum(dim=1, keepdim=True))  # full softmax Jacobian, not its diagonal


def grads(p: dict, x: torch.Tensor, t: torch.Tensor, loss: str) -> dict[str, torch.Tensor]:
    """True gradients of loss_fn by hand (no autograd) for a family network; t is the one-hot
    target [B, 10].

    Pure and allocation-based on purpose: it is the reference the tests hold against float64
    autograd, and the function `torch.compile` fuses into one step.
    """
    ws = layers(p)
    acts = [x]
    for w, b in ws[:-1]:
        acts.append(torch.sigmoid(torch.addmm(b, acts[-1], w.t())))
    w, b = ws[-1]
    d = output_delta(torch.softmax(torch.addmm(b, acts[-1], w.t()), dim=1), t, loss, x.shape[0])
    out = {}
    for i in range(len(ws), 0, -1):
        a = acts[i - 1]
        out[f"w{i}"], out[f"b{i}"] = d.t() @ a, d.sum(0)
        if i > 1:
            d = (d @ ws[i - 1][0]) * a * (1.0 - a)
    return out


# --- nn.Modules: the family's, and a user's -----------------------------------------------------


def family_module(p: dict) -> nn.Sequential:
    """A family network as nn.Linear layers and sigmoids, holding copies of the parameters p."""
    parts = []
    for w, b in layers(p):
        linear = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            linear.weight.copy_(w)
            linear.bias.copy_(b)
        parts += [linear, nn.Sigmoid()]
    return nn.Sequential(*parts[:-1])


def family_names(net: nn.Module) -> dict:
    """{a family_module parameter's name: its name in init_params}: the i-th linear layer's weight
    and bias are w{i} and b{i}."""
    linears = [n for n, m in net.named_modules() if isinstance(m, nn.Linear)]
    return {f"{n}.{w}": f"{w[0]}{i}" for i, n in enumerate(linears, 1) for w in ("weight", "bias")}


def family_params(net: nn.Sequential) -> dict:
    """The parameters of a family_module, named as init_params names them (no copies)."""
    names = family_names(net)
    return {names[k]: v.detach() for k, v in net.named_parameters()}


_classes = {}
_folders = set()  # the folders of the users' modules this process imported: their helpers too
_on_path = set()  # those of them this process put on the import path
_active = None  # the folder whose network was built last


def _theirs(file: str) -> bool:
    """Whether a module's file is a user's: under a user's module folder, and neither installed
    (the environment's) nor this package's (a user's folder may be the project's own)."""
    own = (sys.prefix, str(Path(__file__).resolve().parents[1]))
    return (
        bool(file)
        and any(Path(file).is_relative_to(d) for d in _folders)
        and not any(Path(file).is_relative_to(d) for d in own)
    )


def _only_its_folder(folder: str, afresh: bool = False) -> None:
    """As `python path/to/net.py` sees the import path: its folder first and no other user's (a
    warm worker builds many networks, one at a time), and no helper module that another network's
    folder, or this one's before an edit, left in sys.modules: each imports its own afresh. The
    folder stays on the path while the network trains, for imports inside its functions. Nothing
    to do where the last network built was of this folder (K copies build it K times)."""
    global _active
    if _active == folder and sys.path[:1] == [folder] and not afresh:
        return
    _active = folder
    _folders.add(folder)
    for mod, m in list(sys.modules.items()):
        file = getattr(m, "__file__", None) or ""
        if not mod.startswith("mnistbench_user_") and _theirs(file):
            del sys.modules[mod]
    for other in _on_path - {folder}:
        while other in sys.path:
            sys.path.remove(other)
    _on_path.intersection_update({folder})
    if folder in sys.path:
        sys.path.remove(folder)
    else:
        _on_path.add(folder)
    sys.path.insert(0, folder)


def user_class(network: Network) -> type:
    """The class a user's `models` entry names, imported from its file once per process (each use
    with the import path as its own, _only_its_folder); BadModel names the file and the fix."""
    key = (network.path, network.digest)
    folder = str(Path(network.path).parent)
    if key in _classes:
        _only_its_folder(folder)
        return _classes[key]
    where = f"{network.path} (models: {network.name})"
    if network.digest == "missing":
        raise BadModel(f"{where}: no such file; write it, or correct the path in `models`")
    name = f"mnistbench_user_{network.digest[:16]}"
    mine = {str(Path(f).with_suffix("")) for f in network.files}
    _only_its_folder(folder, afresh=True)
    before = set(sys.modules)
    try:
        loader = importlib.util.spec_from_file_location(name, network.path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module  # dataclasses and pickling look a class's module up here
        loader.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        why = (
            f"it imports {e.name}, which is neither a file beside it ({folder}/{e.name}.py or a package "
            f"folder there) nor installed in {sys.prefix}; add the file, or install the package"
            if isinstance(e, ModuleNotFoundError)
            else f"importing it raised {type(e).__name__}: {' '.join(str(e).split())[:160]}; fix the file "
            f"so that `python {network.path}` runs"
        )
        raise BadModel(f"{where}: {why}") from None
    unseen = sorted(
        f
        for f in (getattr(sys.modules[m], "__file__", None) or "" for m in set(sys.modules) - before)
        if _theirs(f) and Path(f).is_relative_to(folder) and str(Path(f).resolve().with_suffix("")) not in mine
    )  # fmt: skip
    if unseen:  # its edits would not rerun the runs: results silently stale
        raise BadModel(
            f"{where}: it loads {unseen[0]} in a way its import statements do not show (importlib, "
            "exec, a changed sys.path), so an edit of that file would not rerun its runs; import it "
            "with an import statement"
        )
    cls = getattr(module, network.cls, None)
    if cls is None:
        defined = sorted(k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, nn.Module))
        raise BadModel(
            f"{where}: defines no class {network.cls}; name one of its nn.Module classes "
            f"({', '.join(defined) or 'it defines none'}) after the colon"
        )
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise BadModel(f"{where}: {network.cls} is not a torch.nn.Module subclass; derive it from nn.Module")
    _classes[key] = cls
    return cls


def user_module(s: Spec, seed: int) -> nn.Module:
    """A new instance of a user's module with the repeat's initial weights: its own init under
    torch's global generator seeded with `seed` (left as it was afterwards), or for init 'seed'
    every parameter from N(0, 2). Checked on a probe batch: parameters to train, (B, 10) float
    logits, a finite loss; BadModel otherwise."""
    network = s.network
    where = f"{network.path} (models: {network.name})"
    cls = user_class(network)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            net = cls()
        except Exception as e:
            raise BadModel(
                f"{where}: {network.cls}() raised {type(e).__name__}: {' '.join(str(e).split())[:160]}; "
                "the class must build with no arguments"
            ) from None
        if not any(p.requires_grad for p in net.parameters()):
            raise BadModel(
                f"{where}: {network.cls} has no parameters to train; give it at least one layer with "
                "weights (e.g. nn.Linear(784, 10))"
            )
        if s.init == "seed":
            g = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for p in net.parameters():
                    p.normal_(0.0, 2.0, generator=g)
    net = net.float()
    x, y = torch.rand(2, INPUTS, generator=torch.Generator().manual_seed(seed)), torch.tensor([0, 1])
    try:
        with torch.no_grad():
            z = net.eval()(x)
    except Exception as e:
        raise BadModel(
            f"{where}: its forward raised {type(e).__name__} on a batch of shape (2, 784): "
            f"{' '.join(str(e).split())[:160]}; it must take float32 (B, 784) images"
        ) from None
    net.train()
    if not isinstance(z, torch.Tensor) or tuple(z.shape) != (2, CLASSES) or not z.is_floating_point():
        got = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise BadModel(
            f"{where}: returns {got} for a batch of shape (2, 784); it must return (B, {CLASSES}) float logits"
        )
    loss = float(loss_fn(z.float(), y, s.loss))
    if not math.isfinite(loss):
        raise BadModel(
            f"{where}: its loss is {loss} before any training; check its forward for a log, a division "
            "or an init that overflows"
        )
    return net


def initial_state(s: Spec, seed: int, models_at_once: int = 1) -> dict[str, torch.Tensor]:
    """What every mode of a repeat starts from: a family network's parameters, or a user's module's
    state_dict (parameters and buffers), on the cpu. K = models_at_once > 1: K copies, copy i
    from seed + i, stacked along a new first dimension (copies() splits them again)."""
    if models_at_once > 1:
        each = [initial_state(s, seed + i) for i in range(models_at_once)]
        return {k: torch.stack([c[k] for c in each]) for k in each[0]}
    if s.network.family:
        return init_params(s.network, s.init, seed)
    return {k: v.detach().clone() for k, v in user_module(s, seed).state_dict().items()}


def copies(state: dict, models_at_once: int) -> list[dict]:
    """The K states of K stacked copies (views), or [state] for one."""
    if models_at_once == 1:
        return [state]
    return [{k: v[i] for k, v in state.items()} for i in range(models_at_once)]


def state_names(s: Spec, net: nn.Module) -> dict:
    """{a module parameter's name: its name in initial_state} of a module made by `module`."""
    return family_names(net) if s.network.family else {k: k for k, _ in net.named_parameters()}


def module(s: Spec, state: dict, device) -> nn.Module:
    """The network as an nn.Module on `device`, holding a copy of `state`."""
    if s.network.family:
        return family_module(state).to(device)
    net = user_class(s.network)()
    net.load_state_dict(state)
    return net.float().to(device)


def module_state(s: Spec, net: nn.Module) -> dict:
    """The current state of a module made by `module`, in initial_state's names (no copies)."""
    if s.network.family:
        return family_params(net)
    return {k: v.detach() for k, v in net.state_dict().items()}


@torch.no_grad()
def evaluate(s: Spec, state: dict, x: torch.Tensor, y: torch.Tensor, models_at_once: int = 1):
    """(mean loss, accuracy) over a data set; of K stacked copies, the mean of the copies' (each
    evaluated alone)."""
    each = [_evaluate(s, c, x, y) for c in copies(state, models_at_once)]
    return sum(e[0] for e in each) / len(each), sum(e[1] for e in each) / len(each)


def _evaluate(s: Spec, state: dict, x: torch.Tensor, y: torch.Tensor, chunk: int = 8192):
    """(mean loss, accuracy) of one network over a data set, in chunks so large sets fit any
    device. A user's module is evaluated in eval mode."""
    if s.network.family:
        fwd = lambda xs: forward(state, xs)  # noqa: E731
    else:
        net = module(s, {k: torch.as_tensor(v) for k, v in state.items()}, x.device).eval()
        fwd = lambda xs: net(xs).float()  # noqa: E731
    total_loss, correct = 0.0, 0
    for i in range(0, x.shape[0], chunk):
        z = fwd(x[i : i + chunk])
        yy = y[i : i + chunk]
        total_loss += float(loss_fn(z, yy, s.loss)) * yy.shape[0]
        correct += int((z.argmax(dim=1) == yy).sum())
    n = max(x.shape[0], 1)
    return total_loss / n, correct / n


def flop_per_sample(s: Spec, seed: int = 0) -> int:
    """FLOP of one training sample (forward, loss and backward): the family's by its formula, a
    user's module as torch counts it (torch.utils.flop_counter, the matrix products and
    convolutions of a training step on a batch of 2, halved)."""
    if s.network.family:
        return s.network.flop_per_sample()
    from torch.utils.flop_counter import FlopCounterMode

    net = module(s, initial_state(s, seed), "cpu")
    x, y = torch.rand(2, INPUTS), torch.tensor([0, 1])
    with FlopCounterMode(display=False) as counter:
        loss_fn(net(x).float(), y, s.loss).backward()
    return counter.get_total_flops() // 2
