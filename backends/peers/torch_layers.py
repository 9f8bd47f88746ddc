"""Each layer of a net as a PyTorch function of its input tensors (a list,
one per input it names), on the device the weights were moved to.

Tensors are NCHW logically; in the channels-last modes they are NHWC in
memory (torch.channels_last) and every op here keeps that format.  Our
layouts are PyTorch's own (conv weight (K, C/groups, FH, FW), flatten in
C, H, W order); only the dense weight (in, out) is used as the right
operand of addmm.  Padding that PyTorch's ops cannot express (asymmetric,
or a max-pool's wider than half its window) is an explicit F.pad first:
zeros before a convolution, -inf before a max-pool, so padding never wins.
An average pool is PyTorch's own avg_pool2d (its ceil mode and counting
rules are the spec's) where its padding is symmetric and at most half the
window; else the window sums of the zero-padded input (avg_pool2d with
divisor 1) times 1 / the spec's divisors.  Concatenation is torch.cat, a
channel selection index_select, a gate a broadcasting multiply.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nets import TRANSFORMER_KINDS, LayerKind

from . import torch_transformer


def _activation(torch, name: str) -> Callable | None:
    """The activation, in place on a layer's fresh output; None for none."""
    F = torch.nn.functional
    return {"relu": torch.relu_, "sigmoid": torch.sigmoid_, "tanh": torch.tanh_,
            "relu6": lambda y: F.hardtanh_(y, 0.0, 6.0), "hardswish": lambda y: F.hardswish(y, inplace=True),
            "hardsigmoid": lambda y: F.hardsigmoid(y, inplace=True), "silu": lambda y: F.silu(y, inplace=True),
            "gelu": F.gelu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}.get(name)


def _explicit_pad(torch, padding: tuple, value: float) -> Callable:
    """x padded by (top, left, bottom, right) with `value` (F.pad takes W's sides first)."""
    top, left, bottom, right = padding
    return lambda x: torch.nn.functional.pad(x, (left, right, top, bottom), value=value)


def _conv(torch, layer, p: dict) -> Callable:
    F = torch.nn.functional
    weight, bias, stride, groups = p["weight"], p["bias"], tuple(layer.stride), layer.groups
    dilation = tuple(layer.dilation)
    top, left, bottom, right = layer.padding
    if (top, left) == (bottom, right):   # conv2d's own symmetric padding
        return lambda xs: F.conv2d(xs[0], weight, bias, stride, (top, left), dilation, groups)
    pad = _explicit_pad(torch, layer.padding, 0.0)
    return lambda xs: F.conv2d(pad(xs[0]), weight, bias, stride, 0, dilation, groups)


def _avgpool(torch, layer, in_shape: tuple, dev) -> Callable:
    F = torch.nn.functional
    kernel, stride = tuple(layer.kernel), tuple(layer.stride)
    top, left, bottom, right = layer.padding
    if (top, left) == (bottom, right) and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
        return lambda xs: F.avg_pool2d(xs[0], kernel, stride, (top, left), layer.ceil_mode, layer.count_include_pad)
    more_rows, more_cols = layer.overhang(in_shape)
    pad = _explicit_pad(torch, (top, left, bottom + more_rows, right + more_cols), 0.0)
    scale = torch.from_numpy(1.0 / layer.divisors(in_shape)).to(dev)
    return lambda xs: F.avg_pool2d(pad(xs[0]), kernel, stride, divisor_override=1) * scale


def _maxpool(torch, layer) -> Callable:
    F = torch.nn.functional
    kernel, stride = tuple(layer.kernel), tuple(layer.stride)
    top, left, bottom, right = layer.padding
    # max_pool2d pads with -inf itself, symmetrically and at most half the window
    if (top, left) == (bottom, right) and 2 * top <= kernel[0] and 2 * left <= kernel[1]:
        return lambda xs: F.max_pool2d(xs[0], kernel, stride, (top, left))
    pad = _explicit_pad(torch, layer.padding, float("-inf"))
    return lambda xs: F.max_pool2d(pad(xs[0]), kernel, stride)


def _add(xs):
    y = xs[0] + xs[1]
    for other in xs[2:]:
        y.add_(other)   # in place on the sum's fresh tensor
    return y


def layer_fn(torch, layer, params: dict[str, np.ndarray], dev, channels_last: bool,
             in_shape: tuple = ()) -> tuple[Callable, int]:
    """Layer `layer` as a function of the list of its inputs, and the bytes its
    parameters hold on the device.  With `channels_last` the conv weights are
    stored NHWC in memory, so cuDNN and oneDNN pick their NHWC kernels for
    inputs in that format too."""
    F = torch.nn.functional
    # a copy: an imported model's arrays may be read-only views of its file, which torch warns about
    p = {k: torch.from_numpy(np.array(v, np.float32, order="C")).to(dev) for k, v in params.items()}
    kind = layer.kind
    if kind == LayerKind.CONV:
        if channels_last:
            p["weight"] = p["weight"].contiguous(memory_format=torch.channels_last)
        op = _conv(torch, layer, p)
    elif kind == LayerKind.SUBSAMPLE:
        coeff, bias = p["coeff"].view(1, -1, 1, 1), p["bias"].view(1, -1, 1, 1)
        kernel, stride = tuple(layer.kernel), tuple(layer.stride)

        def op(xs):
            return torch.addcmul(bias, F.avg_pool2d(xs[0], kernel, stride), coeff)
    elif kind == LayerKind.MAXPOOL:
        op = _maxpool(torch, layer)
    elif kind == LayerKind.DENSE:
        def op(xs):   # reshape follows the logical C,H,W order whatever the memory format
            return torch.addmm(p["bias"], xs[0].reshape(xs[0].shape[0], -1), p["weight"])
    elif kind == LayerKind.ADD:
        op = _add
    elif kind == LayerKind.GLOBAL_AVGPOOL:
        def op(xs):
            return F.adaptive_avg_pool2d(xs[0], 1)
    elif kind == LayerKind.AVGPOOL:
        op = _avgpool(torch, layer, in_shape, dev)
    elif kind == LayerKind.CONCAT:
        def op(xs):
            return torch.cat(xs, 1)
    elif kind == LayerKind.MUL:
        def op(xs):   # an (N, C, 1, 1) gate broadcasts over each channel's plane
            return xs[0] * xs[1]
    elif kind == LayerKind.CHANNELS:
        index = torch.tensor(layer.order, dtype=torch.long, device=dev)

        def op(xs):   # a fresh tensor, never a view: the activation may work in place
            return torch.index_select(xs[0], 1, index)
    elif kind == LayerKind.SOFTMAX:
        def op(xs):   # over the features in the logical C,H,W order
            return torch.softmax(xs[0].reshape(xs[0].shape[0], -1), 1)
    elif kind in TRANSFORMER_KINDS:
        op = torch_transformer.layer_fn(torch, layer, p, in_shape, dev)
    else:
        raise ValueError(f"torch backend: unknown layer kind {kind!r}")
    activate = _activation(torch, layer.activation)
    nbytes = sum(t.numel() * t.element_size() for t in p.values())
    if activate is None:
        return op, nbytes
    return (lambda xs: activate(op(xs))), nbytes   # every op above returns a fresh tensor
