"""Which net a command runs: a built-in one by name, or a user's model file
(Keras .keras/.h5, ONNX .onnx), with the weights the file brings.

Keras loads TensorFlow, which must stay out of this process (PoCL's
compiler breaks beside it), so a Keras file is read in a child process
(backends/isolated.py) that sends back the net and its weights.  The onnx
package is light and carries no LLVM: an ONNX file is read here.  Batch
normalisation in a model is folded into the convolution before it
(nets/batchnorm.py) as the model is loaded, and a per-channel affine map
(an input's rescaling, a batch norm before a convolution) into the
convolution after it where that is exact (nets/affine.py)."""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

import nets
from backends.isolated import call_isolated
from nets import Net
from nets.affine import fold_channel_affines
from nets.batchnorm import fold_batchnorm
from nets.errors import UserError

KERAS_SUFFIXES = (".keras", ".h5")
ONNX_SUFFIXES = (".onnx",)
SUFFIXES = KERAS_SUFFIXES + ONNX_SUFFIXES


class LoadedNet(NamedTuple):
    net: Net
    weights: dict[str, np.ndarray] | None   # a model file's own; None for a built-in net (seeded by the caller)


def load_net(name: str) -> LoadedNet:
    """The net `name` names: a built-in net, or the model in a file."""
    lower = name.lower()
    if os.path.isdir(name):
        raise UserError(f"--net {name} is a folder; give a model file (.keras, .h5 or .onnx) or a built-in net "
                        f"({', '.join(nets.NETS)})")
    if lower.endswith(KERAS_SUFFIXES):
        net, weights = call_isolated("Keras model import", "nets.keras_import", "load_keras", name)
    elif lower.endswith(ONNX_SUFFIXES):
        from nets.onnx_import import load_onnx
        net, weights = load_onnx(name)
    else:
        return LoadedNet(nets.get_net(name), None)
    return LoadedNet(*fold_channel_affines(*fold_batchnorm(net, weights)))
