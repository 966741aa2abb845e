"""What a run trains: the network (one entry of the config's `models`) and how it is trained (the
config's `training.*` settings), built in one place (`build`) and handed to every mode.

Two kinds of network:
- the family `mlp-<w1>-<w2>-...`: 784 inputs, 1 to 8 sigmoid hidden layers of 1 to 4096 units,
  10 logits; every mode trains it, each the same function (the seed's network is `mlp-16-16`);
- a user's own module, `path/to/file.py:Class`: a torch.nn.Module built with no arguments that
  maps a float32 batch (B, 784) to (B, 10) logits; the modes that take any nn.Module train it.
  The file's content (its sha256) is part of what a run depends on.

Torch-free: the Snakefile plans the grid with it. What needs torch (parameters, forward passes,
loading a user's file) is in train/nets.py.
"""

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from mnistbench.config import schema

INPUTS, CLASSES = 784, 10
MAX_DEPTH, MAX_WIDTH = 8, 4096
SEED_NETWORK = "mlp-16-16"  # the beginner's 784 -> 16 -> 16 -> 10
FAMILY = re.compile(r"mlp(-[0-9]+)+")
USER = re.compile(r"(?P<path>[^:]+\.py):(?P<cls>[A-Za-z_][A-Za-z0-9_]*)")
# The workflow's own folder: a user's file named relative to it (config/cnn.py) is found from any
# working directory.
REPO = Path(__file__).resolve().parents[4]


class BadNetwork(ValueError):
    """A `models` entry that names no network of the family and no module file; says why."""


@dataclass(frozen=True)
class Network:
    name: str  # as the config writes it: mlp-16-16, or config/cnn.py:Net
    sizes: tuple = ()  # the family's layer sizes (784, w1, ..., 10); empty for a user's module
    path: str = ""  # a user's module: its file, absolute
    cls: str = ""  # ... and its class
    digest: str = ""  # ... and its content's sha256 ("missing" where the file is absent)

    @property
    def family(self) -> bool:
        return bool(self.sizes)

    @property
    def layers(self) -> int:
        return len(self.sizes) - 1

    @property
    def slug(self) -> str:
        """Its folder in the results (results/runs/<device>/<slug>/...): the name of a network of
        the family, `<file stem>-<Class>` of a user's module."""
        return self.name if self.family else f"{Path(self.path).stem}-{self.cls}"

    def flop_per_sample(self) -> int:
        """The arithmetic of one training sample of the family, in FLOP (2 per multiply-add): the
        forward pass, the weight gradients (as many again) and the deltas of every layer but the
        first (nothing needs the input's). Biases, sigmoids and the softmax are left out. A
        user's module is counted by torch (nets.flop_per_sample)."""
        macs = [a * b for a, b in zip(self.sizes[:-1], self.sizes[1:])]
        return 2 * (2 * sum(macs) + sum(macs[1:]))

    def parameters(self) -> int:
        return sum(a * b + b for a, b in zip(self.sizes[:-1], self.sizes[1:]))


@dataclass(frozen=True)
class Spec:
    """A network and its training settings: every key of the config's `training` (loss, init, lr,
    amp_dtype, and any the schema gains), filled with the schema's defaults."""

    network: Network
    training: dict = field(default_factory=dict)

    @property
    def loss(self) -> str:
        return self.training["loss"]

    @property
    def init(self) -> str:
        return self.training["init"]

    @property
    def lr(self) -> float:
        return self.training["lr"]


def resolve(path: str) -> Path:
    """A user's module file: absolute as written, else in the working directory, else in the
    workflow's folder (config/cnn.py:Net works from any working directory)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    for base in (Path.cwd(), REPO):
        if (base / p).is_file():
            return (base / p).resolve()
    return (Path.cwd() / p).resolve()


def network(name: str) -> Network:
    """The Network a `models` entry names; BadNetwork (a one-line reason) if none."""
    if FAMILY.fullmatch(name):
        widths = [int(w) for w in name.split("-")[1:]]
        if not 1 <= len(widths) <= MAX_DEPTH:
            raise BadNetwork(f"{name}: 1 to {MAX_DEPTH} hidden layers, not {len(widths)}")
        if not all(1 <= w <= MAX_WIDTH for w in widths):
            raise BadNetwork(f"{name}: every hidden layer has 1 to {MAX_WIDTH} units")
        return Network(name=name, sizes=(INPUTS, *widths, CLASSES))
    m = USER.fullmatch(name)
    if m is None:
        raise BadNetwork(f"{name}: not mlp-<width>-<width>-... nor path/to/file.py:Class")
    path = resolve(m["path"])
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
    return Network(name=name, path=str(path), cls=m["cls"], digest=digest)


def training(cfg: dict) -> dict:
    """The config's `training` settings, every key of the schema's `training` filled with its default."""
    given = cfg.get("training", {})
    return {k: given.get(k, default) for k, (default, _) in schema.training_options().items()}


def build(cfg: dict, name: str) -> Spec:
    """The one place a run's spec is made: the network `name` (a `models` entry) and the config's
    training settings."""
    return Spec(network=network(name), training=training(cfg))
