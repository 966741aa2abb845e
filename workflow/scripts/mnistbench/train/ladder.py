"""Which class implements each mode of the registry (catalog.MODES[name].cls): the torch and numpy
modes of modes.py, or the C and Triton modes of native.py. Its own module, as it needs both and
native.py builds on modes.py: neither imports the other back."""

from mnistbench.config import catalog
from mnistbench.train import modes, native


def implementation(name: str) -> type[modes.Mode]:
    """The class of a registered mode."""
    cls = catalog.MODES[name].cls
    return getattr(modes, cls, None) or getattr(native, cls)
