"""Bring your own model: a Keras model (.keras or .h5), Sequential or
functional (skip connections), as one of our nets plus its trained weights
in our layouts.

Supported (what the image classifiers of keras.applications use): Conv2D
(valid or same padding, any strides, groups and dilation), DepthwiseConv2D,
SeparableConv2D (a depthwise then a 1x1 convolution), BatchNormalization
(folded into the convolution before it when the model is loaded, else the
per-channel affine map it is), ZeroPadding2D (the padding of the
convolution or pooling after it), MaxPooling2D and AveragePooling2D (valid
or same; a 'same' average pool divides by the input's elements in each
window, as TensorFlow does), GlobalAveragePooling2D, Add, Multiply
(elementwise, or by an (N, 1, 1, C) gate: squeeze-and-excitation),
Concatenate along the channels, Rescaling and Normalization (an affine map
per channel, folded into the convolution after it where exact:
nets/affine.py), Reshape between (N, C) and (N, 1, 1, C), Dense after
Flatten, GlobalAveragePooling2D or Dense, Flatten, Dropout (the identity at
inference), InceptionResNetV2's CustomScaleLayer (x + scale * r: the scale
folded into the convolution that makes r), and the activations linear,
relu, relu6, sigmoid, tanh, silu (swish), hard_silu (hard_swish),
hard_sigmoid and softmax (a layer of its own, last), given on a layer or
as a separate Activation/ReLU layer folded into the layer that makes its
input (when nothing else reads it; else a layer of its own, a selection of
every channel with the activation).  MobileNetV3's hard sigmoid written
with operators, relu6(x + 3) * (1 / 6), is one hardsigmoid.  Input is
channels_last (H, W, C) float32.  Everything else is refused with a
UserError naming the layer and what we lack, never approximated.

Layouts: Conv2D kernel (FH,FW,C/g,K) -> (K,C/g,FH,FW); DepthwiseConv2D
kernel (FH,FW,C,M) -> (C*M,1,FH,FW), output channel c*M+m as Keras's.
'same' padding puts the odd row or column at the bottom or right, as
TensorFlow does.  Keras's Flatten reads an NHWC tensor in H,W,C order, ours
in C,H,W order, so the rows of the Dense weight after a Flatten are permuted.
"""
from __future__ import annotations

import math
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import UserError
from .userfile import regular_file

from . import keras_transformer
from .layouts import hwc_rows_to_chw
from .spec import (NET_INPUT, Add, AvgPool, BatchNorm, Channels, Concat, Conv, Dense, GlobalAvgPool, MaxPool, Mul, Net,
                   Softmax, Subsample, window_pair)
from .weights import validate_weights

ACTIVATION = {"linear": "none", "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh",
              "silu": "silu", "swish": "silu", "hard_silu": "hardswish", "hard_swish": "hardswish",
              "hard_sigmoid": "hardsigmoid", "gelu": "gelu"}
SUFFIXES = (".keras", ".h5")

# Layer types refused with a reason that says what we lack.
REFUSED = {
    "Conv1D": "only 2-D convolutions are supported",
    "Conv3D": "only 2-D convolutions are supported",
    "Conv2DTranspose": "transposed convolution is not supported",
}
SUPPORTED = ("Conv2D, DepthwiseConv2D, SeparableConv2D, BatchNormalization, ZeroPadding2D, MaxPooling2D, "
             "AveragePooling2D, GlobalAveragePooling2D, Add, Multiply, Concatenate, Rescaling, Normalization, "
             "Reshape, Dense, Flatten, Activation, ReLU, Softmax, Dropout")


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
    path = regular_file(path, "Keras model file")
    _check_container(path)
    _check_config(path, _config_text(path))
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


MAX_CONFIG_BYTES = 64 * 2**20   # a model's layer configuration: kilobytes, a megabyte for the largest zoo models
_WINDOWS = ("kernel_size", "strides", "pool_size", "dilation_rate")   # each a number, or numbers, at least 1
_COUNTS = ("filters", "units", "groups", "depth_multiplier")          # each a whole number, at least 1


