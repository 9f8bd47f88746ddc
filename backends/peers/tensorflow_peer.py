"""`tensorflow`: the peer a user would pick instead, TensorFlow's own kernels
through Keras layers built from the same weights.

Inside, activations are NHWC (TensorFlow's native CPU layout); load_input and
fetch_output convert to and from the canonical NCHW on the host.  Our layouts
become Keras's: conv weight (K,C,FH,FW) -> (FH,FW,C,K); a dense layer after a
spatial one gets its weight rows permuted from our C,H,W flatten order to
the H,W,C order in which Keras's Flatten reads an NHWC tensor.  LeNet's
subsampling is AveragePooling2D times a per-channel coefficient plus a bias.

It runs in a child process of its own (isolated.py): PoCL's kernel
compiler breaks in a process that has loaded TensorFlow.

Timing has no device events: wall time only.  The whole net is one compiled
`tf.function`; `run_timed` calls one compiled function per layer and
synchronises after each (see `_sync`).  TensorFlow keeps its default thread
settings, as a user would have them.
"""
from __future__ import annotations

import importlib.util
import os
import time
from functools import lru_cache

import numpy as np

from nets import Net
from nets.layouts import chw_rows_to_hwc

from ..base import Backend, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name
from .isolated import IsolatedBackend

_ACTIVATION = {"none": "linear", "relu": "relu", "sigmoid": "sigmoid"}


