"""Each layer of a net as built Keras layers on NHWC tensors, with our weights.

Our layouts become Keras's: conv weight (K, C/groups, FH, FW) -> (FH, FW,
C/groups, K); a depthwise one (groups = C, K = C * m) -> DepthwiseConv2D's
(FH, FW, C, m); a dense layer after a spatial one gets its weight rows
permuted from our C,H,W flatten order to the H,W,C order in which Keras's
Flatten reads an NHWC tensor.  LeNet's subsampling is AveragePooling2D
times a per-channel coefficient plus a bias.

Padding: Keras's own 'valid' or 'same' where it is exactly ours for the
layer's input size, else an explicit pad first: zeros before a convolution,
-inf before a max-pool (so padding never wins).  TensorFlow's 'same' puts
the odd row at the bottom, ours may not, so the rule is worked out per axis.
An average pool is Keras's own where its padding is 'valid', or 'same'
without counting the padding (TensorFlow's rule); else the window means of
the zero-padded input times the window's size over the spec's divisor.
TensorFlow runs no convolution both strided and dilated: such a one runs at
stride 1 and its output is subsampled (labelled in the step).
Concatenation is Concatenate, a channel selection tf.gather, a gate a
broadcasting multiply, a softmax over the features in C, H, W order.

TensorFlow is imported on first use only (modules()): the parent process
of the isolated backend imports this module but must never load TensorFlow.
"""
from __future__ import annotations

import math
import os
from functools import lru_cache

import numpy as np

from nets import TRANSFORMER_KINDS, LayerKind
from nets.layouts import chw_rows_to_hwc

from . import keras_transformer

_ACTIVATION = {"none": "linear", "relu": "relu", "sigmoid": "sigmoid", "relu6": "relu6", "tanh": "tanh",
               "silu": "silu", "hardswish": "hard_silu", "hardsigmoid": "hard_sigmoid", "gelu": "gelu",
               "gelu_tanh": "gelu_tanh"}