def _config_text(path: Path) -> str | None:
    """The JSON of the model's layers, as saved in the file (a .keras archive's config.json, a .h5 file's
    model_config attribute); None where there is none to read (Keras then says what is wrong)."""
    try:
        if path.suffix.lower() == ".keras":
            with zipfile.ZipFile(path) as z:
                info = z.getinfo("config.json")
                if info.file_size > MAX_CONFIG_BYTES:
                    raise UserError(f"Keras model file {path}: its config.json claims {info.file_size:,} bytes, more "
                                    f"than a model's configuration holds; save the model again")
                return z.read(info).decode("utf-8")
        import h5py
        with h5py.File(path, "r") as f:
            text = f.attrs.get("model_config")
        return text.decode("utf-8") if isinstance(text, bytes) else text
    except (KeyError, ImportError, OSError, UnicodeDecodeError, zipfile.BadZipFile):
        return None


def _check_config(path: Path, text: str | None) -> None:
    """Every layer's windows (kernel_size, strides, pool_size, dilation_rate), counts (filters, units,
    groups, depth_multiplier) and epsilon in their valid range, read from the saved JSON before Keras
    builds anything from it: a hand-edited file may hold a zero stride, and Keras would then fail
    deep inside with a message that names no value."""
    if text is None:
        return
    import json
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):
        raise UserError(f"Keras model file {path}: its layer configuration is not JSON; save the model again")             from None
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        # Keras would index it as a model's and fail on its own ("list indices must be integers")
        shape = "a list" if isinstance(config, list) else "an object without 'class_name'" \
            if isinstance(config, dict) else f"a {type(config).__name__}"
        raise UserError(f"Keras model file {path}: its configuration is {shape}, not a model's (an object naming "
                        f"its class); the file was damaged or edited: save the model again")
    stack = [config]
    while stack:
        obj = stack.pop()
        if isinstance(obj, list):
            stack.extend(obj)
            continue
        if not isinstance(obj, dict):
            continue
        stack.extend(obj.values())
        layer = obj.get("config") if isinstance(obj.get("class_name"), str) else None
        if isinstance(layer, dict):
            _check_layer_config(path, f"layer {layer.get('name')} ({obj['class_name']})", layer)


def _check_layer_config(path: Path, what: str, config: dict) -> None:
    def bad(key, rule):
        raise UserError(f"Keras model file {path}: {what}: {key} {config[key]!r} {rule}; the file was damaged or "
                        f"edited: save the model again")

    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)
    for key in _WINDOWS:
        value = config.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(whole(v) and v >= 1 for v in values):
            bad(key, "is not a window's size: each must be a whole number, at least 1")
    for key in _COUNTS:
        value = config.get(key)
        if value is not None and not (whole(value) and value >= 1):
            bad(key, "must be a whole number, at least 1")
    eps = config.get("epsilon")
    if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool)
                                and math.isfinite(eps) and eps >= 0):
        bad("epsilon", "must be a finite number, 0 or more")


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
    """Our name of `layer`'s activation ('softmax' included: a layer of its own, added by the caller)."""
    fn = getattr(layer, "activation", None)
    name = getattr(fn, "__name__", str(fn)) if fn is not None else "linear"
    if name == "softmax":
        return name
    if name not in ACTIVATION:
        raise UserError(f"{what}: activation {name!r} is not supported (only {', '.join(ACTIVATION)}, softmax)")
    return ACTIVATION[name]


