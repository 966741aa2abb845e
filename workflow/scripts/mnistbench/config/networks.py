"""What a run trains: the network (one entry of the config's `models`) and how it is trained (the
config's `training.*` settings), built in one place (`build`) and handed to every mode.

Two kinds of network:
- the family `mlp-<w1>-<w2>-...`: 784 inputs, 1 to 8 sigmoid hidden layers of 1 to 4096 units,
  10 logits; every mode trains it, each the same function (the seed's network is `mlp-16-16`);
- a user's own module, `path/to/file.py:Class`: a torch.nn.Module built with no arguments that
  maps a float32 batch (B, 784) to (B, 10) logits; the modes that take any nn.Module train it.
  It is imported as `python path/to/file.py` would run it, its folder first on the import path;
  the content (sha256) of the file and of every file of that folder it imports (`user_files`) is
  part of what a run depends on.

Torch-free: the Snakefile plans the grid with it. What needs torch (parameters, forward passes,
loading a user's file) is in train/nets.py.
"""

import ast
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
    digest: str = ""  # ... and its content's sha256 with its helpers' ("missing" where the file is absent)
    files: tuple = ()  # ... the file and the files of its folder it imports (user_files)

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
        raise BadNetwork(f"{name}: {unknown_form(name)}")
    path = resolve(m["path"])
    if not path.is_file():
        return Network(name=name, path=str(path), cls=m["cls"], digest="missing")
    files = user_files(path)
    h = hashlib.sha256(path.read_bytes())
    for f in files[1:]:  # a module without helpers keeps its file's own sha256
        h.update(b"\0" + str(f.relative_to(path.parent)).encode() + b"\0" + f.read_bytes())
    return Network(name=name, path=str(path), cls=m["cls"], digest=h.hexdigest(), files=tuple(map(str, files)))


def unknown_form(name: str) -> str:
    """Why an entry is neither form, with the entry it most likely meant (one line)."""
    forms = f"the known forms are mlp-<width>-<width>-... (e.g. {SEED_NETWORK}) and path/to/file.py:Class"
    widths = re.findall(r"[0-9]+", name)
    if name.strip().lower().startswith("mlp"):
        if widths:
            return f"did you mean mlp-{'-'.join(widths)}? ({forms})"
        return f"a network of the family names its hidden layers' widths in whole units, e.g. {SEED_NETWORK} ({forms})"
    if name.strip().endswith(".py"):
        return f"name the module's class after a colon, e.g. {name.strip()}:Net ({forms})"
    return forms


def user_files(path: Path) -> list[Path]:
    """A user's module file and, transitively, every file of its folder it imports, read from its
    import statements (anywhere in it, functions included) and found where `python path` would
    find them: `import helper` or `from helper import make` is helper.py or helper/__init__.py
    beside it, `from .sub import x` is relative to the importing file, `import pkg.mod` brings
    pkg/__init__.py and pkg/mod.py. What is not there (torch, the standard library) is not the
    user's code. Torch-free and importing nothing: the Snakefile reads it for every invocation."""
    root, seen, todo = path.parent, [], [path]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.append(f)
        try:
            tree = ast.parse(f.read_text(), str(f))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # importing it will say what is wrong, naming the file
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                todo += [g for a in node.names for g in module_files(root, a.name.split("."))]
            elif isinstance(node, ast.ImportFrom):
                base = root
                if node.level:  # relative: from the importing file's package
                    base = f.parent
                    for _ in range(node.level - 1):
                        base = base.parent
                parts = node.module.split(".") if node.module else []
                todo += module_files(base, parts)
                todo += [g for a in node.names for g in module_files(base, [*parts, a.name])]
    return seen


def module_files(base: Path, parts: list) -> list[Path]:
    """The files that importing the dotted name `parts` from folder `base` runs: each package's
    __init__.py on the way and the module itself, as far as they exist."""
    found, here = [], base
    for part in parts:
        here = here / part
        if here.with_suffix(".py").is_file():
            found.append(here.with_suffix(".py").resolve())
            break  # a module: nothing below it is a file
        if not (here / "__init__.py").is_file():
            break
        found.append((here / "__init__.py").resolve())
    return found


def training(cfg: dict) -> dict:
    """The config's `training` settings, every key of the schema's `training` filled with its default."""
    given = cfg.get("training", {})
    return {k: given.get(k, default) for k, (default, _) in schema.training_options().items()}


def build(cfg: dict, name: str) -> Spec:
    """The one place a run's spec is made: the network `name` (a `models` entry) and the config's
    training settings."""
    return Spec(network=network(name), training=training(cfg))
