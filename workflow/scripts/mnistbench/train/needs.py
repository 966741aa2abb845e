"""What a mode needs of this machine besides the registry's yes (config/catalog.py): a C compiler
that runs, Triton. `why_not` is the one answer to "can this device x network x mode run here?":
the grid leaves out what it says no to, and lists it with the reason in left_out.csv. It is asked
while Snakemake plans, so it builds nothing: a compiler that runs but cannot build kernel.c is
the train job's to find (its row is `unsupported`, with the compiler's message).
"""

from mnistbench.config import catalog, networks


class Unsupported(Exception):
    """This mode cannot run on this device or torch build; recorded as status `unsupported`."""


# What gives this machine what a mode needs (ModeInfo.needs): the fix where only that is missing.
FIXES = {
    "compiler": "set CC to a working C compiler, or install one (gcc or clang)",
    "triton": "install Triton (pip install triton) in the environment that runs the workflow",
}


def _missing(needs: str) -> str | None:
    """Why this machine lacks what a mode needs, or None."""
    if needs == "compiler":
        from mnistbench.train import kernel

        if kernel.compiler() is None:
            return "needs a C compiler (none found: install gcc or clang, or set CC)"
        why = kernel.unusable()
        return f"needs a C compiler that runs ({why})" if why else None
    if needs == "triton":
        from mnistbench.train import persistent

        ok, why = persistent.available()
        return None if ok else f"needs Triton ({why})"
    return None


def lacking(mode: str) -> str | None:
    """Why this machine lacks what `mode` needs (FIXES[catalog.MODES[mode].needs] gives it), or None."""
    reason = _missing(catalog.MODES[mode].needs)
    return f"{mode} {reason}" if reason else None


def why_not(mode: str, device: str, s: networks.Spec | None = None, models_at_once: int = 1) -> str | None:
    """Why this device x network x mode, training `models_at_once` copies at once, cannot exist
    here (it is left out of the grid), or None. Without a spec, only the device and the machine
    are asked."""
    return catalog.unsupported(mode, device, s) or catalog.why_not_many(mode, models_at_once) or lacking(mode)


def exists(mode: str, device: str, s: networks.Spec | None = None, models_at_once: int = 1) -> bool:
    return why_not(mode, device, s, models_at_once) is None