def _same_pad(size: int, kernel: int, stride: int) -> int:
    """Total rows that Keras's 'same' padding adds along one axis."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0)


@dataclass
class _Value:
    """What a Keras layer's output is to us: the layer of ours that makes it, its
    shape (C, H, W) or (F,), the (C, H, W) of a Flatten not yet consumed by a Dense,
    zeros still to pad around it (top, left, bottom, right; a ZeroPadding2D waiting
    for the layer it belongs to), and scalar operations still to apply
    (MobileNetV3's relu6(x + 3) * (1/6), as ('add', 3), ('relu6',), ('mul', 1/6))."""

    layer: str
    shape: tuple
    flatten_from: tuple | None = None
    pad: tuple | None = None
    ops: tuple = ()


# a chain of scalar operations that is one of our activations
_OP_ACTIVATIONS = {(("add", 3.0), ("relu6",), ("mul", 1 / 6)): "hardsigmoid",
                   (("add", 3.0), ("relu6",), ("div", 6.0)): "hardsigmoid"}


class _Builder:
    """Walks the Keras layers, tracking what each one's output is, and collects our layers.
    `shape`, `flatten_from` and `source` describe the input of the layer being imported."""

    def __init__(self, in_shape: tuple, readers: dict):
        self.shape = in_shape
        self.flatten_from: tuple | None = None
        self.source = NET_INPUT
        self.pad: tuple | None = None
        self.ops: tuple = ()
        self.readers = readers                # Keras layer name -> how many layers read its output
        self.values: dict[str, _Value] = {}   # Keras layer name -> its output
        self.layers: list[dict] = []          # spec class, kwargs; activation filled in later
        self.weights: dict[str, np.ndarray] = {}
        self.names: set = {NET_INPUT}
        self.notes: list[str] = []
        self.shapes: dict[str, tuple] = {NET_INPUT: in_shape}   # our layer -> its output shape

    def add(self, cls, name, params: dict, inputs: tuple | None = None, **kwargs):
        name = _sanitise(name, self.names)
        self.layers.append({"cls": cls, "name": name, "activation": kwargs.pop("activation", "none"),
                            "inputs": inputs or (self.source,), "kwargs": kwargs})
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        spec = cls(name, "none", inputs=inputs or (), **kwargs)
        in_shapes = [self.shapes[n] for n in (inputs or (self.source,))]
        self.shape = tuple(spec.out_shape_of(in_shapes))
        self.shapes[name] = self.shape
        self.source = name
        self.pad = None
        return name

    def layer(self, name: str) -> dict | None:
        return next((d for d in self.layers if d["name"] == name), None)

    def fold_activation(self, act: str, what: str):
        """`act` into the layer that makes this layer's input, which nothing else may read."""
        if act == "none":
            return
        if act == "softmax":
            self.materialise(what)
            self.add(Softmax, what.split()[1] if what.startswith("layer ") else "softmax", {})
            return
        if self.source == NET_INPUT:
            raise UserError(f"{what}: an activation before any other layer is not supported")
        if self.pad is not None:
            raise UserError(f"{what}: an activation after a ZeroPadding2D is not supported; pad after it")
        last = self.layer(self.source)
        # readers of the layer's output itself (not of a padding or scalar operations still pending on it)
        read = sum(self.readers.get(k, 0) for k, v in self.values.items()
                   if v.layer == self.source and not v.ops and v.pad is None)
        if read > 1 or last["activation"] != "none":   # a layer of its own: a selection of every channel
            if len(self.shape) != 3 or self.flatten_from is not None:
                raise UserError(f"{what}: the output of {last['name']} is also read by another layer, or has an "
                                f"activation already, and is not an image: our activations on (N, features) are "
                                f"part of the layer that makes them")
            self.add(Channels, what.split()[1] if what.startswith("layer ") else f"{self.source}_{act}", {},
                     activation=act, order=tuple(range(self.shape[0])))
            return
        if last["cls"] is Softmax:
            raise UserError(f"{what}: a second activation after {last['name']} ({last['activation']}) "
                            f"is not supported; our layers carry one activation each")
        last["activation"] = act

    def materialise(self, what: str):
        """A pending ZeroPadding2D made a layer of its own (an identity depthwise 1x1 conv that pads)."""
        if self.pad is None:
            return
        c = _spatial(self, what)[0]
        self.add(Conv, f"{self.source}_pad", {"weight": np.ones((c, 1, 1, 1)), "bias": np.zeros(c)},
                 out_channels=c, kernel=(1, 1), pad=self.pad, groups=c)

    def net(self, name: str, description: str, input_shape: tuple) -> Net:
        specs, previous = [], NET_INPUT
        for d in self.layers:
            # a layer that reads the one before it names nothing, so a chain stays a chain
            inputs = () if d["inputs"] == (previous,) else d["inputs"]
            try:
                specs.append(d["cls"](d["name"], d["activation"], inputs=inputs, **d["kwargs"]))
            except ValueError as exc:   # a value no layer of ours can hold (an epsilon below 0, ...)
                raise UserError(f"{name}: layer {d['name']}: {str(exc).split(': ', 1)[-1]}") from None
            previous = d["name"]
        return Net(name=name, input_shape=input_shape, layers=tuple(specs), default_batch=1, description=description)


def _spatial(b: _Builder, what: str) -> tuple:
    if len(b.shape) != 3 or b.flatten_from is not None:
        raise UserError(f"{what}: needs a (H, W, C) input, but follows a Flatten or Dense layer")
    return b.shape


def _channels_last(layer, what: str) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise UserError(f"{what}: data_format {layer.data_format!r} is not supported; use channels_last")


def _window_pair(layer, attr: str, what: str) -> tuple:
    """The layer's `attr` (kernel_size, strides, ...) as two whole numbers, each at least 1, before any
    arithmetic with it: a model file's config may hold anything."""
    try:
        return window_pair(getattr(layer, attr), attr)
    except ValueError as exc:
        raise UserError(f"{what}: {str(exc).split(': ', 1)[-1]}") from None


def _window(b: _Builder, layer, what: str) -> tuple:
    """A convolution's input shape, window, stride, dilation and padding (a ZeroPadding2D's before it included)."""
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    kernel, stride, dilation = (_window_pair(layer, attr, what) for attr in ("kernel_size", "strides", "dilation_rate"))
    before = b.pad or (0, 0, 0, 0)
    padded = (h + before[0] + before[2], w + before[1] + before[3])
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    own = _pool_or_conv_pad(layer.padding, padded, span, stride, what)
    own = own if len(own) == 4 else own + own
    pad = tuple(int(x + y) for x, y in zip(before, own))
    return (c, h, w), kernel, stride, pad, dilation


def _conv(b: _Builder, layer, what: str):
    _, kernel, stride, pad, dilation = _window(b, layer, what)
    arrays = layer.get_weights()
    weight = conv_kernel_from_keras(arrays[0])
    bias = arrays[1] if layer.use_bias else np.zeros(layer.filters, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": weight, "bias": bias}, activation=act, out_channels=layer.filters,
        kernel=kernel, stride=stride, pad=pad, groups=getattr(layer, "groups", 1), dilation=dilation))


