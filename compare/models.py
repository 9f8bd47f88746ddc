"""Which net a command runs: a built-in one by name, or a user's Keras model
file.  Keras loads TensorFlow, which must stay out of this process (PoCL's
compiler breaks beside it), so a model file is read in a child process
(backends/isolated.py) that sends back the net and its weights."""
from __future__ import annotations

import nets
from backends.isolated import call_isolated
from nets import Net

SUFFIXES = (".keras", ".h5")

# nets imported from Keras files, each with the trained weights it came with
_IMPORTED: list[tuple[Net, dict]] = []


def load_net(name: str) -> Net:
    if name.lower().endswith(SUFFIXES):
        net, weights = call_isolated("Keras model import", "nets.keras_import", "load_keras", name)
        _IMPORTED.append((net, weights))
        return net
    return nets.get_net(name)


def imported_weights(net: Net) -> dict | None:
    """The weights a net imported by `load_net` from a Keras file came with, else None."""
    return next((w for n, w in _IMPORTED if n is net), None)
