"""`tensorflow`: the peer a user would pick instead, TensorFlow's own kernels
through Keras layers built from the same weights.

Inside, activations are NHWC (TensorFlow's native CPU layout).  The
compiled function of the whole net takes the canonical NCHW input and
returns the canonical output: the transposes are inside it, so they count
as compute, and load_input / fetch_output are plain copies.  Each layer is
built in keras_layers.py from our weights; a pass walks the net's graph
(graph_walk.py), each layer fed the outputs it names, inside the function.

Modes: `graph` (tf.function, TensorFlow's graph optimiser, no XLA) and
`xla` (tf.function(jit_compile=True): the net compiled by XLA, which can
fuse layers).  prepare() calls the whole-net function once, so XLA's
compilation happens there, untimed.

It runs in a child process of its own (backends/isolated.py): PoCL's kernel
compiler breaks in a process that has loaded TensorFlow.

Timing has no device events: wall time only.  The whole net is one compiled
`tf.function`; `run_timed` calls one compiled function per layer (NHWC
between them; the first and last convert the layout; an add's takes all its
inputs) and synchronises after each (see `_sync`).  TensorFlow keeps its default thread settings, as a
user would have them.
"""
from __future__ import annotations

import importlib.util
import time

import numpy as np

from nets import Feature, LayerKind, Net
from nets.errors import UserError

from ..base import Backend, Family, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name
from ..isolated import IsolatedBackend
from .graph_walk import GraphWalk
from .keras_layers import keras_layer, modules as _modules

MODES = ("graph", "xla")
# every kind a loaded net can hold (batch norms are folded by then), in graphs
KINDS = frozenset(LayerKind) - {LayerKind.BATCHNORM}   # batch norms are folded on loading
FEATURES = frozenset(Feature)


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


def _nhwc_shape(batch: int, shape: tuple) -> tuple:
    return (batch, shape[1], shape[2], shape[0]) if len(shape) == 3 else (batch,) + tuple(shape)


def _check_mode(mode: str | None) -> str:
    """`mode` itself (None: graph)."""
    mode = mode or "graph"
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r} of the tensorflow backend; it has {', '.join(MODES)}")
    return mode


def _to_nhwc(x):
    """Inside a compiled function: NCHW -> NHWC (a dense layer's 2-D data stays)."""
    tf, _ = _modules()
    return tf.transpose(x, (0, 2, 3, 1)) if x.shape.rank == 4 else x


def _to_nchw(y):
    tf, _ = _modules()
    return tf.transpose(y, (0, 3, 1, 2)) if y.shape.rank == 4 else y


class TensorflowNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int, mode: str | None = None):
        super().__init__(net, batch)
        tf, _ = _modules()
        self.mode = _check_mode(mode)
        self.memory_bytes = 0
        self._layers = []   # the Keras layers, kept alive here (see KerasLayer)
        for i, layer in enumerate(net.layers):
            params = layer_params(net, weights, i)
            self.memory_bytes += sum(a.nbytes for a in params.values())
            self._layers.append(keras_layer(layer, params, net.in_shape(i)))
        self._walk = GraphWalk(net)
        # the whole net, NCHW in and out: the conversions at its two ends are inside
        self._whole = self._compile(self._whole_body, [(batch,) + tuple(net.input_shape)])
        # one function per layer on NHWC tensors (run_layer converts on the host) ...
        self._steps = [self._compile(keras_fn, [_nhwc_shape(batch, s) for s in net.in_shapes(i)])
                       for i, keras_fn in enumerate(self._layers)]
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
                       "threads": "TensorFlow defaults", "timing": "wall clock only",
                       # XLA fuses a layer compiled alone otherwise than within the whole net (attention's
                       # matmuls and softmax on vit-tiny): that pass repeats, but not the whole pass's last bits
                       "layers_compiled_apart": self.mode == "xla"}

    def _whole_body(self, xs):
        layers = self._layers
        return _to_nchw(self._walk.run(_to_nhwc(xs[0]), lambda i, ins: layers[i](ins))[-1])

    def _compile(self, body, in_shapes: list):
        """body(list of inputs) traced once, here in prepare, into a graph for
        inputs of `in_shapes` (batch included), with XLA in the xla mode.  The
        concrete function is called directly, so it never retraces."""
        tf, _ = _modules()
        specs = [tf.TensorSpec(shape, tf.float32) for shape in in_shapes]
        return tf.function(lambda *xs: body(list(xs)), jit_compile=self.mode == "xla").get_concrete_function(*specs)

    def _input_read_later(self) -> bool:
        """Does a layer after the first read the net's input?"""
        return any(s < 0 for sources in self._walk.sources[1:] for s in sources)

    def _timed_steps(self) -> list:
        """self._steps, but the first takes the canonical input and the last
        gives the canonical output, so the per-layer times add up to a pass.
        Where a later layer also reads the input, the first returns the input
        it converted beside its output, so the conversion is timed once."""
        steps = list(self._steps)
        last = len(steps) - 1
        first, keep_input = self._layers[0], self._input_read_later()

        def first_body(xs):
            x = _to_nhwc(xs[0])
            y = first([x] * first.arity)
            y = _to_nchw(y) if last == 0 else y
            return (x, y) if keep_input else y
        steps[0] = self._compile(first_body, [(self.batch,) + tuple(self.net.input_shape)])
        if last > 0:
            final = self._layers[last]
            steps[last] = self._compile(lambda xs: _to_nchw(final(xs)),
                                        [_nhwc_shape(self.batch, s) for s in self.net.in_shapes(last)])
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
        timings = []
        entered = []   # the input converted by the first layer's function, for later readers

        def timed(i, xs):
            layer = self.net.layers[i]
            t0 = time.perf_counter()
            if i == 0:
                y = self._timed[0](xs[0])
                if isinstance(y, tuple):
                    entered.append(y[0])
                    y = y[1]
            else:
                y = self._timed[i](*(entered[0] if s < 0 else x for s, x in zip(self._walk.sources[i], xs)))
            _sync(y)
            ms = (time.perf_counter() - t0) * 1e3
            timings.append(LayerTiming(layer.name, ms, None, [Step(layer.kind, ms, "wall")]))
            return y

        self._y = self._walk.run(self._x, timed)[-1]
        return timings

    def run_layer(self, index, x):
        """Layer `index` alone on NHWC tensors; an add takes the list of its inputs."""
        tf, _ = _modules()
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        xs = [tf.constant(to_nhwc(self.check_input(a, index, k))) for k, a in enumerate(xs)]
        return to_nchw(self._steps[index](*xs).numpy())

    def layer_outputs(self, x):
        """Every layer's output of one pass of the per-layer functions on `x`, canonical layout."""
        tf, _ = _modules()
        steps = self._steps
        outs = self._walk.run(tf.constant(to_nhwc(self.check_input(x))), lambda i, xs: steps[i](*xs), keep=True)
        return [to_nchw(y.numpy()) for y in outs]

    def close(self):
        self._steps = self._timed = self._whole = self._layers = self._x = self._y = None


class TensorflowInProcess(Backend):
    """The backend itself; it runs inside the child process of TensorflowBackend."""

    name = "tensorflow"
    supported_kinds = KINDS
    supported_features = FEATURES

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
    family = Family.PEER
    summary = "peer: the same net as Keras layers in a compiled tf.function (TensorFlow's kernels; wall time only)"
    inner = "backends.peers.tensorflow_peer:TensorflowInProcess"
    supported_kinds = KINDS      # refused here already, before the child starts
    supported_features = FEATURES

    def modes(self):   # the same everywhere: no child (and no TensorFlow) is started to ask
        return list(MODES)

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
