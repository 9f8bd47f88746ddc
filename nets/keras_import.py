"""Bring your own model: a Keras model (.keras or .h5), Sequential or
functional (skip connections), as one of our nets plus its trained weights
in our layouts.

Supported: Conv2D (valid or same padding, any strides and groups, no
dilation), DepthwiseConv2D, BatchNormalization (folded into the convolution
before it when the model is loaded), MaxPooling2D (valid or same),
AveragePooling2D (valid; our Subsample with coefficient 1, bias 0),
GlobalAveragePooling2D, Add, Dense after Flatten, GlobalAveragePooling2D or
Dense, Flatten, and the activations linear, relu, relu6, sigmoid, tanh,
given on a layer or as a separate Activation/ReLU layer that is folded into
the layer that makes its input (when nothing else reads it).  Dropout is
accepted: it is the identity at inference.  Input is channels_last (H, W, C)
float32.  Everything else is refused with a UserError naming the layer and
why, never approximated.

Layouts: Conv2D kernel (FH,FW,C/g,K) -> (K,C/g,FH,FW); DepthwiseConv2D
kernel (FH,FW,C,M) -> (C*M,1,FH,FW), output channel c*M+m as Keras's.
'same' padding puts the odd row or column at the bottom or right, as
TensorFlow does.  Keras's Flatten reads an NHWC tensor in H,W,C order, ours
in C,H,W order, so the rows of the Dense weight after a Flatten are permuted.
"""
from __future__ import annotations

import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import UserError

from .layouts import hwc_rows_to_chw
from .spec import NET_INPUT, Add, BatchNorm, Conv, Dense, GlobalAvgPool, MaxPool, Net, Subsample
from .weights import validate_weights

ACTIVATION = {"linear": "none", "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh"}
SUFFIXES = (".keras", ".h5")

# Layer types refused with a reason that says what to do instead.
REFUSED = {
    "Softmax": "softmax is not one of our activations (none, relu, relu6, sigmoid, tanh); remove it, it "
               "does not change the top-1 class",
    "Conv1D": "only 2-D convolutions are supported",
    "Conv3D": "only 2-D convolutions are supported",
    "ZeroPadding2D": "a separate padding layer is not supported; use padding='same' on the convolution",
    "SeparableConv2D": "separable convolution is not supported",
    "Conv2DTranspose": "transposed convolution is not supported",
}


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # TensorFlow's C++ INFO/WARNING lines; errors stay
    try:
        import keras
    except ImportError:
        raise UserError("importing a Keras model needs Keras and TensorFlow: "
                        "pip install 'clblast-compare[tensorflow]'") from None
    return keras


def load_keras(path: str | os.PathLike) -> tuple[Net, dict[str, np.ndarray]]:
    """The model in `path` as (net named after the file, weights)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"Keras model file {path} not found")
    _check_container(path)
    keras = _keras()
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - any loading problem is the file's, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load Keras model {path}: {first}") from None
    return import_model(model, path.stem, str(path))


def _check_container(path: Path) -> None:
    """A UserError when `path` is not a whole zip (.keras) or HDF5 (.h5) file.
    Checked before Keras sees it: Keras calls a .keras file cut short
    "File not found", which sends the user looking for the wrong thing."""
    bad = f"Keras model file {path} is not a valid model file"
    if path.suffix.lower() == ".keras":
        if not zipfile.is_zipfile(path):
            raise UserError(f"{bad}: truncated, or not a zip archive (a .keras file is one); save the model again")
        try:
            with zipfile.ZipFile(path) as z:
                damaged = z.testzip()
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
            raise UserError(f"{bad}: a damaged zip archive ({exc}); save the model again") from None
        if damaged is not None:
            raise UserError(f"{bad}: {damaged} in its zip archive is damaged; save the model again")
        return
    try:
        import h5py   # comes with Keras; it tells a file cut short by the length its header promises
    except ImportError:
        return        # Keras will say it cannot read .h5 files
    if not h5py.is_hdf5(path):
        raise UserError(f"{bad}: not an HDF5 file (a .h5 model is one); save the model again")
    try:
        h5py.File(path, "r").close()
    except OSError as exc:
        why = "a truncated HDF5 file" if "truncated" in str(exc) else str(exc).strip().splitlines()[0]
        raise UserError(f"{bad}: {why}; save the model again") from None


def conv_kernel_from_keras(kernel: np.ndarray) -> np.ndarray:
    """Keras Conv2D kernel (FH, FW, C, K) -> ours (K, C, FH, FW)."""
    return np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))


def dense_rows_from_keras(weight: np.ndarray, chw: tuple) -> np.ndarray:
    """The weight of a Dense after a Flatten of an NHWC (C, H, W) tensor: its rows
    come in H,W,C order; ours in C,H,W order."""
    return hwc_rows_to_chw(weight, chw)


def _sanitise(name: str, taken: set) -> str:
    # our parameter keys are '<layer>.<param>': no dots or odd characters in a layer name
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "layer"
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


def _activation_name(layer, what: str) -> str:
    fn = getattr(layer, "activation", None)
    name = getattr(fn, "__name__", str(fn)) if fn is not None else "linear"
    if name not in ACTIVATION:
        raise UserError(f"{what}: activation {name!r} is not supported (only {', '.join(ACTIVATION)})")
    return ACTIVATION[name]


def _same_pad(size: int, kernel: int, stride: int) -> int:
    """Total rows that Keras's 'same' padding adds along one axis."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0)


