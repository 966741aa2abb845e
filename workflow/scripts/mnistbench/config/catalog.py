"""The registries of names everything else reads: the modes (in the ladder's order: from the
beginner's code to the fastest), the analysis tables and the report's figures.

- MODES: every mode's name, the class that implements it (modes.py), the device kinds it can run
  on, what else the machine must have, which networks it trains and which training settings it
  implements, its colour and marker in every figure. `unsupported` says why the registry rules a
  device x network x mode out (train/needs.py adds what the machine lacks): the grid leaves such a
  combination out and lists it with that reason in left_out.csv.
- TABLES: the tables the `analyse` rule writes (results/summary/<name>.csv), each with its caption
  workflow/report/<name>_table.rst.
- FIGURES: the report's figures (results/figures/<name>.png), each with the tables it reads and
  its caption workflow/report/<name>.rst; report/figures.py draws one function per name,
  report/templates/pages.rst.j2 writes the page of words beside each.
- REPORT_KEYS: the config keys the analysis reads.

It imports no torch, matplotlib or seaborn: the Snakefile reads it in every invocation (every dry
run and, on a cluster, every job), where importing them costs seconds.
"""

from dataclasses import dataclass, field

from mnistbench.config import devices, networks, schema

# --- modes ----------------------------------------------------------------------------------------

# Training settings (`training.*`) every mode implements. A setting that the schema gains is
# implemented by none until a mode lists it here (ModeInfo.training): a mode that does not is left
# out of the grid whenever the setting is not at its default.
COMMON_TRAINING = ("loss", "init", "lr")


@dataclass(frozen=True)
class ModeInfo:
    cls: str  # its class in modes.py
    kinds: tuple | None = None  # device kinds on which it can exist at all (None: every kind)
    exact: bool = True  # trains the float32 function; amp is the one that does not
    needs: str = ""  # what else this machine must have: "compiler" (kernel.c) or "triton"
    # The networks it trains: "any" (the family and a user's nn.Module), "family" (mlp-...: its
    # forward and backward are written by hand for linear layers and sigmoids), or one network.
    networks: str = "any"
    why_networks: str = ""  # the bound that limits it to those networks, in words
    training: tuple = COMMON_TRAINING  # the `training.*` settings it implements
    # Whether it trains K > 1 copies of a network at once (`models_at_once`): "" if it does, else
    # why not (the grid leaves its K > 1 combinations out, with that reason, in left_out.csv).
    one_at_a_time: str = "it trains one network per step"
    # Whether it computes with denormal numbers flushed to zero whatever torch's setting (its own C
    # code sets the cpu's flush state for each call). Why the C modes do: per-sample SGD at a high
    # learning rate saturates sigmoids until derivatives and updates fall below float32's smallest
    # normal number (1.2e-38), and some cpus (Intel's) take a microcode assist of about 100 cycles
    # for each operation on one, others none: flushed, a mode's speed does not depend on which
    # (TensorFlow flushes by default). Only values below 1.2e-38 change; the modes still train the
    # float32 function (tests/test_modes.py). The others compute as torch does: with denormals,
    # unless torch.set_flush_denormal(True) was called in the thread.
    flushes: bool = False
    # Its look in every figure, its own: adding a mode changes no other mode's colour or marker.
    color: str = "#7f7f7f"
    marker: str = "o"


FAMILY_ONLY = "its forward and backward are written for the mlp-... family's linear layers and sigmoids"
ONE_NETWORK_KERNEL = "its C kernel trains one network per call (K networks would be K calls: K separate runs)"
MODES = {
    "seed": ModeInfo("Seed", color="#1f77b4", marker="o", networks="family", why_networks=FAMILY_ONLY),
    "manual": ModeInfo(
        "Manual", color="#ff7f0e", marker="s", networks="family", why_networks=FAMILY_ONLY, one_at_a_time=""
    ),
    "autograd": ModeInfo(
        "Autograd",
        color="#2ca02c",
        marker="^",
        networks="family",
        why_networks="it trains the family's functional form",
    ),
    "module": ModeInfo("Module", color="#d62728", marker="v", one_at_a_time=""),
    "dataloader": ModeInfo(
        "DataLoaderMode",
        color="#9467bd",
        marker="D",
        one_at_a_time="it measures what a DataLoader's copies cost one network; module trains K at once",
    ),
    "compiled": ModeInfo("Compiled", color="#8c564b", marker="P", one_at_a_time=""),
    "amp": ModeInfo(
        "Amp",
        color="#e377c2",
        marker="X",
        kinds=("cpu", "cuda"),
        exact=False,
        training=(*COMMON_TRAINING, "amp_dtype"),
        one_at_a_time="K copies under autocast are not proven to train as each copy alone",
    ),
    "cudagraph": ModeInfo("CudaGraph", color="#7f7f7f", marker="*", kinds=("cuda",), one_at_a_time=""),
    "numpy": ModeInfo(
        "Numpy",
        color="#bcbd22",
        marker="h",
        kinds=("cpu",),
        networks="family",
        why_networks=FAMILY_ONLY,
        one_at_a_time="",
    ),
    "kernel": ModeInfo(
        "Kernel",
        color="#17becf",
        marker="p",
        kinds=("cpu",),
        needs="compiler",
        networks="family",
        why_networks=FAMILY_ONLY,
        one_at_a_time=ONE_NETWORK_KERNEL,
        flushes=True,
    ),
    "sparse": ModeInfo(
        "Sparse",
        color="#262626",
        marker="<",
        kinds=("cpu",),
        needs="compiler",
        networks="family",
        why_networks=FAMILY_ONLY,
        one_at_a_time=ONE_NETWORK_KERNEL,
        flushes=True,
    ),
    "persistent": ModeInfo(
        "Persistent",
        color="#f77189",
        marker=">",
        kinds=("cuda",),
        needs="triton",
        networks=networks.SEED_NETWORK,
        why_networks="one program keeps W1 (784 x 16) and the small layers in its registers for every step",
        one_at_a_time="its one program keeps one network in its registers",
    ),
}


