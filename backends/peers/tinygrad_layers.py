"""Each layer of a net as a tinygrad function of its input tensors (a list,
one per input it names), with its parameters already on the device.

Our layouts are tinygrad's own (NCHW; conv weight (K, C/groups, FH, FW);
flatten in C, H, W order); the dense weight (in, out) is the right operand
of the matmul.  Padding is an explicit pad first, on the H and W axes:
zeros before a convolution, -inf before a max-pool, so padding never wins.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nets import LayerKind


def _activation(name: str) -> Callable | None:
    return {"relu": lambda y: y.relu(), "sigmoid": lambda y: y.sigmoid(), "tanh": lambda y: y.tanh(),
            "relu6": lambda y: y.relu6()}.get(name)


def _padded(x, padding: tuple, value: float):
    """x padded by (top, left, bottom, right) with `value`; x itself when there is none."""
    top, left, bottom, right = padding
    if not any(padding):
        return x
    return x.pad(((0, 0), (0, 0), (top, bottom), (left, right)), value=value)


def layer_fn(Tensor, layer, params: dict[str, np.ndarray], device: str) -> tuple[Callable, int]:
    """Layer `layer` as a function of the list of its inputs, and the bytes its
    parameters hold on the device (uploaded and realized here)."""
    p = {k: Tensor(np.ascontiguousarray(v, np.float32), device=device).realize() for k, v in params.items()}
    kind = layer.kind
    if kind == LayerKind.CONV:
        w, b, stride, groups, padding = p["weight"], p["bias"], tuple(layer.stride), layer.groups, layer.padding

        def op(xs):
            return _padded(xs[0], padding, 0.0).conv2d(w, b, groups=groups, stride=stride)
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
    else:
        raise ValueError(f"tinygrad backend: unknown layer kind {kind!r}")
    activate = _activation(layer.activation)
    nbytes = sum(a.nbytes for a in params.values())
    if activate is None:
        return op, nbytes
    return (lambda xs: activate(op(xs))), nbytes