@lru_cache(maxsize=1)
def modules():
    """(tensorflow, keras), imported on first use: the import takes seconds.
    Level 2 hides TensorFlow's C++ INFO and WARNING lines but keeps errors."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    return tf, keras


def _same_is_ours(size: int, kernel: int, stride: int, before: int, after: int) -> bool:
    """TensorFlow's 'same' on one axis reads the windows ours does: as many
    outputs (ceil(size / stride)), the same padding before the first."""
    out = (size + before + after - kernel) // stride + 1
    same_out = math.ceil(size / stride)
    return out == same_out and before == max((same_out - 1) * stride + kernel - size, 0) // 2


def keras_padding(padding: tuple, kernel: tuple, stride: tuple, hw: tuple) -> str | None:
    """'valid' or 'same' when Keras's padding is ours (top, left, bottom, right)
    on an input of `hw` rows and columns, else None (pad explicitly)."""
    top, left, bottom, right = padding
    if not any(padding):
        return "valid"
    if _same_is_ours(hw[0], kernel[0], stride[0], top, bottom) and \
            _same_is_ours(hw[1], kernel[1], stride[1], left, right):
        return "same"
    return None


class KerasLayer:
    """One of our layers as Keras layers and callables applied in turn; the
    first gets the list of inputs for an add, else the one input.  Holding
    the Keras layers here keeps their variables alive (a concrete function
    holds them only weakly)."""

    def __init__(self, parts: list, arity: int = 1):
        self.parts = parts
        self.arity = arity

    def __call__(self, xs: list):
        x = xs if self.arity > 1 else xs[0]
        for part in self.parts:
            x = part(x)
        return x


def _activation(act: str) -> list:
    """An Activation layer, or none for the identity (no op in the graph)."""
    _, keras = modules()
    return [] if act == "linear" else [keras.layers.Activation(_keras_activation(act))]


def _keras_activation(act: str):
    """Keras's name of an activation, or a function for gelu's tanh form (gelu alone is the exact form)."""
    if act == "gelu_tanh":
        _, keras = modules()
        return lambda y: keras.activations.gelu(y, approximate=True)
    return act


def _built(layer_obj, in_shape: tuple, weights: list):
    layer_obj.build(in_shape)
    layer_obj.set_weights(weights)
    return layer_obj


def _conv(layer, params: dict, in_shape: tuple, act: str) -> list:
    tf, keras = modules()
    c, h, w = in_shape
    top, left, bottom, right = layer.padding
    dilation = tuple(layer.dilation)
    stride = tuple(layer.stride)
    depthwise = layer.groups == c and c > 1
    # TensorFlow has no strided dilated convolution, nor a depthwise one of unequal strides: stride 1, then
    # every stride-th output
    subsample = stride if stride != (1, 1) and (dilation != (1, 1) or depthwise and stride[0] != stride[1]) \
        else None
    if subsample:
        stride = (1, 1)
    padding = keras_padding(layer.padding, layer.span, stride, (h, w))
    parts = []
    if padding is None:
        parts.append(keras.layers.ZeroPadding2D(((top, bottom), (left, right))))
        h, w, padding = h + top + bottom, w + left + right, "valid"
    kernel, weight = tuple(layer.kernel), params["weight"]
    if depthwise:   # each channel to K / C outputs
        multiplier = layer.out_channels // c
        conv = keras.layers.DepthwiseConv2D(kernel, strides=stride, padding=padding, depth_multiplier=multiplier,
                                            dilation_rate=dilation, activation=_keras_activation(act))
        weight = weight.reshape(c, multiplier, *kernel).transpose(2, 3, 0, 1)
    else:
        conv = keras.layers.Conv2D(layer.out_channels, kernel, strides=stride, padding=padding,
                                   groups=layer.groups, dilation_rate=dilation, activation=_keras_activation(act))
        weight = weight.transpose(2, 3, 1, 0)
    parts.append(_built(conv, (None, h, w, c), [weight, params["bias"]]))
    if subsample:
        parts.append(lambda y: y[:, ::subsample[0], ::subsample[1], :])
    return parts


def _avgpool(layer, act: str, in_shape: tuple) -> list:
    tf, keras = modules()
    c, h, w = in_shape
    kernel, stride = tuple(layer.kernel), tuple(layer.stride)
    same = keras_padding(layer.padding, kernel, stride, (h, w))
    if not layer.ceil_mode and (same == "valid" or (same == "same" and not layer.count_include_pad)):
        return [keras.layers.AveragePooling2D(kernel, strides=stride, padding=same)] + _activation(act)
    top, left, bottom, right = layer.padding
    more_rows, more_cols = layer.overhang(in_shape)
    widths = ((top, bottom + more_rows), (left, right + more_cols))
    # window means over the padded input, times the window's size over each output's divisor
    scale = tf.constant((kernel[0] * kernel[1] / layer.divisors(in_shape))[None, :, :, None])
    pool = keras.layers.AveragePooling2D(kernel, strides=stride, padding="valid")
    return [keras.layers.ZeroPadding2D(widths), pool, lambda y: y * scale] + _activation(act)


def _softmax(x):
    tf, _ = modules()
    if x.shape.rank == 4:   # our features run in C, H, W order
        x = tf.reshape(tf.transpose(x, (0, 3, 1, 2)), (-1, int(np.prod(x.shape[1:]))))
    return tf.nn.softmax(x, axis=-1)


def _maxpool(layer, act: str, in_shape: tuple) -> list:
    tf, keras = modules()
    top, left, bottom, right = layer.padding
    padding = keras_padding(layer.padding, layer.kernel, layer.stride, in_shape[1:])
    parts = []
    if padding is None:
        widths = [[0, 0], [top, bottom], [left, right], [0, 0]]
        parts.append(lambda x: tf.pad(x, widths, constant_values=float("-inf")))
        padding = "valid"
    pool = keras.layers.MaxPooling2D(tuple(layer.kernel), strides=tuple(layer.stride), padding=padding)
    return parts + [pool] + _activation(act)


def keras_layer(layer, params: dict[str, np.ndarray], in_shape: tuple) -> KerasLayer:
    """Layer `layer`, reading inputs of `in_shape` (per image, canonical), on NHWC tensors."""
    tf, keras = modules()
    act = _ACTIVATION[layer.activation]
    kind = layer.kind
    if kind in TRANSFORMER_KINDS:   # issue 45: keras_transformer.py
        return KerasLayer(keras_transformer.parts(tf, keras, layer, params, in_shape) + _activation(act))
    if kind == LayerKind.CONV:
        return KerasLayer(_conv(layer, params, in_shape, act))
    if kind == LayerKind.SUBSAMPLE:
        pool = keras.layers.AveragePooling2D(tuple(layer.kernel), strides=tuple(layer.stride), padding="valid")
        coeff, bias = tf.constant(params["coeff"]), tf.constant(params["bias"])
        activation = keras.activations.get(_keras_activation(act))
        return KerasLayer([pool, lambda y: activation(y * coeff + bias)])   # per channel: NHWC's last axis
    if kind == LayerKind.MAXPOOL:
        return KerasLayer(_maxpool(layer, act, in_shape))
    if kind == LayerKind.DENSE:
        weight, parts = params["weight"], []
        if len(in_shape) == 3:
            parts.append(keras.layers.Flatten())
            weight = chw_rows_to_hwc(weight, in_shape)
        dense = keras.layers.Dense(layer.out_features, activation=_keras_activation(act))
        return KerasLayer(parts + [_built(dense, (None, weight.shape[0]), [weight, params["bias"]])])
    if kind == LayerKind.ADD:
        return KerasLayer([keras.layers.Add()] + _activation(act), arity=layer.arity)
    if kind == LayerKind.GLOBAL_AVGPOOL:
        return KerasLayer([keras.layers.GlobalAveragePooling2D(keepdims=True)] + _activation(act))
    if kind == LayerKind.AVGPOOL:
        return KerasLayer(_avgpool(layer, act, in_shape))
    if kind == LayerKind.CONCAT:
        return KerasLayer([keras.layers.Concatenate(axis=-1)] + _activation(act), arity=layer.arity)
    if kind == LayerKind.MUL:   # a (N, 1, 1, C) gate broadcasts over each pixel
        return KerasLayer([lambda xs: xs[0] * xs[1]] + _activation(act), arity=2)
    if kind == LayerKind.CHANNELS:
        order = tf.constant(layer.order, tf.int32)
        return KerasLayer([lambda x: tf.gather(x, order, axis=-1)] + _activation(act))
    if kind == LayerKind.SOFTMAX:
        return KerasLayer([_softmax])
    raise ValueError(f"tensorflow backend: unknown layer kind {kind!r}")
