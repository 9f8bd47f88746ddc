"""Bring your own model: a Keras Sequential model (.keras or .h5) as one of
our nets plus its trained weights in our layouts.

Supported: Conv2D (valid or same padding, any strides, no dilation or groups),
MaxPooling2D, AveragePooling2D (our Subsample with coefficient 1, bias 0),
Dense after Flatten or Dense, Flatten, and the activations linear, relu,
sigmoid, given on a layer or as a separate Activation/ReLU layer that is
folded into the layer before it.  Dropout is accepted: it is the identity at
inference.  Input is channels_last (H, W, C) float32.  Everything else is
refused with a UserError naming the layer and why, never approximated.

Layouts: Conv2D kernel (FH,FW,C,K) -> (K,C,FH,FW).  Keras's Flatten reads an
NHWC tensor in H,W,C order, ours in C,H,W order, so the rows of the Dense
weight after a Flatten are permuted.
"""
from __future__ import annotations

import os
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .errors import UserError

from .layouts import hwc_rows_to_chw
from .spec import Conv, Dense, MaxPool, Net, Subsample
from .weights import validate_weights

ACTIVATION = {"linear": "none", "relu": "relu", "sigmoid": "sigmoid"}
SUFFIXES = (".keras", ".h5")

# Layer types refused with a reason that says what to do instead.
REFUSED = {
    "BatchNormalization": "batch normalisation is not one of our layers; fold it into the previous "
                          "layer's weights and bias before saving",
    "Softmax": "softmax is not one of our activations (none, relu, sigmoid); remove it, it does not "
               "change the top-1 class",
    "Conv1D": "only 2-D convolutions are supported",
    "Conv3D": "only 2-D convolutions are supported",
    "DepthwiseConv2D": "depthwise convolution is not supported (Conv2D with groups=1 is)",
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
        raise UserError(f"{what}: activation {name!r} is not supported (only linear, relu, sigmoid)")
    return ACTIVATION[name]


def _same_pad(size: int, kernel: int, stride: int) -> int:
    """Total rows that Keras's 'same' padding adds along one axis."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0)


class _Builder:
    """Walks the Keras layers, tracking the activation shape, and collects our layers."""

    def __init__(self, in_shape: tuple):
        self.shape = in_shape                 # ours: (C, H, W), or (F,) once flattened
        self.flatten_from: tuple | None = None  # (C, H, W) of a Flatten not yet consumed by a Dense
        self.layers: list[dict] = []          # spec class, kwargs; activation filled in later
        self.weights: dict[str, np.ndarray] = {}
        self.names: set = set()
        self.notes: list[str] = []

    def add(self, cls, name, params: dict, **kwargs):
        name = _sanitise(name, self.names)
        self.layers.append({"cls": cls, "name": name, "activation": kwargs.pop("activation", "none"),
                            "kwargs": kwargs})
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        spec = cls(name, "none", **kwargs)
        self.shape = tuple(spec.out_shape(self.shape))

    def fold_activation(self, act: str, what: str):
        if act == "none":
            return
        if not self.layers:
            raise UserError(f"{what}: an activation before any other layer is not supported")
        last = self.layers[-1]
        if last["activation"] != "none":
            raise UserError(f"{what}: a second activation after {last['name']} ({last['activation']}) "
                            f"is not supported; our layers carry one activation each")
        last["activation"] = act

    def net(self, name: str, description: str, input_shape: tuple) -> Net:
        specs = tuple(d["cls"](d["name"], d["activation"], **d["kwargs"]) for d in self.layers)
        return Net(name=name, input_shape=input_shape, layers=specs, default_batch=1, description=description)


def _spatial(b: _Builder, what: str) -> tuple:
    if len(b.shape) != 3:
        raise UserError(f"{what}: needs a (H, W, C) input, but follows a Flatten or Dense layer")
    return b.shape


def _channels_last(layer, what: str) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise UserError(f"{what}: data_format {layer.data_format!r} is not supported; use channels_last")


def _conv(b: _Builder, layer, what: str):
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    if tuple(layer.dilation_rate) != (1, 1):
        raise UserError(f"{what}: dilation_rate {tuple(layer.dilation_rate)} is not supported (only 1)")
    if getattr(layer, "groups", 1) != 1:
        raise UserError(f"{what}: groups={layer.groups} is not supported (only 1)")
    kernel, stride = tuple(layer.kernel_size), tuple(layer.strides)
    pad = _pool_or_conv_pad(layer.padding, (h, w), kernel, stride, what)
    arrays = layer.get_weights()
    weight = conv_kernel_from_keras(arrays[0])
    bias = arrays[1] if layer.use_bias else np.zeros(layer.filters, np.float32)
    b.add(Conv, layer.name, {"weight": weight, "bias": bias}, activation=_activation_name(layer, what),
          out_channels=layer.filters, kernel=kernel, stride=stride, pad=pad)


def _pool_or_conv_pad(padding: str, size: tuple, kernel: tuple, stride: tuple, what: str) -> tuple:
    """Our symmetric pad for Keras's `padding`, or a UserError when it has none."""
    if padding == "valid":
        return (0, 0)
    if padding != "same":
        raise UserError(f"{what}: padding {padding!r} is not supported (only valid, same)")
    totals = [_same_pad(n, k, s) for n, k, s in zip(size, kernel, stride)]
    if any(t % 2 for t in totals):
        raise UserError(f"{what}: 'same' padding here adds {totals[0]} rows and {totals[1]} columns, "
                        f"one more at the bottom/right than the top/left; our layers pad symmetrically "
                        f"(use an odd kernel with stride 1, or padding='valid')")
    return (totals[0] // 2, totals[1] // 2)


def _pool(b: _Builder, layer, what: str, cls):
    c, h, w = _spatial(b, what)
    _channels_last(layer, what)
    kernel = tuple(layer.pool_size)
    stride = tuple(layer.strides) if layer.strides is not None else kernel
    if layer.padding != "valid" and any(_same_pad(n, k, s) for n, k, s in zip((h, w), kernel, stride)):
        raise UserError(f"{what}: padding {layer.padding!r} pads this input, and our pooling layers do "
                        f"not pad; use padding='valid'")
    params = {"coeff": np.ones(c, np.float32), "bias": np.zeros(c, np.float32)} if cls is Subsample else {}
    b.add(cls, layer.name, params, kernel=kernel, stride=stride)


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
    if layer.max_value is not None or float(layer.negative_slope) != 0 or float(layer.threshold) != 0:
        raise UserError(f"{what}: only a plain ReLU is supported (no max_value, negative_slope or threshold)")
    b.fold_activation("relu", what)


def import_model(model, name: str, source: str = "") -> tuple[Net, dict[str, np.ndarray]]:
    """A Keras Sequential model as (net, weights); `name` names the net."""
    keras = _keras()
    kind = type(model).__name__
    if not isinstance(model, keras.Sequential):
        raise UserError(f"{source or name}: only Sequential models can be imported, this is a {kind}")
    try:
        shape = tuple(model.inputs[0].shape)
    except (AttributeError, IndexError, ValueError):
        raise UserError(f"{source or name}: the model has no input shape; build it with keras.Input((H, W, C))") from None
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise UserError(f"{source or name}: input shape {shape[1:]} is not a fixed (H, W, C) image")
    h, w, c = (int(d) for d in shape[1:])
    b = _Builder((c, h, w))
    handlers = {
        "Conv2D": _conv,
        "MaxPooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, MaxPool),
        "AveragePooling2D": lambda b_, l_, w_: _pool(b_, l_, w_, Subsample),
        "Dense": _dense,
        "ReLU": _relu,
        "Activation": lambda b_, l_, w_: b_.fold_activation(_activation_name(l_, w_), w_),
    }
    for layer in model.layers:
        cls = type(layer).__name__
        what = f"layer {layer.name} ({cls})"
        if cls == "InputLayer":
            continue
        dtype = getattr(layer, "compute_dtype", "float32")
        if dtype != "float32":
            raise UserError(f"{what}: computes in {dtype}; only float32 models are supported")
        if cls == "Dropout":
            b.notes.append(f"{layer.name}: Dropout skipped (identity at inference)")
        elif cls == "Flatten":
            _channels_last(layer, what)
            b.flatten_from = _spatial(b, what)
            b.shape = (int(np.prod(b.shape)),)
        elif cls in handlers:
            handlers[cls](b, layer, what)
        elif cls in REFUSED:
            raise UserError(f"{what}: {REFUSED[cls]}")
        else:
            raise UserError(f"{what}: layer type {cls} is not supported (supported: Conv2D, MaxPooling2D, "
                            f"AveragePooling2D, Dense, Flatten, Activation, ReLU, Dropout)")
    if b.flatten_from is not None:
        raise UserError(f"{source or name}: a Flatten must be followed by a Dense layer")
    if not b.layers:
        raise UserError(f"{source or name}: the model has no layer we can run")
    description = f"imported from {source or 'a Keras model'}" + (f"; {'; '.join(b.notes)}" if b.notes else "")
    net = b.net(name, description, (c, h, w))
    validate_weights(b.weights, net, source or name)
    return net, b.weights