@dataclass
class _Value:
    """What a Keras layer's output is to us: the layer of ours that makes it, its
    shape (C, H, W) or (F,), and the (C, H, W) of a Flatten not yet consumed by a Dense."""

    layer: str
    shape: tuple
    flatten_from: tuple | None = None


class _Builder:
    """Walks the Keras layers, tracking what each one's output is, and collects our layers.
    `shape`, `flatten_from` and `source` describe the input of the layer being imported."""

    def __init__(self, in_shape: tuple, readers: dict):
        self.shape = in_shape
        self.flatten_from: tuple | None = None
        self.source = NET_INPUT
        self.readers = readers                # Keras layer name -> how many layers read its output
        self.values: dict[str, _Value] = {}   # Keras layer name -> its output
        self.layers: list[dict] = []          # spec class, kwargs; activation filled in later
        self.weights: dict[str, np.ndarray] = {}
        self.names: set = {NET_INPUT}
        self.notes: list[str] = []

    def add(self, cls, name, params: dict, inputs: tuple | None = None, **kwargs):
        name = _sanitise(name, self.names)
        self.layers.append({"cls": cls, "name": name, "activation": kwargs.pop("activation", "none"),
                            "inputs": inputs or (self.source,), "kwargs": kwargs})
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        spec = cls(name, "none", inputs=inputs or (), **kwargs)
        self.shape = tuple(spec.out_shape(self.shape))
        self.source = name

    def fold_activation(self, act: str, what: str):
        """`act` into the layer that makes this layer's input, which nothing else may read."""
        if act == "none":
            return
        if self.source == NET_INPUT:
            raise UserError(f"{what}: an activation before any other layer is not supported")
        last = next(d for d in self.layers if d["name"] == self.source)
        read = sum(self.readers.get(k, 0) for k, v in self.values.items() if v.layer == self.source)
        if read > 1:
            raise UserError(f"{what}: the output of {last['name']} is also read by another layer; our "
                            f"activations are part of the layer that makes them")
        if last["activation"] != "none":
            raise UserError(f"{what}: a second activation after {last['name']} ({last['activation']}) "
                            f"is not supported; our layers carry one activation each")
        last["activation"] = act

    def net(self, name: str, description: str, input_shape: tuple) -> Net:
        specs, previous = [], NET_INPUT
        for d in self.layers:
            # a layer that reads the one before it names nothing, so a chain stays a chain
            inputs = () if d["inputs"] == (previous,) else d["inputs"]
            specs.append(d["cls"](d["name"], d["activation"], inputs=inputs, **d["kwargs"]))
            previous = d["name"]
        return Net(name=name, input_shape=input_shape, layers=tuple(specs), default_batch=1, description=description)


def _spatial(b: _Builder, what: str) -> tuple:
    if len(b.shape) != 3:
        raise UserError(f"{what}: needs a (H, W, C) input, but follows a Flatten or Dense layer")
    return b.shape


def _channels_last(layer, what: str) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise UserError(f"{what}: data_format {layer.data_format!r} is not supported; use channels_last")


def _window(b: _Builder, layer, what: str) -> tuple:
    """A convolution's input shape, window, stride and padding, refusing what we cannot run."""
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    if tuple(layer.dilation_rate) != (1, 1):
        raise UserError(f"{what}: dilation_rate {tuple(layer.dilation_rate)} is not supported (only 1)")
    kernel, stride = tuple(layer.kernel_size), tuple(layer.strides)
    return (c, h, w), kernel, stride, _pool_or_conv_pad(layer.padding, (h, w), kernel, stride, what)


def _conv(b: _Builder, layer, what: str):
    _, kernel, stride, pad = _window(b, layer, what)
    arrays = layer.get_weights()
    weight = conv_kernel_from_keras(arrays[0])
    bias = arrays[1] if layer.use_bias else np.zeros(layer.filters, np.float32)
    b.add(Conv, layer.name, {"weight": weight, "bias": bias}, activation=_activation_name(layer, what),
          out_channels=layer.filters, kernel=kernel, stride=stride, pad=pad, groups=getattr(layer, "groups", 1))