def _with_softmax(b: _Builder, layer, what: str, build) -> None:
    """build(activation) the layer, then a Softmax layer where its activation is softmax."""
    act = _activation_name(layer, what)
    build("none" if act == "softmax" else act)
    if act == "softmax":
        b.add(Softmax, f"{layer.name}_softmax", {})


def _depthwise_weight(kernel: np.ndarray) -> np.ndarray:
    """Keras's depthwise kernel (FH, FW, C, M) -> ours (C*M, 1, FH, FW)."""
    fh, fw, c, m = kernel.shape
    return np.ascontiguousarray(kernel.reshape(fh, fw, c * m).transpose(2, 0, 1)[:, None])


def _depthwise(b: _Builder, layer, what: str):
    (c, _, _), kernel, stride, pad, dilation = _window(b, layer, what)
    arrays = layer.get_weights()
    m = layer.depth_multiplier
    bias = arrays[1] if layer.use_bias else np.zeros(c * m, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": _depthwise_weight(arrays[0]), "bias": bias}, activation=act,
        out_channels=c * m, kernel=kernel, stride=stride, pad=pad, groups=c, dilation=dilation))


def _separable(b: _Builder, layer, what: str):
    """A depthwise convolution (no bias), then a 1x1 one with the bias and the activation."""
    (c, _, _), kernel, stride, pad, dilation = _window(b, layer, what)
    depthwise, pointwise, *rest = layer.get_weights()
    m = layer.depth_multiplier
    b.add(Conv, f"{layer.name}_depthwise", {"weight": _depthwise_weight(depthwise), "bias": np.zeros(c * m)},
          out_channels=c * m, kernel=kernel, stride=stride, pad=pad, groups=c, dilation=dilation)
    bias = rest[0] if layer.use_bias else np.zeros(layer.filters, np.float32)
    _with_softmax(b, layer, what, lambda act: b.add(
        Conv, layer.name, {"weight": conv_kernel_from_keras(pointwise), "bias": bias}, activation=act,
        out_channels=layer.filters, kernel=(1, 1)))


def _batchnorm(b: _Builder, layer, what: str):
    b.materialise(what)
    c, _, _ = _spatial(b, what)
    if layer.axis not in (-1, 3, [-1], [3]):
        raise UserError(f"{what}: axis {layer.axis} is not supported; only the channels (-1) of channels_last")
    arrays = list(layer.get_weights())
    scale = arrays.pop(0) if layer.scale else np.ones(c, np.float32)
    shift = arrays.pop(0) if layer.center else np.zeros(c, np.float32)
    mean, var = arrays
    b.add(BatchNorm, layer.name, {"scale": scale, "bias": shift, "mean": mean, "var": var}, eps=float(layer.epsilon))


