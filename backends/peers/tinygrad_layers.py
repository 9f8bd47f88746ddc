"""Each layer of a net as a tinygrad function of its input tensors (a list,
one per input it names), with its parameters already on the device.

Our layouts are tinygrad's own (NCHW; conv weight (K, C/groups, FH, FW);
flatten in C, H, W order); the dense weight (in, out) is the right operand
of the matmul.  Padding is an explicit pad first, on the H and W axes:
zeros before a convolution, -inf before a max-pool, so padding never wins.
A padded or ceil-mode average pool is the window sums of the zero-padded
input times 1 / the spec's divisors (one rule for every counting mode); a
channel selection is a concatenation of its contiguous runs.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nets import TRANSFORMER_KINDS, LayerKind

from . import tinygrad_transformer


def _activation(name: str) -> Callable | None:
    return {"relu": lambda y: y.relu(), "sigmoid": lambda y: y.sigmoid(), "tanh": lambda y: y.tanh(),
            "relu6": lambda y: y.relu6(), "hardswish": lambda y: y.hardswish(),
            "hardsigmoid": lambda y: y.hardsigmoid(), "silu": lambda y: y.silu(),
            "gelu": tinygrad_transformer.gelu, "gelu_tanh": lambda y: y.gelu()}.get(name)


def _padded(x, padding: tuple, value: float):
    """x padded by (top, left, bottom, right) with `value`; x itself when there is none."""
    top, left, bottom, right = padding
    if not any(padding):
        return x
    return x.pad(((0, 0), (0, 0), (top, bottom), (left, right)), value=value)


def _runs(order) -> list[tuple[int, int]]:
    """The channel order as (start, stop) runs of consecutive channels."""
    runs: list[tuple[int, int]] = []
    for c in order:
        if runs and runs[-1][1] == c:
            runs[-1] = (runs[-1][0], c + 1)
        else:
            runs.append((c, c + 1))
    return runs


def _avgpool(Tensor, layer, in_shape: tuple, device: str) -> Callable:
    kernel, stride = tuple(layer.kernel), tuple(layer.stride)
    top, left, bottom, right = layer.padding
    more_rows, more_cols = layer.overhang(in_shape)
    padding = (top, left, bottom + more_rows, right + more_cols)
    window = float(kernel[0] * kernel[1])
    scale = Tensor(np.ascontiguousarray(window / layer.divisors(in_shape), np.float32), device=device).realize()
    return lambda xs: _padded(xs[0], padding, 0.0).avg_pool2d(kernel, stride) * scale


def layer_fn(Tensor, layer, params: dict[str, np.ndarray], device: str,
             in_shape: tuple = ()) -> tuple[Callable, int]:
    """Layer `layer` (whose input has `in_shape`, per image) as a function of the
    list of its inputs, and the bytes its parameters hold on the device
    (uploaded and realized here)."""
    p = {k: Tensor(np.ascontiguousarray(v, np.float32), device=device).realize() for k, v in params.items()}
    kind = layer.kind
    if kind == LayerKind.CONV:
        w, b, stride, groups, padding = p["weight"], p["bias"], tuple(layer.stride), layer.groups, layer.padding
        dilation = tuple(layer.dilation)

        def op(xs):
            return _padded(xs[0], padding, 0.0).conv2d(w, b, groups=groups, stride=stride, dilation=dilation)
    elif kind == LayerKind.SUBSAMPLE:
        coeff, bias = p["coeff"].reshape(1, -1, 1, 1), p["bias"].reshape(1, -1, 1, 1)
        kernel, stride = tuple(layer.kernel), tuple(layer.stride)

        def op(xs):
            return xs[0].avg_pool2d(kernel, stride) * coeff + bias
    elif kind == LayerKind.MAXPOOL:
        kernel, stride, padding = tuple(layer.kernel), tuple(layer.stride), layer.padding

        def op(xs):
            return _padded(xs[0], padding, float("-inf")).max_pool2d(kernel, stride)
    elif kind == LayerKind.DENSE:
        w, b = p["weight"], p["bias"]

        def op(xs):
            return xs[0].reshape(xs[0].shape[0], -1).matmul(w) + b
    elif kind == LayerKind.ADD:
        def op(xs):
            y = xs[0]
            for other in xs[1:]:
                y = y + other
            return y
    elif kind == LayerKind.GLOBAL_AVGPOOL:
        def op(xs):
            return xs[0].mean(axis=(2, 3), keepdim=True)
    elif kind == LayerKind.BATCHNORM:
        shift = {k: p[k].reshape(1, -1, 1, 1) for k in ("scale", "bias", "mean", "var")}
        eps = float(layer.eps)

        def op(xs):
            return (xs[0] - shift["mean"]) / (shift["var"] + eps).sqrt() * shift["scale"] + shift["bias"]
    elif kind == LayerKind.AVGPOOL:
        op = _avgpool(Tensor, layer, in_shape, device)
    elif kind == LayerKind.CONCAT:
        def op(xs):
            return xs[0].cat(*xs[1:], dim=1)
    elif kind == LayerKind.MUL:
        def op(xs):   # an (N, C, 1, 1) gate broadcasts over each channel's plane
            return xs[0] * xs[1]
    elif kind == LayerKind.CHANNELS:
        runs = _runs(layer.order)

        def op(xs):
            parts = [xs[0][:, a:b] for a, b in runs]
            return parts[0].cat(*parts[1:], dim=1) if len(parts) > 1 else parts[0]
    elif kind == LayerKind.SOFTMAX:
        def op(xs):   # over the features in the logical C,H,W order
            return xs[0].reshape(xs[0].shape[0], -1).softmax(axis=1)
    elif kind in TRANSFORMER_KINDS:   # issue 45: tinygrad_transformer.py
        op = tinygrad_transformer.layer_fn(Tensor, layer, p, in_shape, device)
    else:
        raise ValueError(f"tinygrad backend: unknown layer kind {kind!r}")
    activate = _activation(layer.activation)
    nbytes = sum(a.nbytes for a in params.values())
    if activate is None:
        return op, nbytes
    return (lambda xs: activate(op(xs))), nbytes