def _depthwise(b: _Builder, layer, what: str):
    (c, _, _), kernel, stride, pad = _window(b, layer, what)
    arrays = layer.get_weights()
    m = layer.depth_multiplier
    fh, fw = kernel
    weight = np.ascontiguousarray(arrays[0].reshape(fh, fw, c * m).transpose(2, 0, 1)[:, None])
    bias = arrays[1] if layer.use_bias else np.zeros(c * m, np.float32)
    b.add(Conv, layer.name, {"weight": weight, "bias": bias}, activation=_activation_name(layer, what),
          out_channels=c * m, kernel=kernel, stride=stride, pad=pad, groups=c)


def _batchnorm(b: _Builder, layer, what: str):
    c, _, _ = _spatial(b, what)
    if layer.axis not in (-1, 3, [-1], [3]):
        raise UserError(f"{what}: axis {layer.axis} is not supported; only the channels (-1) of channels_last")
    arrays = list(layer.get_weights())
    scale = arrays.pop(0) if layer.scale else np.ones(c, np.float32)
    shift = arrays.pop(0) if layer.center else np.zeros(c, np.float32)
    mean, var = arrays
    b.add(BatchNorm, layer.name, {"scale": scale, "bias": shift, "mean": mean, "var": var}, eps=float(layer.epsilon))


def _global_pool(b: _Builder, layer, what: str):
    c, _, _ = _spatial(b, what)
    _channels_last(layer, what)
    b.add(GlobalAvgPool, layer.name, {})
    if not getattr(layer, "keepdims", False):   # Keras's output is (N, C): a Dense may follow
        b.flatten_from, b.shape = (c, 1, 1), (c,)


def _add(b: _Builder, layer, what: str, inputs: list):
    shapes = {(v.shape, v.flatten_from) for v in inputs}
    if len(shapes) != 1:
        raise UserError(f"{what}: adds tensors of shapes {[v.shape for v in inputs]}; only equal shapes are "
                        f"supported")
    if inputs[0].flatten_from is not None:
        raise UserError(f"{what}: an add after a Flatten is not supported; add before flattening")
    b.add(Add, layer.name, {}, inputs=tuple(v.layer for v in inputs))


