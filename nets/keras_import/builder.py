"""The importer's state: what each Keras layer's output is to us (a Value), our layers as
they are made (Made), and the Builder that walks the Keras layers collecting them with their
weights, folding a later activation into the layer that makes its input."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..spec import NET_INPUT, Channels, Conv, Layer, Net, Softmax

# Keras's activation names -> ours ('softmax' is a layer of its own)
ACTIVATION = {"linear": "none", "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh",
              "silu": "silu", "swish": "silu", "hard_silu": "hardswish", "hard_swish": "hardswish",
              "hard_sigmoid": "hardsigmoid", "gelu": "gelu"}


def activation_name(layer, what: str) -> str:
    """Our name of `layer`'s activation ('softmax' included: a layer of its own, added by the caller)."""
    fn = getattr(layer, "activation", None)
    name = getattr(fn, "__name__", str(fn)) if fn is not None else "linear"
    if name == "softmax":
        return name
    if name not in ACTIVATION:
        raise UserError(f"{what}: activation {name!r} is not supported (only {', '.join(ACTIVATION)}, softmax)")
    return ACTIVATION[name]


def sanitise(name: str, taken: set) -> str:
    # our parameter keys are '<layer>.<param>': no dots or odd characters in a layer name
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "layer"
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


@dataclass
class Value:
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


@dataclass
class Made:
    """One layer of ours as made: its spec (no activation yet, reading `inputs`) and the activation
    it will carry, its own or one a later Keras layer folds into it."""

    spec: Layer
    inputs: tuple
    activation: str = "none"

    @property
    def name(self) -> str:
        return self.spec.name

    def is_plain_conv(self) -> bool:
        """A convolution without an activation: a per-channel scale can fold into its weights."""
        return type(self.spec) is Conv and self.activation == "none"


class Builder:
    """Walks the Keras layers, tracking what each one's output is, and collects our layers.
    `shape`, `flatten_from`, `source`, `pad` and `ops` describe the input of the layer being imported."""

    def __init__(self, in_shape: tuple, readers: dict):
        self.shape = in_shape
        self.flatten_from: tuple | None = None
        self.source = NET_INPUT
        self.pad: tuple | None = None
        self.ops: tuple = ()
        self.readers = readers                # Keras layer name -> how many layers read its output
        self.values: dict[str, Value] = {}    # Keras layer name -> its output
        self.layers: list[Made] = []
        self.weights: dict[str, np.ndarray] = {}
        self.names: set = {NET_INPUT}
        self.notes: list[str] = []
        self.shapes: dict[str, tuple] = {NET_INPUT: in_shape}   # our layer -> its output shape

    def start(self, value: Value) -> None:
        """The next Keras layer reads `value` (its first input)."""
        self.source, self.shape, self.flatten_from = value.layer, value.shape, value.flatten_from
        self.pad, self.ops = value.pad, value.ops

    def output(self) -> Value:
        """What the Keras layer just imported makes."""
        return Value(self.source, self.shape, self.flatten_from, self.pad, self.ops)

    def add(self, cls, name, params: dict, inputs: tuple | None = None, **kwargs):
        name = sanitise(name, self.names)
        activation = kwargs.pop("activation", "none")
        reads = inputs or (self.source,)
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        spec = cls(name, "none", inputs=inputs or (), **kwargs)
        self.layers.append(Made(spec, reads, activation))
        self.shape = tuple(spec.out_shape_of([self.shapes[n] for n in reads]))
        self.shapes[name] = self.shape
        self.source = name
        self.pad = None
        return name

    def made(self, name: str) -> Made | None:
        return next((m for m in self.layers if m.name == name), None)

    def read_count(self, layer: str, pending_too: bool = True) -> int:
        """How many Keras layers read what our `layer` makes (where `pending_too` is False, only those
        reading its output itself, not a padding or scalar operations still pending on it)."""
        return sum(self.readers.get(k, 0) for k, v in self.values.items()
                   if v.layer == layer and (pending_too or (not v.ops and v.pad is None)))

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
        last = self.made(self.source)
        if self.read_count(self.source, pending_too=False) > 1 or last.activation != "none":
            # a layer of its own: a selection of every channel
            if len(self.shape) != 3 or self.flatten_from is not None:
                raise UserError(f"{what}: the output of {last.name} is also read by another layer, or has an "
                                f"activation already, and is not an image: our activations on (N, features) are "
                                f"part of the layer that makes them")
            self.add(Channels, what.split()[1] if what.startswith("layer ") else f"{self.source}_{act}", {},
                     activation=act, order=tuple(range(self.shape[0])))
            return
        if type(last.spec) is Softmax:
            raise UserError(f"{what}: a second activation after {last.name} ({last.activation}) "
                            f"is not supported; our layers carry one activation each")
        last.activation = act

    def materialise(self, what: str):
        """A pending ZeroPadding2D made a layer of its own (an identity depthwise 1x1 conv that pads)."""
        if self.pad is None:
            return
        c = spatial(self, what)[0]
        self.add(Conv, f"{self.source}_pad", {"weight": np.ones((c, 1, 1, 1)), "bias": np.zeros(c)},
                 out_channels=c, kernel=(1, 1), pad=self.pad, groups=c)

    def net(self, name: str, description: str, input_shape: tuple) -> Net:
        specs, previous = [], NET_INPUT
        for m in self.layers:
            # a layer that reads the one before it names nothing, so a chain stays a chain
            inputs = () if m.inputs == (previous,) else m.inputs
            try:
                specs.append(dataclasses.replace(m.spec, activation=m.activation, inputs=inputs))
            except ValueError as exc:   # a value no layer of ours can hold (an epsilon below 0, ...)
                raise UserError(f"{name}: layer {m.name}: {str(exc).split(': ', 1)[-1]}") from None
            previous = m.name
        return Net(name=name, input_shape=input_shape, layers=tuple(specs), default_batch=1, description=description)


def spatial(b: Builder, what: str) -> tuple:
    if len(b.shape) != 3 or b.flatten_from is not None:
        raise UserError(f"{what}: needs a (H, W, C) input, but follows a Flatten or Dense layer")
    return b.shape


def channels_last(layer, what: str) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise UserError(f"{what}: data_format {layer.data_format!r} is not supported; use channels_last")
