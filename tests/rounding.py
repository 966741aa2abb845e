"""How far rounding at a reduced precision can move a training run: Monte Carlo arithmetic.

A mode that computes in bfloat16 or float16 (`amp`) cannot match a float64 reference to a fixed
share: how far it lands depends on the run (a sum whose terms cancel loses more, chaotic steps
amplify what was lost) and on where the kernels round, which differs between libraries and cpus
(oneDNN's bf16 kernels give other results on a cpu with native bf16 than on one without). What
does not depend on either is the format: each result of an op computed in it is the exact
result, rounded to a number of the format, an error of at most its unit roundoff u (2^-8 for
bfloat16, 2^-11 for float16) relative.

`Perturbed` runs the same code with that error made random (Parker's Monte Carlo arithmetic at the
format's precision): every op that reads a tensor of a reduced-precision format is computed in
float64 from the same values, its result multiplied by (1 + u * r), r uniform in [-1, 1], and
then rounded to the format, one rounding as any implementation must do at least once. Autocast
still decides which ops run in the format (the mode sets it as usual; this mode sits below it),
so the roundings are those of the torch version under test. A few such runs (`spread`) show how
far rounding in that format moves this run from float64: an implementation whose error is many
times that is not one of those roundings but a wrong computation.
"""

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

REDUCED = (torch.bfloat16, torch.float16)


def unit_roundoff(dtype: torch.dtype) -> float:
    """u of a floating-point format: half the distance from 1 to the next number."""
    return torch.finfo(dtype).eps / 2


class Perturbed(TorchDispatchMode):
    """Ops on reduced-precision tensors in float64, each result off by a random error of at most
    the format's unit roundoff before its rounding to the format (seeded: reproducible)."""

    def __init__(self, seed: int):
        super().__init__()
        self.gen = torch.Generator().manual_seed(seed)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)  # the result's dtypes, shapes and aliasing, as torch gives them
        low = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor) and a.dtype in REDUCED]
        if func.is_view or not low:
            return out
        wide = tree_map(
            lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a, (args, kwargs)
        )
        exact = func(*wide[0], **wide[1])
        for o, e in zip(tree_flatten(out)[0], tree_flatten(exact)[0]):
            if not isinstance(o, torch.Tensor) or not o.is_floating_point() or o._base is not None:
                continue  # a view of an input: written through the op that made it
            if o.dtype in REDUCED:
                r = torch.rand(e.shape, generator=self.gen, dtype=torch.float64).to(e.device)
                e = e * (1 + unit_roundoff(o.dtype) * (2 * r - 1))
            o.copy_(e)  # rounded once, to o's format (a float32 result of float64 work: exactly)
        return out


def spread(run, members: int = 8) -> list:
    """`run(context)` once per member under Perturbed(seed = member): the results of `members`
    runs whose every reduced-precision result was rounded with a random error of the format."""
    return [run(Perturbed(seed)) for seed in range(members)]


def plain():
    """The context of an unperturbed run."""
    return contextlib.nullcontext()
