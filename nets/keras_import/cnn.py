"""Handlers of the CNN layers keras.applications' image classifiers use: each reads one tensor
(the Builder's input) and adds our layers for it, or refuses in one line.  Every handler takes
(builder, Keras layer, `what` naming it for messages, its inputs as Values)."""
from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..spec import AvgPool, BatchNorm, Conv, Dense, GlobalAvgPool, MaxPool, Softmax, Subsample, window_pair
from .builder import Builder, Value, activation_name, channels_last, spatial
from .layouts import conv_kernel_from_keras, dense_rows_from_keras, depthwise_weight


def _same_pad(size: int, kernel: int, stride: int) -> int:
    """Total rows that Keras's 'same' padding adds along one axis."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0)


def _window_pair(layer, attr: str, what: str) -> tuple:
    """The layer's `attr` (kernel_size, strides, ...) as two whole numbers, each at least 1, before any
    arithmetic with it: a model file's config may hold anything."""
    try:
        return window_pair(getattr(layer, attr), attr)
    except ValueError as exc:
        raise UserError(f"{what}: {str(exc).split(': ', 1)[-1]}") from None


def _window(b: Builder, layer, what: str) -> tuple:
    """A convolution's input shape, window, stride, dilation and padding (a ZeroPadding2D's before it included)."""
    c, h, w = spatial(b, what)
    channels_last(layer, what)
    kernel, stride, dilation = (_window_pair(layer, attr, what) for attr in ("kernel_size", "strides", "dilation_rate"))
    before = b.pad or (0, 0, 0, 0)
    padded = (h + before[0] + before[2], w + before[1] + before[3])
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    own = _pool_or_conv_pad(layer.padding, padded, span, stride, what)
    own = own if len(own) == 4 else own + own
    pad = tuple(int(x + y) for x, y in zip(before, own))
    return (c, h, w), kernel, stride, pad, dilation


def conv(b: Builder, layer, what: str, inputs: list[Value]):
    _, kernel, stride, pad, dilation = _window(b, layer, what)
    arrays = layer.get_weights()
    weight = conv_kernel_from_keras(arrays[0])
    bias = arrays[1] if layer.use_bias else np.zeros(layer.filters, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": weight, "bias": bias}, activation=act, out_channels=layer.filters,
        kernel=kernel, stride=stride, pad=pad, groups=getattr(layer, "groups", 1), dilation=dilation))


def _with_softmax(b: Builder, layer, what: str, build) -> None:
    """build(activation) the layer, then a Softmax layer where its activation is softmax."""
    act = activation_name(layer, what)
    build("none" if act == "softmax" else act)
    if act == "softmax":
        b.add(Softmax, f"{layer.name}_softmax", {})


def depthwise(b: Builder, layer, what: str, inputs: list[Value]):
    (c, _, _), kernel, stride, pad, dilation = _window(b, layer, what)
    arrays = layer.get_weights()
    m = layer.depth_multiplier
    bias = arrays[1] if layer.use_bias else np.zeros(c * m, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": depthwise_weight(arrays[0]), "bias": bias}, activation=act,
        out_channels=c * m, kernel=kernel, stride=stride, pad=pad, groups=c, dilation=dilation))


def separable(b: Builder, layer, what: str, inputs: list[Value]):
    """A depthwise convolution (no bias), then a 1x1 one with the bias and the activation."""
    (c, _, _), kernel, stride, pad, dilation = _window(b, layer, what)
    depthwise, pointwise, *rest = layer.get_weights()
    m = layer.depth_multiplier
    b.add(Conv, f"{layer.name}_depthwise", {"weight": depthwise_weight(depthwise), "bias": np.zeros(c * m)},
          out_channels=c * m, kernel=kernel, stride=stride, pad=pad, groups=c, dilation=dilation)
    bias = rest[0] if layer.use_bias else np.zeros(layer.filters, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": conv_kernel_from_keras(pointwise), "bias": bias}, activation=act,
        out_channels=layer.filters, kernel=(1, 1)))


