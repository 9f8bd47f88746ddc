"""The float64 reference every backend is checked against.

Written from the layers' definitions, not for speed, and on purpose unlike
the numpy backend: convolution here is a sum of shifted inputs (one term per
filter tap), pooling takes windows explicitly.  Its own tests are worked out
by hand (tests/test_oracle.py), and issue 7's TensorFlow cross-check tests
it against code we did not write.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nets import Layer, Net


def activate(x: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    return x


def conv(x, weight, bias, stride=(1, 1), pad=(0, 0)):
    """x (N,C,H,W), weight (K,C,FH,FW) -> (N,K,OH,OW); cross-correlation."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    weight = np.asarray(weight, np.float64)
    n, c, h, w = x.shape
    k, _, fh, fw = weight.shape
    sh, sw = stride
    oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
    out = np.zeros((n, oh, ow, k))
    for dy in range(fh):
        for dx in range(fw):
            tap = x[:, :, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw]  # (N,C,OH,OW)
            out += np.tensordot(tap, weight[:, :, dy, dx], axes=([1], [1]))       # sum over C
    out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
    return out + np.asarray(bias, np.float64)[None, :, None, None]


def _windows(x, kernel, stride):
    """(N,C,H,W) -> (N,C,OH,OW,FH,FW) view of every pooling window."""
    win = sliding_window_view(np.asarray(x, np.float64), tuple(kernel), axis=(2, 3))
    return win[:, :, ::stride[0], ::stride[1]]


def subsample(x, coeff, bias, kernel=(2, 2), stride=(2, 2)):
    mean = _windows(x, kernel, stride).mean(axis=(4, 5))
    return mean * np.asarray(coeff, np.float64)[None, :, None, None] + np.asarray(bias, np.float64)[None, :, None, None]


def maxpool(x, kernel=(2, 2), stride=(2, 2)):
    return _windows(x, kernel, stride).max(axis=(4, 5))


def dense(x, weight, bias):
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return x @ np.asarray(weight, np.float64) + np.asarray(bias, np.float64)


def layer_forward(layer: Layer, x: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    p = {k.split(".", 1)[1]: v for k, v in weights.items() if k.split(".", 1)[0] == layer.name}
    if layer.kind == "conv":
        y = conv(x, p["weight"], p["bias"], layer.stride, layer.pad)
    elif layer.kind == "subsample":
        y = subsample(x, p["coeff"], p["bias"], layer.kernel, layer.stride)
    elif layer.kind == "maxpool":
        y = maxpool(x, layer.kernel, layer.stride)
    elif layer.kind == "dense":
        y = dense(x, p["weight"], p["bias"])
    else:
        raise ValueError(f"oracle: unknown layer kind {layer.kind!r}")
    return activate(y, layer.activation)


def forward(net: Net, weights: dict[str, np.ndarray], x: np.ndarray) -> list[np.ndarray]:
    """Every layer's float64 output, end to end."""
    outs = []
    for layer in net.layers:
        x = layer_forward(layer, x, weights)
        outs.append(x)
    return outs
