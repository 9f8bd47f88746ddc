"""A per-channel affine map folded into the convolution that reads it.

Keras's Rescaling and Normalization at a model's input, and a batch norm
that cannot fold into the convolution before it (nets/batchnorm.py), are
each x * a + b per channel: a depthwise 1x1 convolution.  When such a layer
has no activation and its only reader is a convolution, that convolution
can take it in:
    conv(x * a + b) = conv'(x),  w'[k, c] = w[k, c] * a[c],
    bias'[k] = bias[k] + sum over c and taps of w[k, c] * b[c]
This is exact where every tap reads the input: a convolution with padding
reads zeros of x * a + b there, not of x, so with a shift b != 0 and
padding the affine layer stays (a layer of its own, which every backend
that runs depthwise convolutions runs).  Done in float64, stored in float32.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .spec import NET_INPUT, LayerKind, Net


def is_channel_affine(layer, in_channels: int) -> bool:
    """A depthwise 1x1 stride-1 unpadded convolution: x * weight + bias per channel."""
    return (layer.kind == LayerKind.CONV and layer.kernel == (1, 1) and layer.stride == (1, 1)
            and not any(layer.padding) and layer.groups == layer.out_channels == in_channels)


def fold_channel_affines(net: Net, weights: dict[str, np.ndarray]) -> tuple[Net, dict[str, np.ndarray]]:
    """`net` with each foldable per-channel affine layer folded into the convolution after it."""
    weights = dict(weights)
    readers: dict[int, list[int]] = {}
    for i in range(len(net.layers)):
        for s in net.sources(i):
            readers.setdefault(s, []).append(i)
    dropped: dict[int, int] = {}   # affine layer -> the conv that took it
    for i, layer in enumerate(net.layers):
        if not is_channel_affine(layer, net.in_shape(i)[0]) or layer.activation != "none":
            continue
        after = readers.get(i, [])
        if len(after) != 1 or i in dropped.values():
            continue
        j = after[0]
        conv = net.layers[j]
        if conv.kind != LayerKind.CONV or net.sources(j) != (i,) or j in dropped.values():
            continue
        a = np.asarray(weights[f"{layer.name}.weight"], np.float64).reshape(-1)
        b = np.asarray(weights[f"{layer.name}.bias"], np.float64)
        if any(conv.padding) and np.any(b != 0):
            continue
        w = np.asarray(weights[f"{conv.name}.weight"], np.float64)
        k, cg = w.shape[:2]
        # the input channel each weight reads: group g's filters read channels g*cg .. g*cg+cg-1
        channel = (np.arange(k) // (k // conv.groups))[:, None] * cg + np.arange(cg)[None, :]
        weights[f"{conv.name}.bias"] = (np.asarray(weights[f"{conv.name}.bias"], np.float64)
                                        + (w * b[channel][:, :, None, None]).sum(axis=(1, 2, 3))).astype(np.float32)
        weights[f"{conv.name}.weight"] = (w * a[channel][:, :, None, None]).astype(np.float32)
        del weights[f"{layer.name}.weight"], weights[f"{layer.name}.bias"]
        dropped[i] = j
    if not dropped:
        return net, weights
    layers = []
    for i, layer in enumerate(net.layers):
        if i in dropped:
            continue
        # an input that was a folded layer is that layer's own input; every input by name
        names = tuple(NET_INPUT if s < 0 else net.layers[s].name for s in
                      ((net.sources(s)[0] if s in dropped else s) for s in net.sources(i)))
        default = (layers[-1].name if layers else NET_INPUT,)
        layers.append(dataclasses.replace(layer, inputs=() if names == default else names))
    return dataclasses.replace(net, layers=tuple(layers)), weights