@lru_cache(maxsize=1)
def _modules():
    """(tensorflow, keras), imported on first use: the import takes seconds.
    Level 2 hides TensorFlow's C++ INFO and WARNING lines but keeps errors."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf
    return tf, keras


def _sync(tensor) -> None:
    """Return once `tensor` is computed.  On the CPU a tf.function call already
    blocks until its outputs exist; on a GPU kernels are queued, so wait for
    every device too (outside any tf.function, as sync_devices requires)."""
    tf, _ = _modules()
    if tensor.device.endswith("CPU:0"):
        return
    tf.test.experimental.sync_devices()


def to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def to_nchw(y: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if y.ndim == 4 else np.array(y)


def _conv_padding(layer, in_shape) -> str | None:
    """'valid' or 'same' when Keras's own padding is ours, else None (pad explicitly).
    'same' pads (k-1)/2 each side only at stride 1 with an odd kernel."""
    if tuple(layer.pad) == (0, 0):
        return "valid"
    if tuple(layer.stride) == (1, 1) and all(k % 2 == 1 and 2 * p == k - 1 for k, p in zip(layer.kernel, layer.pad)):
        return "same"
    return None


def keras_parts(layer, params: dict, in_shape: tuple) -> list:
    """Layer `layer` as a list of built Keras layers / callables on NHWC tensors."""
    tf, keras = _modules()
    act = _ACTIVATION[layer.activation]
    if layer.kind == "conv":
        c, h, w = in_shape
        padding = _conv_padding(layer, in_shape)
        parts = []
        if padding is None:
            parts.append(keras.layers.ZeroPadding2D(tuple(layer.pad)))
            h, w = h + 2 * layer.pad[0], w + 2 * layer.pad[1]
            padding = "valid"
        conv = keras.layers.Conv2D(layer.out_channels, tuple(layer.kernel), strides=tuple(layer.stride),
                                   padding=padding, activation=act)
        conv.build((None, h, w, c))
        conv.set_weights([params["weight"].transpose(2, 3, 1, 0), params["bias"]])
        return parts + [conv]
    if layer.kind == "subsample":
        pool = keras.layers.AveragePooling2D(tuple(layer.kernel), strides=tuple(layer.stride), padding="valid")
        coeff = tf.constant(params["coeff"])
        bias = tf.constant(params["bias"])
        activation = keras.activations.get(act)
        return [pool, lambda y: activation(y * coeff + bias)]   # per channel: the last axis of NHWC
    if layer.kind == "maxpool":
        return [keras.layers.MaxPooling2D(tuple(layer.kernel), strides=tuple(layer.stride), padding="valid"),
                keras.layers.Activation(act)]
    if layer.kind == "dense":
        weight = params["weight"]
        parts = []
        if len(in_shape) == 3:
            parts.append(keras.layers.Flatten())
            weight = chw_rows_to_hwc(weight, in_shape)
        dense = keras.layers.Dense(layer.out_features, activation=act)
        dense.build((None, weight.shape[0]))
        dense.set_weights([weight, params["bias"]])
        return parts + [dense]
    raise ValueError(f"tensorflow backend: unknown layer kind {layer.kind!r}")


def _nhwc_shape(batch: int, shape: tuple) -> tuple:
    return (batch, shape[1], shape[2], shape[0]) if len(shape) == 3 else (batch,) + tuple(shape)


class TensorflowNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int):
        super().__init__(net, batch)
        tf, _ = _modules()
        self.memory_bytes = 0
        self._steps = []       # one compiled function per layer, NHWC in and out
        self._keras_layers = []
        for i, layer in enumerate(net.layers):
            params = layer_params(net, weights, i)
            self.memory_bytes += sum(a.nbytes for a in params.values())
            parts = keras_parts(layer, params, net.in_shape(i))
            self._keras_layers.append(parts)   # a concrete function holds its variables weakly: keep them
            self._steps.append(self._compile(parts, net.in_shape(i)))
        self._whole = self._compile(self._steps, net.input_shape)
        self.config = {"graph": "tf.function, no XLA", "layout": "NHWC",
                       "threads": "TensorFlow defaults", "timing": "wall clock only"}
        self._x = None
        self._y = None

    def _compile(self, parts, in_shape):
        """The chain of `parts` traced once, here in prepare, into a graph for
        this batch's input shape.  The concrete function is called directly, so
        it never retraces.  The whole net's parts are the layers' concrete
        functions: calls inside one graph, which TensorFlow's optimiser inlines."""
        tf, _ = _modules()

        def body(x):
            for part in parts:
                x = part(x)
            return x
        spec = tf.TensorSpec(_nhwc_shape(self.batch, in_shape), tf.float32)
        return tf.function(body).get_concrete_function(spec)

    def load_input(self, x):
        tf, _ = _modules()
        self._x = tf.constant(to_nhwc(x))

    def run(self):
        self._y = self._whole(self._x)
        _sync(self._y)

    def fetch_output(self):
        return to_nchw(self._y.numpy())

    def run_timed(self):
        x = self._x
        timings = []
        for layer, step in zip(self.net.layers, self._steps):
            t0 = time.perf_counter()
            x = step(x)
            _sync(x)
            ms = (time.perf_counter() - t0) * 1e3
            timings.append(LayerTiming(layer.name, ms, None, [Step(layer.kind, ms, "wall")]))
        self._y = x
        return timings

    def run_layer(self, index, x):
        tf, _ = _modules()
        x = self.check_input(x, index)
        return to_nchw(self._steps[index](tf.constant(to_nhwc(x))).numpy())

    def close(self):
        self._steps = self._whole = self._keras_layers = self._x = self._y = None


class TensorflowInProcess(Backend):
    """The backend itself; it runs inside the child process of TensorflowBackend."""

    name = "tensorflow"

    def info(self):
        tf, keras = _modules()
        gpus = tf.config.list_logical_devices("GPU")
        device = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
            "device_name", gpus[0].name) if gpus else cpu_name()
        return {"device": device, "kind": "gpu" if gpus else "cpu",
                "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
                "threads": {"intra_op": tf.config.threading.get_intra_op_parallelism_threads() or "default",
                            "inter_op": tf.config.threading.get_inter_op_parallelism_threads() or "default"}}

    def prepare(self, net, weights, batch):
        return TensorflowNet(net, weights, batch)


class TensorflowBackend(IsolatedBackend):
    """What the registry hands out: TensorFlow in a child process of its own,
    because PoCL's compiler breaks in a process that has loaded TensorFlow."""

    name = "tensorflow"
    summary = "peer: the same net as Keras layers in a compiled tf.function (TensorFlow's kernels; wall time only)"
    inner = "backends.peers.tensorflow_peer:TensorflowInProcess"

    @classmethod
    def unavailable_reason(cls):
        for module in ("tensorflow", "keras"):
            if importlib.util.find_spec(module) is None:
                return f"{module} is not installed (pip install 'clblast-compare[tensorflow]')"
        return None
