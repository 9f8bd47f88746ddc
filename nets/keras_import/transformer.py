"""The Keras importer's part for issue 45: what keras.applications' ConvNeXt
and NASNet hold beyond the CNNs' layers.

- a Sequential model nested in the functional one (ConvNeXt's stem and
  downsampling blocks): its layers in line, in order;
- LayerNormalization over the channels (axis -1 of an NHWC tensor): our
  LayerNorm, also on the (N, C) of a global average pool (ConvNeXt's head);
- Dense on each pixel of a 4-D tensor: a 1x1 convolution;
- the gelu activation (Keras's default, the exact form);
- ConvNeXt's LayerScale (x * gamma per channel): folded into the
  convolution that makes x, which nothing else may read;
- StochasticDepth: the identity at inference;
- Cropping2D (NASNet): a Crop layer.
"""
from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..spec import Conv, Crop, LayerNorm
from . import cnn
from .builder import Builder, Value, activation_name, channels_last


def inline_sequential(keras, ops: list, inbound: dict) -> tuple[list, dict]:
    """The model's operations with each nested Sequential model's layers in its place: the first
    reads what the model read, each next the one before, and the model's readers its last."""
    out, renamed = [], {}
    for op in ops:
        inner = [layer for layer in getattr(op, "layers", []) if type(layer).__name__ != "InputLayer"]
        if not isinstance(op, keras.Sequential) or not inner:
            out.append(op)
            continue
        previous = [renamed.get(n, n) for n in inbound[op.name]]
        for layer in inner:
            out.append(layer)
            inbound[layer.name] = previous
            previous = [layer.name]
        renamed[op.name] = inner[-1].name
    return out, {name: [renamed.get(n, n) for n in names] for name, names in inbound.items()}


def layernorm(b: Builder, layer, what: str, inputs: list[Value]):
    axes = [int(a) for a in np.atleast_1d(layer.axis)]
    rank = len(b.shape) + 1 if b.flatten_from is None else 2
    if [a % rank for a in axes] != [rank - 1]:
        raise UserError(f"{what}: a LayerNormalization over axes {axes} is not supported (only the channels, -1)")
    if getattr(layer, "rms_scaling", False):
        raise UserError(f"{what}: rms_scaling is not supported")
    arrays = dict(zip([w.path.split("/")[-1] for w in layer.weights], layer.get_weights()))
    flat = b.flatten_from
    if flat is not None:
        if tuple(flat[1:]) != (1, 1):
            raise UserError(f"{what}: a LayerNormalization after a Flatten is not supported (only after a global pool)")
        b.shape, b.flatten_from = flat, None
    c = b.shape[0]
    b.add(LayerNorm, layer.name, {"scale": arrays.get("gamma", np.ones(c)), "bias": arrays.get("beta", np.zeros(c))},
          eps=float(layer.epsilon))
    if flat is not None:
        b.flatten_from, b.shape = flat, (c,)


def dense(b: Builder, layer, what: str, inputs: list[Value]):
    """Dense on each pixel of a 4-D tensor as a 1x1 convolution; on a flat one, the CNNs' (cnn.dense)."""
    if len(b.shape) != 3 or b.flatten_from is not None:
        return cnn.dense(b, layer, what, inputs)
    b.materialise(what)
    weight, *rest = layer.get_weights()
    bias = rest[0] if layer.use_bias else np.zeros(layer.units, np.float32)
    act = activation_name(layer, what)
    if act == "softmax":
        raise UserError(f"{what}: a softmax on each pixel's channels is not supported")
    b.add(Conv, layer.name, {"weight": weight.T.reshape(layer.units, -1, 1, 1), "bias": bias}, activation=act,
          out_channels=layer.units, kernel=(1, 1))


def layer_scale(b: Builder, layer, what: str, inputs: list[Value]):
    """x * gamma, one factor per channel, into the convolution that makes x."""
    gamma = np.asarray(layer.get_weights()[0], np.float64).reshape(-1)
    maker = b.made(b.source)
    if maker is None or not maker.is_plain_conv() or b.read_count(b.source) > 1 \
            or len(b.shape) != 3 or gamma.size != b.shape[0]:
        raise UserError(f"{what}: a LayerScale is supported only right after a convolution or a Dense on each "
                        f"pixel, without an activation, that nothing else reads")
    name = maker.name
    b.weights[f"{name}.weight"] = (b.weights[f"{name}.weight"] * gamma[:, None, None, None]).astype(np.float32)
    b.weights[f"{name}.bias"] = (b.weights[f"{name}.bias"] * gamma).astype(np.float32)


def stochastic_depth(b: Builder, layer, what: str, inputs: list[Value]):
    b.notes.append(f"{layer.name}: StochasticDepth skipped (identity at inference)")


def cropping(b: Builder, layer, what: str, inputs: list[Value]):
    b.materialise(what)
    channels_last(layer, what)
    (top, bottom), (left, right) = layer.cropping
    try:
        b.add(Crop, layer.name, {}, crop=(int(top), int(left), int(bottom), int(right)))
    except ValueError as exc:
        raise UserError(f"{what}: {str(exc).split(': ', 1)[-1]}") from None

