"""The nets this tool runs, as data: layer specs, seeded or user weights,
and the Keras importer, as plain functions.  The bottom layer: it imports
nothing of `backends` or `compare`; its errors module (nets/errors.py) is
imported from every layer."""
from .errors import UserError
from .lenet import LENET
from .spec import ACTIVATIONS, Conv, Dense, Layer, MaxPool, Net, Subsample
from .vgg16 import VGG16

NETS = {net.name: net for net in (LENET, VGG16)}

__all__ = ["ACTIVATIONS", "Conv", "Dense", "Layer", "MaxPool", "Net", "Subsample", "NETS", "LENET", "VGG16",
           "get_net"]


def get_net(name: str) -> Net:
    """A built-in net by name (compare/models.py also takes Keras model files)."""
    if name in NETS:
        return NETS[name]
    raise UserError(f"unknown net {name!r}: choose one of {', '.join(NETS)}, or a Keras .keras/.h5 model file")