def _affine(b: _Builder, layer, what: str, scale, shift):
    """x * scale + shift per channel (Rescaling, Normalization): a depthwise 1x1 convolution."""
    b.materialise(what)
    c, _, _ = _spatial(b, what)
    scale = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (c,))
    shift = np.broadcast_to(np.asarray(shift, np.float64).reshape(-1), (c,))
    b.add(Conv, layer.name, {"weight": scale.reshape(c, 1, 1, 1), "bias": shift}, out_channels=c, kernel=(1, 1),
          groups=c)


def _rescaling(b: _Builder, layer, what: str):
    _affine(b, layer, what, layer.scale, layer.offset)


def _normalization(b: _Builder, layer, what: str):
    if tuple(np.atleast_1d(layer.axis)) not in ((-1,), (3,)) or getattr(layer, "invert", False):
        raise UserError(f"{what}: only a normalisation of the channels (axis -1), not inverted, is supported")
    mean = np.asarray(layer.mean, np.float64).reshape(-1)
    std = np.maximum(np.sqrt(np.asarray(layer.variance, np.float64).reshape(-1)), 1e-7)   # Keras's epsilon
    _affine(b, layer, what, 1.0 / std, -mean / std)


def _global_pool(b: _Builder, layer, what: str):
    b.materialise(what)
    c, _, _ = _spatial(b, what)
    _channels_last(layer, what)
    b.add(GlobalAvgPool, layer.name, {})
    if not getattr(layer, "keepdims", False):   # Keras's output is (N, C): a Dense may follow
        b.flatten_from, b.shape = (c, 1, 1), (c,)


def _zero_padding(b: _Builder, layer, what: str):
    _spatial(b, what)
    _channels_last(layer, what)
    (top, bottom), (left, right) = layer.padding
    before = b.pad or (0, 0, 0, 0)
    b.pad = (before[0] + top, before[1] + left, before[2] + bottom, before[3] + right)


def _add(b: _Builder, layer, what: str, inputs: list):
    for i, v in enumerate(inputs):
        if v.pad is not None or v.ops:
            raise UserError(f"{what}: its input {i} is still a ZeroPadding2D or a scalar operation's; not supported")
    shapes = {(v.shape, v.flatten_from) for v in inputs}
    if len(shapes) != 1:
        raise UserError(f"{what}: adds tensors of shapes {[v.shape for v in inputs]}; only equal shapes are "
                        f"supported")
    if inputs[0].flatten_from is not None:
        raise UserError(f"{what}: an add after a Flatten is not supported; add before flattening")
    b.add(Add, layer.name, {}, inputs=tuple(v.layer for v in inputs))


def _scaled_add(b: _Builder, layer, what: str, inputs: list):
    """InceptionResNetV2's CustomScaleLayer: x + r * scale, the scale folded into the conv that makes r."""
    x, r = inputs
    maker = b.layer(r.layer)
    read = sum(b.readers.get(k, 0) for k, v in b.values.items() if v.layer == r.layer)
    if maker is None or maker["cls"] is not Conv or maker["activation"] != "none" or read > 1 or r.pad or r.ops:
        raise UserError(f"{what}: x + r * scale is supported only where r is a convolution's output (no "
                        f"activation) that nothing else reads, so the scale folds into it")
    for p in ("weight", "bias"):
        b.weights[f"{maker['name']}.{p}"] = b.weights[f"{maker['name']}.{p}"] * np.float32(layer.scale)
    _add(b, layer, what, inputs)


def _multiply(b: _Builder, layer, what: str, inputs: list):
    """x * gate (the gate (1, 1, C): squeeze-and-excitation) or an elementwise product."""
    if any(v.pad is not None or v.ops or v.flatten_from is not None for v in inputs) or len(inputs) != 2:
        raise UserError(f"{what}: only a product of two (H, W, C) tensors, or of one by a (1, 1, C) gate, "
                        f"is supported")
    x, g = inputs
    if x.shape == (g.shape[0], 1, 1) and g.shape != x.shape:
        x, g = g, x   # ours takes the gate second
    if g.shape != x.shape and g.shape != (x.shape[0], 1, 1):
        raise UserError(f"{what}: multiplies shapes {x.shape} and {g.shape}; only equal shapes, or a tensor by a "
                        f"(1, 1, C) gate of its channels, are supported")
    b.add(Mul, layer.name, {}, inputs=(x.layer, g.layer))


