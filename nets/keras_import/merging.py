"""Handlers of the Keras layers that read several tensors: Add, Multiply (elementwise, or by an
(N, 1, 1, C) gate: squeeze-and-excitation), Concatenate along the channels, and InceptionResNetV2's
CustomScaleLayer (x + scale * r)."""
from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..spec import Add, Concat, Mul
from .builder import Builder, Value


def add(b: Builder, layer, what: str, inputs: list[Value]):
    for i, v in enumerate(inputs):
        if v.pad is not None or v.ops:
            raise UserError(f"{what}: its input {i} is still a ZeroPadding2D or a scalar operation's; not supported")
    shapes = {(v.shape, v.flatten_from) for v in inputs}
    if len(shapes) != 1:
        raise UserError(f"{what}: adds tensors of shapes {[v.shape for v in inputs]}; only equal shapes are "
                        f"supported")
    if inputs[0].flatten_from is not None:
        raise UserError(f"{what}: an add after a Flatten is not supported; add before flattening")
    b.add(Add, layer.name, {}, inputs=tuple(v.layer for v in inputs))


def scaled_add(b: Builder, layer, what: str, inputs: list[Value]):
    """InceptionResNetV2's CustomScaleLayer: x + r * scale, the scale folded into the conv that makes r."""
    x, r = inputs
    maker = b.made(r.layer)
    if maker is None or not maker.is_plain_conv() or b.read_count(r.layer) > 1 or r.pad or r.ops:
        raise UserError(f"{what}: x + r * scale is supported only where r is a convolution's output (no "
                        f"activation) that nothing else reads, so the scale folds into it")
    for p in ("weight", "bias"):
        b.weights[f"{maker.name}.{p}"] = b.weights[f"{maker.name}.{p}"] * np.float32(layer.scale)
    add(b, layer, what, inputs)


def multiply(b: Builder, layer, what: str, inputs: list[Value]):
    """x * gate (the gate (1, 1, C): squeeze-and-excitation) or an elementwise product."""
    if any(v.pad is not None or v.ops or v.flatten_from is not None for v in inputs) or len(inputs) != 2:
        raise UserError(f"{what}: only a product of two (H, W, C) tensors, or of one by a (1, 1, C) gate, "
                        f"is supported")
    x, g = inputs
    if x.shape == (g.shape[0], 1, 1) and g.shape != x.shape:
        x, g = g, x   # ours takes the gate second
    if g.shape != x.shape and g.shape != (x.shape[0], 1, 1):
        raise UserError(f"{what}: multiplies shapes {x.shape} and {g.shape}; only equal shapes, or a tensor by a "
                        f"(1, 1, C) gate of its channels, are supported")
    b.add(Mul, layer.name, {}, inputs=(x.layer, g.layer))


def concatenate(b: Builder, layer, what: str, inputs: list[Value]):
    if layer.axis not in (-1, 3):
        raise UserError(f"{what}: a concatenation along axis {layer.axis} is not supported (only the channels, -1)")
    if any(v.pad is not None or v.ops or v.flatten_from is not None or len(v.shape) != 3 for v in inputs):
        raise UserError(f"{what}: only a concatenation of (H, W, C) tensors is supported")
    b.add(Concat, layer.name, {}, inputs=tuple(v.layer for v in inputs))