def _pool_or_conv_pad(padding: str, size: tuple, kernel: tuple, stride: tuple, what: str) -> tuple:
    """Our (top, left, bottom, right) for Keras's `padding`; 'same' puts an odd row or column
    at the bottom or right, as TensorFlow does."""
    if padding == "valid":
        return (0, 0)
    if padding != "same":
        raise UserError(f"{what}: padding {padding!r} is not supported (only valid, same)")
    (th, tw) = [_same_pad(n, k, s) for n, k, s in zip(size, kernel, stride)]
    return (th // 2, tw // 2, th - th // 2, tw - tw // 2)


def _pool(b: _Builder, layer, what: str, cls):
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    kernel = tuple(layer.pool_size)
    stride = tuple(layer.strides) if layer.strides is not None else kernel
    pad = _pool_or_conv_pad(layer.padding, (h, w), kernel, stride, what)
    if cls is Subsample:
        if any(pad):
            raise UserError(f"{what}: padding {layer.padding!r} pads this input, and an average pool's padding "
                            f"is not supported; use padding='valid'")
        b.add(cls, layer.name, {"coeff": np.ones(c, np.float32), "bias": np.zeros(c, np.float32)},
              kernel=kernel, stride=stride)
    else:   # Keras's max-pool padding never wins, as ours
        b.add(cls, layer.name, {}, kernel=kernel, stride=stride, pad=pad)


def _dense(b: _Builder, layer, what: str):
    if len(b.shape) == 3 and b.flatten_from is None:
        raise UserError(f"{what}: Dense on a 4-D tensor acts on each pixel's channels; "
                        f"only Dense after Flatten or Dense is supported")
    weight, *rest = layer.get_weights()
    bias = rest[0] if layer.use_bias else np.zeros(layer.units, np.float32)
    if b.flatten_from is not None:
        weight = dense_rows_from_keras(weight, b.flatten_from)
        b.shape, b.flatten_from = b.flatten_from, None   # our Dense flattens its C,H,W input itself
    b.add(Dense, layer.name, {"weight": weight, "bias": bias}, activation=_activation_name(layer, what),
          out_features=layer.units)


def _relu(b: _Builder, layer, what: str):
    six = layer.max_value is not None and float(layer.max_value) == 6
    if (layer.max_value is not None and not six) or float(layer.negative_slope) != 0 or float(layer.threshold) != 0:
        raise UserError(f"{what}: only a plain ReLU or ReLU6 is supported (max_value 6 or none, no "
                        f"negative_slope or threshold)")
    b.fold_activation("relu6" if six else "relu", what)


def _inbound(keras, model, what_model: str) -> dict[str, list[str]]:
    """Keras layer name -> the names of the layers it reads, in order."""
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    if isinstance(model, keras.Sequential):
        names = [NET_INPUT] + [layer.name for layer in layers]
        return {layer.name: [names[i]] for i, layer in enumerate(layers)}
    inbound = {}
    for layer in layers:
        nodes = layer._inbound_nodes
        if len(nodes) != 1:
            raise UserError(f"{what_model}: layer {layer.name} is used {len(nodes)} times; only layers used "
                            f"once are supported")
        inbound[layer.name] = [t._keras_history.operation.name for t in nodes[0].input_tensors]
    return inbound


def import_model(model, name: str, source: str = "") -> tuple[Net, dict[str, np.ndarray]]:
    """A Keras model, Sequential or functional, as (net, weights); `name` names the net."""
    keras = _keras()
    what_model = source or name
    if not isinstance(model, keras.Model):
        raise UserError(f"{what_model}: a {type(model).__name__} is not a Keras model")
    try:
        shape = tuple(model.inputs[0].shape)
    except (AttributeError, IndexError, ValueError):
        raise UserError(f"{what_model}: the model has no input shape; build it with keras.Input((H, W, C))") from None
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UserError(f"{what_model}: the model has {len(model.inputs)} inputs and {len(model.outputs)} outputs; "
                        f"only one of each is supported")
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise UserError(f"{what_model}: input shape {shape[1:]} is not a fixed (H, W, C) image")
    h, w, c = (int(d) for d in shape[1:])
    inbound = _inbound(keras, model, what_model)
    readers: dict[str, int] = {}
    for names in inbound.values():
        for n in names:
            readers[n] = readers.get(n, 0) + 1
    b = _Builder((c, h, w), readers)
    handlers = {
        "Conv2D": _conv,
        "DepthwiseConv2D": _depthwise,
        "BatchNormalization": _batchnorm,
        "MaxPooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, MaxPool),
        "AveragePooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, Subsample),
        "GlobalAveragePooling2D": _global_pool,
        "Dense": _dense,
        "ReLU": _relu,
        "Activation": lambda b_, l_, w_: b_.fold_activation(_activation_name(l_, w_), w_),
    }
    input_names = {t._keras_history.operation.name for t in model.inputs}
    last = None
    for layer in model.layers:
        cls = type(layer).__name__
        what = f"layer {layer.name} ({cls})"
        if cls == "InputLayer":
            continue
        dtype = getattr(layer, "compute_dtype", "float32")
        if dtype != "float32":
            raise UserError(f"{what}: computes in {dtype}; only float32 models are supported")
        inputs = [_Value(NET_INPUT, (c, h, w)) if n in input_names or n == NET_INPUT else b.values[n]
                  for n in inbound[layer.name]]
        b.source, b.shape, b.flatten_from = inputs[0].layer, inputs[0].shape, inputs[0].flatten_from
        if cls == "Dropout":
            b.notes.append(f"{layer.name}: Dropout skipped (identity at inference)")
        elif cls == "Flatten":
            _channels_last(layer, what)
            b.flatten_from = _spatial(b, what)
            b.shape = (int(np.prod(b.shape)),)
        elif cls == "Add":
            _add(b, layer, what, inputs)
        elif len(inputs) != 1:
            raise UserError(f"{what}: reads {len(inputs)} tensors; only Add reads more than one")
        elif cls in handlers:
            handlers[cls](b, layer, what)
        elif cls in REFUSED:
            raise UserError(f"{what}: {REFUSED[cls]}")
        else:
            raise UserError(f"{what}: layer type {cls} is not supported (supported: Conv2D, DepthwiseConv2D, "
                            f"BatchNormalization, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, Add, "
                            f"Dense, Flatten, Activation, ReLU, Dropout)")
        b.values[layer.name] = last = _Value(b.source, b.shape, b.flatten_from)
    if not b.layers:
        raise UserError(f"{what_model}: the model has no layer we can run")
    output = b.values.get(model.outputs[0]._keras_history.operation.name)
    if output is None or output is not last or output.layer != b.layers[-1]["name"]:
        raise UserError(f"{what_model}: the output is not made by the last layer; only models whose last layer "
                        f"makes the output are supported")
    if output.flatten_from is not None and output.flatten_from[1:] != (1, 1):
        raise UserError(f"{what_model}: a Flatten must be followed by a Dense layer")
    description = f"imported from {source or 'a Keras model'}" + (f"; {'; '.join(b.notes)}" if b.notes else "")
    net = b.net(name, description, (c, h, w))
    validate_weights(b.weights, net, what_model)
    return net, b.weights
