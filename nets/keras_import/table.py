"""Which handler imports each Keras layer class, and what the walk checks before it runs;
the classes refused with a reason, and the supported ones as the refusal of any other names them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import cnn, merging, transformer
from .builder import Builder, Value


@dataclass(frozen=True)
class Handler:
    """How one Keras layer class is imported: run(builder, layer, what, inputs) adds our layers.
    `unary`: it reads one tensor with no scalar operations pending on it, checked before it runs
    (`takes_ops`: but ReLU continues such a chain), and a ZeroPadding2D still pending is made a layer
    of its own first, unless it `takes_pad` as its own padding.  Not unary: it checks its inputs itself."""

    run: Callable[[Builder, Any, str, list[Value]], None]
    unary: bool = True
    takes_pad: bool = False
    takes_ops: bool = False


HANDLERS = {
    "Conv2D": Handler(cnn.conv, takes_pad=True),
    "DepthwiseConv2D": Handler(cnn.depthwise, takes_pad=True),
    "SeparableConv2D": Handler(cnn.separable, takes_pad=True),
    "MaxPooling2D": Handler(cnn.max_pool, takes_pad=True),
    "AveragePooling2D": Handler(cnn.avg_pool, takes_pad=True),
    "ZeroPadding2D": Handler(cnn.zero_padding, takes_pad=True),
    "BatchNormalization": Handler(cnn.batchnorm),
    "GlobalAveragePooling2D": Handler(cnn.global_pool),
    "Rescaling": Handler(cnn.rescaling),
    "Normalization": Handler(cnn.normalization),
    "Reshape": Handler(cnn.reshape),
    "Dense": Handler(transformer.dense),   # on each pixel too (issue 45)
    "ReLU": Handler(cnn.relu, takes_ops=True),
    "Softmax": Handler(cnn.softmax),
    "Activation": Handler(cnn.activation),
    "Dropout": Handler(cnn.dropout, unary=False),
    "Flatten": Handler(cnn.flatten, unary=False),
    "Add": Handler(merging.add, unary=False),
    "Multiply": Handler(merging.multiply, unary=False),
    "Concatenate": Handler(merging.concatenate, unary=False),
    "CustomScaleLayer": Handler(merging.scaled_add, unary=False),
    # issue 45: ConvNeXt's and NASNet's
    "LayerNormalization": Handler(transformer.layernorm),
    "LayerScale": Handler(transformer.layer_scale),
    "StochasticDepth": Handler(transformer.stochastic_depth),
    "Cropping2D": Handler(transformer.cropping),
}

# Layer types refused with a reason that says what we lack.
REFUSED = {
    "Conv1D": "only 2-D convolutions are supported",
    "Conv3D": "only 2-D convolutions are supported",
    "Conv2DTranspose": "transposed convolution is not supported",
}
SUPPORTED = ("Conv2D, DepthwiseConv2D, SeparableConv2D, BatchNormalization, ZeroPadding2D, MaxPooling2D, "
             "AveragePooling2D, GlobalAveragePooling2D, Add, Multiply, Concatenate, Rescaling, Normalization, "
             "Reshape, Dense, Flatten, Activation, ReLU, Softmax, Dropout")