def _concatenate(b: _Builder, layer, what: str, inputs: list):
    if layer.axis not in (-1, 3):
        raise UserError(f"{what}: a concatenation along axis {layer.axis} is not supported (only the channels, -1)")
    if any(v.pad is not None or v.ops or v.flatten_from is not None or len(v.shape) != 3 for v in inputs):
        raise UserError(f"{what}: only a concatenation of (H, W, C) tensors is supported")
    b.add(Concat, layer.name, {}, inputs=tuple(v.layer for v in inputs))


def _reshape(b: _Builder, layer, what: str):
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


def _pool(b: _Builder, layer, what: str, cls):
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    kernel = _window_pair(layer, "pool_size", what)
    stride = _window_pair(layer, "strides", what) if layer.strides is not None else kernel
    if b.pad is not None and cls is MaxPool:
        # zeros before a max-pool win over negative values, our max-pool's padding never does: the same
        # only where the input is never negative
        maker = b.layer(b.source)
        if maker is None or maker["activation"] not in ("relu", "relu6"):
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


def _dense(b: _Builder, layer, what: str):
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


def _relu(b: _Builder, layer, what: str):
    six = layer.max_value is not None and float(layer.max_value) == 6
    if (layer.max_value is not None and not six) or float(layer.negative_slope) != 0 or float(layer.threshold) != 0:
        raise UserError(f"{what}: only a plain ReLU or ReLU6 is supported (max_value 6 or none, no "
                        f"negative_slope or threshold)")
    if b.ops:
        b.ops = b.ops + (("relu6" if six else "relu",),)
        return
    b.fold_activation("relu6" if six else "relu", what)


def _scalar_op(b: _Builder, op, what: str, node):
    """x + c, x * c, x / c with a number c (Keras operators on a tensor): kept, until the chain
    is one of our activations (MobileNetV3's hard sigmoid)."""
    kind = {"Add": "add", "Multiply": "mul", "Divide": "div", "TrueDivide": "div"}.get(type(op).__name__)
    args = list(node.arguments.args)
    numbers = [a for a in args if isinstance(a, (int, float))]
    if kind is None or len(args) != 2 or len(numbers) != 1 or (kind == "div" and args[1] is not numbers[0]):
        raise UserError(f"{what}: the operation {type(op).__name__} is supported only of a tensor and a number "
                        f"(MobileNetV3's relu6(x + 3) / 6)")
    b.ops = b.ops + ((kind, float(numbers[0])),)
    act = next((a for chain, a in _OP_ACTIVATIONS.items() if _same_chain(chain, b.ops)), None)
    if act is not None:
        b.ops = ()
        b.fold_activation(act, what)


def _same_chain(chain: tuple, ops: tuple) -> bool:
    return len(chain) == len(ops) and all(a[0] == o[0] and (len(a) == 1 or abs(a[1] - o[1]) < 1e-6)
                                          for a, o in zip(chain, ops))