def why_not_network(mode: str, network: networks.Network) -> str | None:
    """Why `mode` cannot train this network, or None."""
    info = MODES[mode]
    if info.networks == "any" or (info.networks == "family" and network.family) or info.networks == network.name:
        return None
    trains = "the mlp-... family" if info.networks == "family" else info.networks
    return f"{mode} trains {trains} only, not {network.name}: {info.why_networks}"


def why_not_training(mode: str, training: dict) -> str | None:
    """Why `mode` cannot train with these `training.*` settings (one it does not implement, away from
    its default), or None."""
    for key, (default, concerns) in schema.training_options().items():
        value = training.get(key, default)
        if value == default or key in MODES[mode].training or (concerns is not None and mode not in concerns):
            continue
        return f"{mode} does not implement training.{key} = {value!r} (it trains as with {default!r})"
    return None


def why_not_many(mode: str, models_at_once: int) -> str | None:
    """Why `mode` cannot train `models_at_once` copies of a network at once, or None."""
    why = MODES[mode].one_at_a_time
    return f"{mode} takes no models_at_once > 1: {why}" if models_at_once > 1 and why else None


def unsupported(mode: str, device: str, s: networks.Spec | None = None) -> str | None:
    """Why the registry says this device x network x mode cannot exist (a kind the mode does not
    run on, a network or a training setting it does not take), or None. Whether this machine has
    what the mode needs is train/needs.py's question."""
    info = MODES[mode]
    if info.kinds is not None and devices.kind(device) not in info.kinds:
        return f"{mode} runs only on {', '.join(info.kinds)}"
    if s is not None:
        return why_not_network(mode, s.network) or why_not_training(mode, s.training)
    return None


# --- the report ----------------------------------------------------------------------------------

# The config keys the analysis reads (the analyse rule's params, so a change of one reruns it and
# a change of any other key does not): the grid it describes, what counts as usable, the target.
REPORT_KEYS = (
    "devices",
    "modes",
    "batch_sizes",
    "models_at_once",
    "repeats",
    "train_samples",
    "epochs",
    "target_accuracy",
)
REPORT_KEYS += ("quality.use", "quality.repeat_spread", "test_samples", "training.lr")


# --- tables -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    name: str  # results/summary/<name>.csv, captioned by workflow/report/<name>_table.rst
    category: str  # the report's section
    content: str  # the report's label


TABLES = {
    t.name: t
    for t in [
        Table("fits", "Throughput", "fits a + b·batch"),
        Table("crossover", "Speedup", "crossover batch size per mode"),
        Table("speedup", "Speedup", "speedup per mode x batch"),
        Table("map", "Speedup", "crossover batch size per network"),
        Table("ladder", "Ladder", "samples/s per mode"),
        Table("dataloader", "Data transfer", "DataLoader transfer share"),
        Table("bandwidth", "Data transfer", "copy latency and bandwidth"),
        Table("many", "Many models", "model-samples/s per models at once"),
    ]
}


# --- figures ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    name: str
    inputs: tuple  # summary tables it reads, results/summary/<input>.csv, in argument order
    category: str  # the report's section
    content: str  # the report's label
    options: tuple = field(default=())  # keyword options the rule passes (target, use)


FIGURES = {
    f.name: f
    for f in [
        Figure("ladder", ("ladder",), "Ladder", "the mode ladder per device"),
        Figure("throughput", ("runs", "fits"), "Throughput", "samples/s vs batch size", ("use",)),
        Figure("speedup", ("speedup",), "Speedup", "speedup heatmap"),
        Figure("map", ("map",), "Speedup", "where the accelerator wins, per network"),
        Figure("cost", ("fits",), "Throughput", "per-sample cost vs network size"),
        Figure("breakdown", ("profile",), "Breakdown", "step-time breakdown"),
        Figure("accuracy", ("epochs", "runs"), "Accuracy", "time to accuracy", ("target", "use")),
        Figure("bandwidth", ("transfer",), "Data transfer", "copy bandwidth vs size"),
        Figure("ops", ("profile",), "Breakdown", "ops per step"),
        Figure("many", ("many",), "Many models", "many models at once: model-samples/s vs models at once"),
    ]
}


def inputs() -> list[str]:
    """Every summary table some figure reads."""
    return list(dict.fromkeys(i for f in FIGURES.values() for i in f.inputs))