def batchnorm(b: Builder, layer, what: str, inputs: list[Value]):
    b.materialise(what)
    c, _, _ = spatial(b, what)
    if layer.axis not in (-1, 3, [-1], [3]):
        raise UserError(f"{what}: axis {layer.axis} is not supported; only the channels (-1) of channels_last")
    arrays = list(layer.get_weights())
    scale = arrays.pop(0) if layer.scale else np.ones(c, np.float32)
    shift = arrays.pop(0) if layer.center else np.zeros(c, np.float32)
    mean, var = arrays
    b.add(BatchNorm, layer.name, {"scale": scale, "bias": shift, "mean": mean, "var": var}, eps=float(layer.epsilon))


def _affine(b: Builder, layer, what: str, scale, shift):
    """x * scale + shift per channel (Rescaling, Normalization): a depthwise 1x1 convolution."""
    b.materialise(what)
    c, _, _ = spatial(b, what)
    scale = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (c,))
    shift = np.broadcast_to(np.asarray(shift, np.float64).reshape(-1), (c,))
    b.add(Conv, layer.name, {"weight": scale.reshape(c, 1, 1, 1), "bias": shift}, out_channels=c, kernel=(1, 1),
          groups=c)


def rescaling(b: Builder, layer, what: str, inputs: list[Value]):
    _affine(b, layer, what, layer.scale, layer.offset)


def normalization(b: Builder, layer, what: str, inputs: list[Value]):
    if tuple(np.atleast_1d(layer.axis)) not in ((-1,), (3,)) or getattr(layer, "invert", False):
        raise UserError(f"{what}: only a normalisation of the channels (axis -1), not inverted, is supported")
    mean = np.asarray(layer.mean, np.float64).reshape(-1)
    std = np.maximum(np.sqrt(np.asarray(layer.variance, np.float64).reshape(-1)), 1e-7)   # Keras's epsilon
    _affine(b, layer, what, 1.0 / std, -mean / std)


def global_pool(b: Builder, layer, what: str, inputs: list[Value]):
    b.materialise(what)
    c, _, _ = spatial(b, what)
    channels_last(layer, what)
    b.add(GlobalAvgPool, layer.name, {})
    if not getattr(layer, "keepdims", False):   # Keras's output is (N, C): a Dense may follow
        b.flatten_from, b.shape = (c, 1, 1), (c,)


def zero_padding(b: Builder, layer, what: str, inputs: list[Value]):
    spatial(b, what)
    channels_last(layer, what)
    (top, bottom), (left, right) = layer.padding
    before = b.pad or (0, 0, 0, 0)
    b.pad = (before[0] + top, before[1] + left, before[2] + bottom, before[3] + right)


def reshape(b: Builder, layer, what: str, inputs: list[Value]):
    """(N, C) <-> (N, 1, 1, C): the views a squeeze-and-excitation gate and a conv head use."""
    target = tuple(int(d) for d in layer.target_shape)
    features = int(np.prod(b.shape))
    made = b.shapes[b.source]
    if len(target) == 3 and target[:2] == (1, 1) and target[2] == features and tuple(made) == (features, 1, 1):
        b.shape, b.flatten_from = (features, 1, 1), None
    elif target in ((features,), (-1,)) and len(b.shape) == 3 and b.shape[1:] == (1, 1):
        b.flatten_from, b.shape = tuple(b.shape), (features,)
    else:
        raise UserError(f"{what}: a reshape of {b.shape} to {target} is not supported (only (C,) <-> (1, 1, C))")


