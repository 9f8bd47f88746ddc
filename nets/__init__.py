"""The nets this tool runs, as data.  `get_net` takes a name (or, where the
Keras importer is installed, a .keras / .h5 model file)."""
from compare.errors import UserError

from .lenet import LENET
from .spec import ACTIVATIONS, Conv, Dense, Layer, MaxPool, Net, Subsample
from .vgg16 import VGG16

NETS = {net.name: net for net in (LENET, VGG16)}

__all__ = ["ACTIVATIONS", "Conv", "Dense", "Layer", "MaxPool", "Net", "Subsample", "NETS", "get_net",
           "imported_weights"]

# nets imported from Keras files, each with the trained weights it came with
_IMPORTED: list[tuple[Net, dict]] = []


def get_net(name: str) -> Net:
    if name in NETS:
        return NETS[name]
    if name.lower().endswith((".keras", ".h5")):
        # Keras loads TensorFlow, which must stay out of this process (backends/isolated.py)
        from backends.isolated import call_isolated
        net, weights = call_isolated("Keras model import", "nets.keras_import", "load_keras", name)
        _IMPORTED.append((net, weights))
        return net
    raise UserError(f"unknown net {name!r}: choose one of {', '.join(NETS)}, or a Keras .keras/.h5 model file")


def imported_weights(net: Net) -> dict | None:
    """The weights a net imported by `get_net` from a Keras file came with, else None."""
    return next((w for n, w in _IMPORTED if n is net), None)
