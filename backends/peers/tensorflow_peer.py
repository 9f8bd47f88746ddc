"""`tensorflow`: the peer a user would pick instead, TensorFlow's own kernels
through Keras layers built from the same weights.

Inside, activations are NHWC (TensorFlow's native CPU layout).  The
compiled function of the whole net takes the canonical NCHW input and
returns the canonical output: the transposes are inside it, so they count
as compute, and load_input / fetch_output are plain copies.  Our layouts
become Keras's: conv weight (K,C,FH,FW) -> (FH,FW,C,K); a dense layer after a
spatial one gets its weight rows permuted from our C,H,W flatten order to
the H,W,C order in which Keras's Flatten reads an NHWC tensor.  LeNet's
subsampling is AveragePooling2D times a per-channel coefficient plus a bias.

Modes: `graph` (tf.function, TensorFlow's graph optimiser, no XLA) and
`xla` (tf.function(jit_compile=True): the net compiled by XLA, which can
fuse layers).  prepare() calls the whole-net function once, so XLA's
compilation happens there, untimed.

It runs in a child process of its own (backends/isolated.py): PoCL's kernel
compiler breaks in a process that has loaded TensorFlow.

Timing has no device events: wall time only.  The whole net is one compiled
`tf.function`; `run_timed` calls one compiled function per layer (NHWC
between them; the first and last convert the layout) and synchronises after
each (see `_sync`).  TensorFlow keeps its default thread settings, as a
user would have them.
"""
from __future__ import annotations

import importlib.util
import os
import time
from functools import lru_cache

import numpy as np

from nets import Net
from nets.errors import UserError
from nets.layouts import chw_rows_to_hwc

from ..base import Backend, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name
from ..isolated import IsolatedBackend

MODES = ("graph", "xla")
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


def _check_mode(mode: str | None) -> str:
    """`mode` itself (None: graph)."""
    mode = mode or "graph"
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r} of the tensorflow backend; it has {', '.join(MODES)}")
    return mode


def _nchw_to_nhwc(x):
    tf, _ = _modules()
    return tf.transpose(x, (0, 2, 3, 1))


def _nhwc_to_nchw(y):
    tf, _ = _modules()
    return tf.transpose(y, (0, 3, 1, 2))


class TensorflowNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int, mode: str | None = None):
        super().__init__(net, batch)
        tf, _ = _modules()
        self.mode = _check_mode(mode)
        self.memory_bytes = 0
        self._keras_layers = []   # a concrete function holds its variables weakly: keep them
        for i, layer in enumerate(net.layers):
            params = layer_params(net, weights, i)
            self.memory_bytes += sum(a.nbytes for a in params.values())
            self._keras_layers.append(keras_parts(layer, params, net.in_shape(i)))
        # the conversions between the canonical layout and NHWC, at the two ends of the net
        self._enter = [_nchw_to_nhwc] if len(net.input_shape) == 3 else []
        self._leave = [_nhwc_to_nchw] if len(net.output_shape) == 3 else []
        self._whole = self._compile(self._enter + [p for parts in self._keras_layers for p in parts],
                                    (batch,) + tuple(net.input_shape), self._leave)
        # one function per layer, NHWC in and out (run_layer converts on the host) ...
        self._steps = [self._compile(parts, _nhwc_shape(batch, net.in_shape(i)))
                       for i, parts in enumerate(self._keras_layers)]
        # ... and as run_timed calls them, with the conversions in the first and last
        self._timed = self._timed_steps()
        _sync(self._whole(tf.zeros((batch,) + tuple(net.input_shape))))   # XLA compiles here, not in run()
        self._x = None
        self._y = None
        self.config = {"mode": self.mode,
                       "graph": "tf.function(jit_compile=True): XLA" if self.mode == "xla" else "tf.function, no XLA",
                       "layout": "NHWC inside; NCHW in and out, transposed inside the compiled function",
                       "per_layer": f"one compiled function per layer{' (XLA)' if self.mode == 'xla' else ''}; "
                                    "the first and last also convert the layout",
                       "threads": "TensorFlow defaults", "timing": "wall clock only"}

    def _compile(self, parts, in_shape, after=()):
        """The chain of `parts` (then `after`) traced once, here in prepare,
        into a graph for the input shape `in_shape` (batch included), with
        XLA in the xla mode.  The concrete function is called directly, so it
        never retraces."""
        tf, _ = _modules()
        chain = list(parts) + list(after)

        def body(x):
            for part in chain:
                x = part(x)
            return x
        spec = tf.TensorSpec(in_shape, tf.float32)
        return tf.function(body, jit_compile=self.mode == "xla").get_concrete_function(spec)

    def _timed_steps(self) -> list:
        """self._steps, but the first takes the canonical input and the last
        gives the canonical output, so the per-layer times add up to a pass."""
        steps = list(self._steps)
        last = len(steps) - 1
        for i in sorted({0, last}):
            enter = self._enter if i == 0 else []
            leave = self._leave if i == last else []
            if enter or leave:
                shape = (self.batch,) + tuple(self.net.input_shape) if enter else \
                    _nhwc_shape(self.batch, self.net.in_shape(i))
                steps[i] = self._compile(enter + self._keras_layers[i], shape, leave)
        return steps

    def load_input(self, x):
        """A plain copy of the canonical array: the transpose is the compiled function's."""
        tf, _ = _modules()
        self._x = tf.constant(x)

    def run(self):
        self._y = self._whole(self._x)
        _sync(self._y)

    def fetch_output(self):
        return self._y.numpy()

    def run_timed(self):
        x = self._x
        timings = []
        for layer, step in zip(self.net.layers, self._timed):
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
        self._steps = self._timed = self._whole = self._keras_layers = self._x = self._y = None


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

    def modes(self):
        return list(MODES)

    def prepare(self, net, weights, batch, mode=None):
        return TensorflowNet(net, weights, batch, mode)


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

    @property
    def deterministic(self) -> bool:
        """True on the CPU, where both modes repeat bit for bit (tested); on a
        GPU cuDNN's autotuner and XLA's atomic reductions may differ in the
        last bits from pass to pass.  Asks the child, starting it if needed."""
        return self.info()["kind"] == "cpu"
