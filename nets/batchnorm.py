"""Batch normalisation folded into the convolution before it, for inference.

A convolution y = w * x + b followed by (y - mean) / sqrt(var + eps) * scale + bias
is one convolution with
    w' = w * s,   b' = (b - mean) * s + bias,   s = scale / sqrt(var + eps)
per output channel (exact algebra; done in float64, stored in float32).

A batch normalisation folds when it reads a convolution (or a dense layer)
that has no activation of its own and that no other layer reads; the folded
layer keeps the convolution's name, takes the normalisation's activation,
and the layers that read the normalisation read it instead.  One that does
not fold (DenseNet's and ResNet-v2's, before their convolutions: it reads a
concatenation or an add) is the per-channel affine map it is, x * s + shift:
a depthwise 1x1 convolution of weight s and bias shift, under its own name,
which every backend that runs depthwise convolutions runs (nets/affine.py
then folds one into the convolution after it where that is exact).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .errors import UserError

from .spec import NET_INPUT, Conv, LayerKind, Net

_FOLDS_INTO = (LayerKind.CONV, LayerKind.DENSE)


def fold_batchnorm(net: Net, weights: dict[str, np.ndarray]) -> tuple[Net, dict[str, np.ndarray]]:
    """`net` with every foldable batch normalisation folded away, and its weights."""
    readers = [0] * len(net.layers)
    for i in range(len(net.layers)):
        for s in net.sources(i):
            if s >= 0:
                readers[s] += 1
    weights = dict(weights)
    replaced: dict[int, object] = {}    # index of a folded conv -> its new spec
    renamed: dict[str, str] = {}        # a folded batch norm's name -> its conv's
    dropped: set[int] = set()
    for i, layer in enumerate(net.layers):
        if layer.kind != LayerKind.BATCHNORM:
            continue
        (src,) = net.sources(i)
        before = net.layers[src] if src >= 0 else None
        if (before is None or before.kind not in _FOLDS_INTO or before.activation != "none"
                or readers[src] != 1 or src in replaced):
            continue
        scale = np.asarray(weights.pop(f"{layer.name}.scale"), np.float64)
        shift = np.asarray(weights.pop(f"{layer.name}.bias"), np.float64)
        mean = np.asarray(weights.pop(f"{layer.name}.mean"), np.float64)
        var = np.asarray(weights.pop(f"{layer.name}.var"), np.float64)
        s = _scale(layer, scale, var)
        w = np.asarray(weights[f"{before.name}.weight"], np.float64)
        b = np.asarray(weights[f"{before.name}.bias"], np.float64)
        # a conv's weight is (K, C/g, FH, FW), a dense layer's (in, K): scale each output channel
        w = w * (s[:, None, None, None] if before.kind == LayerKind.CONV else s[None, :])
        weights[f"{before.name}.weight"] = w.astype(np.float32)
        weights[f"{before.name}.bias"] = ((b - mean) * s + shift).astype(np.float32)
        replaced[src] = dataclasses.replace(before, activation=layer.activation)
        renamed[layer.name] = before.name
        dropped.add(i)
    for i, layer in enumerate(net.layers):
        if layer.kind == LayerKind.BATCHNORM and i not in dropped:
            replaced[i] = _as_affine_conv(layer, net.in_shape(i)[0], weights)
    if not dropped and not replaced:
        return net, weights
    layers = []
    for i, layer in enumerate(net.layers):
        if i in dropped:
            continue
        # every input by name, so dropping a layer cannot change what "the layer before" is
        names = tuple(renamed.get(n, n) for n in (net.layers[s].name if s >= 0 else NET_INPUT
                                                  for s in net.sources(i)))
        default = (layers[-1].name if layers else NET_INPUT,)
        layers.append(dataclasses.replace(replaced.get(i, layer), inputs=() if names == default else names))
    return dataclasses.replace(net, layers=tuple(layers)), weights


def _as_affine_conv(layer, channels: int, weights: dict) -> Conv:
    """Batch norm `layer` as a depthwise 1x1 convolution (weights updated in place)."""
    scale, shift, mean, var = (np.asarray(weights.pop(f"{layer.name}.{p}"), np.float64)
                               for p in ("scale", "bias", "mean", "var"))
    s = _scale(layer, scale, var)
    weights[f"{layer.name}.weight"] = s.reshape(channels, 1, 1, 1).astype(np.float32)
    weights[f"{layer.name}.bias"] = (shift - mean * s).astype(np.float32)
    return Conv(layer.name, layer.activation, inputs=layer.inputs, out_channels=channels, kernel=(1, 1),
                groups=channels)


def _scale(layer, scale: np.ndarray, var: np.ndarray) -> np.ndarray:
    """scale / sqrt(var + eps), once var + eps is known to be positive in every channel (else the
    model is damaged: its normalisation divides by zero or takes the root of a negative number)."""
    bad = np.flatnonzero(~(var + layer.eps > 0))
    if bad.size:
        c = int(bad[0])
        raise UserError(f"batch normalisation {layer.name}: var + epsilon is {var[c] + layer.eps:g} in channel {c}, "
                        f"not positive, so it would divide by zero or take the root of a negative number; "
                        f"the model's statistics are damaged: export the model again")
    return scale / np.sqrt(var + layer.eps)
