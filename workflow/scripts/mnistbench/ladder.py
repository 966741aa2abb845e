"""The registry of the mode ladder: every rung's name, in the ladder's order (grid, tables,
legends, the ladder figure), the device kinds it can run on, and whether it trains the exact
float32 function. The implementations are the classes of modes.py, named here.

It imports no torch: the Snakefile, the analysis and the figures read it, and importing torch
costs seconds in every Snakemake run and every job that only reads results.
"""

from dataclasses import dataclass

from mnistbench import devices


@dataclass(frozen=True)
class Rung:
    cls: str  # its class in modes.py
    kinds: tuple | None = None  # device kinds on which it can exist at all (None: every kind)
    exact: bool = True  # trains the float32 function; amp is the one that does not
    needs: str = ""  # what else this machine must have: "compiler" (kernel.c) or "triton"


MODES = {
    "seed": Rung("Seed"),
    "manual": Rung("Manual"),
    "autograd": Rung("Autograd"),
    "module": Rung("Module"),
    "dataloader": Rung("DataLoaderMode"),
    "compiled": Rung("Compiled"),
    "amp": Rung("Amp", kinds=("cpu", "cuda"), exact=False),
    "cudagraph": Rung("CudaGraph", kinds=("cuda",)),
    "numpy": Rung("Numpy", kinds=("cpu",)),
    "kernel": Rung("Kernel", kinds=("cpu",), needs="compiler"),
    "persistent": Rung("Persistent", kinds=("cuda",), needs="triton"),
}


def _missing(needs: str) -> str | None:
    """Why this machine lacks what a rung needs, or None."""
    if needs == "compiler":
        from mnistbench import kernel

        if kernel.compiler() is None:
            return "needs a C compiler (none found: install gcc or clang, or set CC)"
        built = kernel.problem()  # a compiler that cannot build kernel.c leaves it out as well
        return f"needs a C compiler that builds kernel.c ({built})" if built else None
    if needs == "triton":
        from mnistbench import persistent

        ok, why = persistent.available()
        return None if ok else f"needs Triton ({why})"
    return None


def why_not(mode: str, device: str) -> str | None:
    """Why this device x mode pair cannot exist here (it is left out of the grid), or None."""
    rung = MODES[mode]
    if rung.kinds is not None and devices.kind(device) not in rung.kinds:
        return f"{mode} runs only on {', '.join(rung.kinds)}"
    reason = _missing(rung.needs)
    return f"{mode} {reason}" if reason else None


def exists(mode: str, device: str) -> bool:
    return why_not(mode, device) is None
