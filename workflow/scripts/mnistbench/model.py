"""The one model every mode trains: 784 -> 16 -> 16 -> 10, sigmoid hidden layers, plain SGD.

Parameters live in a dict with the same names in every mode, laid out like nn.Linear (weight is
[out, in]), so any mode can start from, and be compared with, any other.
"""

import torch
import torch.nn.functional as F

SIZES = (784, 16, 16, 10)
NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")
LOSSES = ("cross_entropy", "mse_softmax")


def init_params(init: str, seed: int) -> dict[str, torch.Tensor]:
    """Initial float32 parameters on the cpu, drawn from a generator seeded only by `seed`.

    'default' is nn.Linear's own init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases.
    'seed' is the beginner's: every weight and bias from N(0, 2), i.e. torch.normal(0, 2): std 2.
    """
    g = torch.Generator().manual_seed(seed)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
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


def forward(p: dict, x: torch.Tensor) -> torch.Tensor:
    """Logits z3 for a batch x [B, 784]."""
    a1 = torch.sigmoid(torch.addmm(p["b1"], x, p["w1"].t()))
    a2 = torch.sigmoid(torch.addmm(p["b2"], a1, p["w2"].t()))
    return torch.addmm(p["b3"], a2, p["w3"].t())


def loss_fn(z3: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Mean over the batch, so batch size 1 is exactly the per-sample original.

    mse_softmax is the beginner's loss: squared error between softmax(z3) and the one-hot label,
    summed over the 10 classes.
    """
    if loss == "cross_entropy":
        return F.cross_entropy(z3, y)
    t = F.one_hot(y, SIZES[-1]).to(z3.dtype)
    return (torch.softmax(z3, dim=1) - t).square().sum(dim=1).mean()


def grads(p: dict, x: torch.Tensor, t: torch.Tensor, loss: str) -> dict[str, torch.Tensor]:
    """True gradients of loss_fn by hand (no autograd); t is the one-hot target [B, 10].

    Pure and allocation-based on purpose: it is the reference the tests hold against float64
    autograd, and the function `torch.compile` fuses into one step.
    """
    a1 = torch.sigmoid(torch.addmm(p["b1"], x, p["w1"].t()))
    a2 = torch.sigmoid(torch.addmm(p["b2"], a1, p["w2"].t()))
    s = torch.softmax(torch.addmm(p["b3"], a2, p["w3"].t()), dim=1)
    n = x.shape[0]
    if loss == "cross_entropy":
        d3 = (s - t) / n
    else:
        g = 2.0 * (s - t) / n  # dL/ds
        d3 = s * (g - (g * s).sum(dim=1, keepdim=True))  # full softmax Jacobian, not its diagonal
    d2 = (d3 @ p["w3"]) * a2 * (1.0 - a2)
    d1 = (d2 @ p["w2"]) * a1 * (1.0 - a1)
    return {
        "w3": d3.t() @ a2,
        "b3": d3.sum(0),
        "w2": d2.t() @ a1,
        "b2": d2.sum(0),
        "w1": d1.t() @ x,
        "b1": d1.sum(0),
    }


@torch.no_grad()
def evaluate(p: dict, x: torch.Tensor, y: torch.Tensor, loss: str, chunk: int = 8192):
    """(mean loss, accuracy) over a data set, in chunks so large sets fit any device."""
    total_loss, correct = 0.0, 0
    for i in range(0, x.shape[0], chunk):
        z3 = forward(p, x[i : i + chunk])
        yy = y[i : i + chunk]
        total_loss += float(loss_fn(z3, yy, loss)) * yy.shape[0]
        correct += int((z3.argmax(dim=1) == yy).sum())
    n = max(x.shape[0], 1)
    return total_loss / n, correct / n