def _pool_or_conv_pad(padding: str, size: tuple, kernel: tuple, stride: tuple, what: str) -> tuple:
    """Our (top, left, bottom, right) for Keras's `padding`; 'same' puts an odd row or column
    at the bottom or right, as TensorFlow does."""
    if padding == "valid":
        return (0, 0)
    if padding != "same":
        raise UserError(f"{what}: padding {padding!r} is not supported (only valid, same)")
    (th, tw) = [_same_pad(n, k, s) for n, k, s in zip(size, kernel, stride)]
    return (th // 2, tw // 2, th - th // 2, tw - tw // 2)


def _pool(b: Builder, layer, what: str, cls):
    c, h, w = spatial(b, what)
    channels_last(layer, what)
    kernel = _window_pair(layer, "pool_size", what)
    stride = _window_pair(layer, "strides", what) if layer.strides is not None else kernel
    if b.pad is not None and cls is MaxPool:
        # zeros before a max-pool win over negative values, our max-pool's padding never does: the same
        # only where the input is never negative
        maker = b.made(b.source)
        if maker is None or maker.activation not in ("relu", "relu6"):
            b.materialise(what)
            c, h, w = b.shape
    before = b.pad or (0, 0, 0, 0)
    padded = (h + before[0] + before[2], w + before[1] + before[3])
    own = _pool_or_conv_pad(layer.padding, padded, kernel, stride, what)
    own = own if len(own) == 4 else own + own
    pad = tuple(int(x + y) for x, y in zip(before, own))
    if cls is Subsample:
        if not any(pad):
            b.add(cls, layer.name, {"coeff": np.ones(c, np.float32), "bias": np.zeros(c, np.float32)},
                  kernel=kernel, stride=stride)
        elif b.pad is not None and any(own):
            raise UserError(f"{what}: a 'same' average pool after a ZeroPadding2D is not supported")
        else:   # TensorFlow's 'same' divides by the input's elements in each window; a ZeroPadding2D's zeros count
            b.add(AvgPool, layer.name, {}, kernel=kernel, stride=stride, pad=pad, count_include_pad=b.pad is not None)
    else:   # Keras's max-pool padding never wins, as ours
        b.add(cls, layer.name, {}, kernel=kernel, stride=stride, pad=pad)


def dense(b: Builder, layer, what: str, inputs: list[Value]):
    if len(b.shape) == 3 and b.flatten_from is None:
        raise UserError(f"{what}: Dense on a 4-D tensor acts on each pixel's channels; "
                        f"only Dense after Flatten or Dense is supported")
    weight, *rest = layer.get_weights()
    bias = rest[0] if layer.use_bias else np.zeros(layer.units, np.float32)
    if b.flatten_from is not None:
        weight = dense_rows_from_keras(weight, b.flatten_from)
        b.shape, b.flatten_from = b.flatten_from, None   # our Dense flattens its C,H,W input itself
    _with_softmax(b, layer, what, lambda act: b.add(Dense, layer.name, {"weight": weight, "bias": bias},
                                                    activation=act, out_features=layer.units))


def relu(b: Builder, layer, what: str, inputs: list[Value]):
    six = layer.max_value is not None and float(layer.max_value) == 6
    if (layer.max_value is not None and not six) or float(layer.negative_slope) != 0 or float(layer.threshold) != 0:
        raise UserError(f"{what}: only a plain ReLU or ReLU6 is supported (max_value 6 or none, no "
                        f"negative_slope or threshold)")
    if b.ops:
        b.ops = b.ops + (("relu6" if six else "relu",),)
        return
    b.fold_activation("relu6" if six else "relu", what)


def max_pool(b: Builder, layer, what: str, inputs: list[Value]):
    _pool(b, layer, what, MaxPool)


def avg_pool(b: Builder, layer, what: str, inputs: list[Value]):
    _pool(b, layer, what, Subsample)


def softmax(b: Builder, layer, what: str, inputs: list[Value]):
    b.fold_activation("softmax", what)


def activation(b: Builder, layer, what: str, inputs: list[Value]):
    b.fold_activation(activation_name(layer, what), what)


def dropout(b: Builder, layer, what: str, inputs: list[Value]):
    b.notes.append(f"{layer.name}: Dropout skipped (identity at inference)")


def flatten(b: Builder, layer, what: str, inputs: list[Value]):
    channels_last(layer, what)
    b.materialise(what)
    b.flatten_from = spatial(b, what)
    b.shape = (int(np.prod(b.shape)),)