def _inbound(keras, model, what_model: str) -> tuple[list, dict[str, list[str]]]:
    """The model's operations in order (layers, and Keras operators on tensors), and
    for each the names of the operations it reads."""
    if isinstance(model, keras.Sequential):
        layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
        names = [NET_INPUT] + [layer.name for layer in layers]
        return layers, {layer.name: [names[i]] for i, layer in enumerate(layers)}
    ops = [op for op in model.operations if type(op).__name__ != "InputLayer"]
    inbound = {}
    for op in ops:
        nodes = op._inbound_nodes
        if len(nodes) != 1:
            raise UserError(f"{what_model}: layer {op.name} is used {len(nodes)} times; only layers used "
                            f"once are supported")
        inbound[op.name] = [t._keras_history.operation.name for t in nodes[0].input_tensors]
    return ops, inbound


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
    ops, inbound = _inbound(keras, model, what_model)
    ops, inbound = keras_transformer.inline_sequential(keras, ops, inbound)   # ConvNeXt's stem (issue 45)
    readers: dict[str, int] = {}
    for names in inbound.values():
        for n in names:
            readers[n] = readers.get(n, 0) + 1
    b = _Builder((c, h, w), readers)
    handlers = {
        "Conv2D": _conv,
        "DepthwiseConv2D": _depthwise,
        "SeparableConv2D": _separable,
        "BatchNormalization": _batchnorm,
        "MaxPooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, MaxPool),
        "AveragePooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, Subsample),
        "GlobalAveragePooling2D": _global_pool,
        "ZeroPadding2D": _zero_padding,
        "Rescaling": _rescaling,
        "Normalization": _normalization,
        "Reshape": _reshape,
        "Dense": _dense,
        "ReLU": _relu,
        "Softmax": lambda b_, l_, w_: b_.fold_activation("softmax", w_),
        "Activation": lambda b_, l_, w_: b_.fold_activation(_activation_name(l_, w_), w_),
    }
    handlers.update(keras_transformer.HANDLERS)   # LayerNormalization, LayerScale, Cropping2D... (issue 45)
    handlers["Dense"] = keras_transformer.dense_per_pixel(_dense, _activation_name)
    merging = {"Add": _add, "Multiply": _multiply, "Concatenate": _concatenate, "CustomScaleLayer": _scaled_add}
    input_names = {t._keras_history.operation.name for t in model.inputs}
    last = None
    for layer in ops:
        cls = type(layer).__name__
        what = f"layer {layer.name} ({cls})"
        dtype = getattr(layer, "compute_dtype", "float32")
        if dtype != "float32":
            raise UserError(f"{what}: computes in {dtype}; only float32 models are supported")
        inputs = [_Value(NET_INPUT, (c, h, w)) if n in input_names or n == NET_INPUT else b.values[n]
                  for n in inbound[layer.name]]
        b.source, b.shape, b.flatten_from = inputs[0].layer, inputs[0].shape, inputs[0].flatten_from
        b.pad, b.ops = inputs[0].pad, inputs[0].ops
        is_layer = isinstance(layer, keras.layers.Layer)
        if not is_layer and cls == "Add" and len(inputs) == 2:   # x + y of two tensors: ConvNeXt's residual
            _add(b, layer, f"operation {layer.name} ({cls})", inputs)
        elif not is_layer:
            _scalar_op(b, layer, f"operation {layer.name} ({cls})", layer._inbound_nodes[0])
        elif cls == "Dropout":
            b.notes.append(f"{layer.name}: Dropout skipped (identity at inference)")
        elif cls == "Flatten":
            _channels_last(layer, what)
            b.materialise(what)
            b.flatten_from = _spatial(b, what)
            b.shape = (int(np.prod(b.shape)),)
        elif cls in merging:
            merging[cls](b, layer, what, inputs)
        elif len(inputs) != 1:
            raise UserError(f"{what}: reads {len(inputs)} tensors; only Add, Multiply and Concatenate read more "
                            f"than one")
        elif b.ops and cls not in ("ReLU",):
            raise UserError(f"{what}: follows scalar operations {b.ops} that are not one of our activations")
        elif cls in handlers:
            if cls not in ("ZeroPadding2D", "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "MaxPooling2D",
                           "AveragePooling2D"):
                b.materialise(what)
            handlers[cls](b, layer, what)
        elif cls in REFUSED:
            raise UserError(f"{what}: {REFUSED[cls]}")
        elif isinstance(layer, keras.Model):   # ConvNeXt's stem and downsampling: name what is inside too
            lacking = sorted({type(inner).__name__ for inner in layer.layers} - set(handlers) - set(merging)
                             - {"InputLayer", "Dropout", "Flatten"})
            raise UserError(f"{what}: a model nested in the model is not supported"
                            + (f", nor what it holds: {', '.join(lacking)}" if lacking else
                               " (its layers are: save it flattened into the outer model)"))
        else:
            raise UserError(f"{what}: layer type {cls} is not supported (supported: {SUPPORTED})")
        b.values[layer.name] = last = _Value(b.source, b.shape, b.flatten_from, b.pad, b.ops)
    if not b.layers:
        raise UserError(f"{what_model}: the model has no layer we can run")
    output = b.values.get(model.outputs[0]._keras_history.operation.name)
    if output is not None and (output.pad or output.ops):
        raise UserError(f"{what_model}: the model ends in a ZeroPadding2D or a scalar operation; we take one only "
                        f"before the convolution or pooling it belongs to (or an activation it spells)")
    if output is None or output is not last or output.layer != b.layers[-1]["name"] or output.pad or output.ops:
        raise UserError(f"{what_model}: the output is not made by the last layer; only models whose last layer "
                        f"makes the output are supported")
    if output.flatten_from is not None and output.flatten_from[1:] != (1, 1):
        raise UserError(f"{what_model}: a Flatten must be followed by a Dense layer")
    description = f"imported from {source or 'a Keras model'}" + (f"; {'; '.join(b.notes)}" if b.notes else "")
    net = b.net(name, description, (c, h, w))
    validate_weights(b.weights, net, what_model)
    return net, b.weights
