"""Bring your own model: an ONNX file as one of our nets plus the weights it holds.

Operators taken (those the classification models of torchvision write,
exported with torch.onnx.export):
Conv (groups, pads, strides, dilations), BatchNormalization (inference;
folded into the convolution before it when the model is loaded, else the
per-channel affine map it is: nets/batchnorm.py), Relu, Clip (0..6 as ReLU6,
0..inf as ReLU), Sigmoid, Tanh, HardSigmoid (alpha 1/6, beta 1/2: PyTorch's),
HardSwish, SiLU as Sigmoid then Mul (one activation, silu), MaxPool (pads;
ceil_mode as more padding at the bottom and right, which never wins),
AveragePool (pads, ceil_mode, count_include_pad either way; a plain one is
our Subsample of coefficient 1), GlobalAveragePool and ReduceMean over H and
W, Add, Mul (elementwise, or by an (N, C, 1, 1) gate), Concat along the
channels, Softmax of the features, Flatten and Reshape to (N, features),
Gemm and MatMul on a flattened tensor, Pad with zeros before a convolution
(its padding), a channel shuffle (Reshape to (N, g, C/g, H, W), Transpose,
Reshape back) and channel Slice and Split (a selection of channels, folded
into the convolution that reads it where it can, else a layer of its own),
and the Constant, Identity and Dropout nodes exporters write.  The shape
arithmetic an exporter traces (Shape, Gather, Unsqueeze, Concat, Div... on
shapes) is worked out at import (nets/onnx_constants.py).  An activation is
folded into the layer that makes its input when nothing else reads that
input, else it is a layer of its own (a selection of every channel).

The batch: a Reshape whose target starts with a number (not -1, 0, or the
batch the graph reads from a Shape) fixes the batch at that number, as the
exported model does; the net then runs at that batch only (Net.fixed_batch).

Anything else (another operator, a broadcast we cannot run, a shape we
cannot run) is refused with a UserError naming the node, its operator and
what we lack; never approximated.

Layouts: ONNX is NCHW like us; a Conv weight is (K, C/groups, FH, FW) as
ours, pads are (top, left, bottom, right) as ours; a Gemm's B is (in, out),
or (out, in) with transB.  Flatten of NCHW is our dense layer's C, H, W order.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace

import numpy as np

from nets.errors import UserError

from . import onnx_canonical as canonical
from . import onnx_constants as oc
from . import onnx_transformer as transformer
from .spec import (NET_INPUT, Add, AvgPool, BatchNorm, Channels, Concat, Conv, Dense, GlobalAvgPool, MaxPool, Mul, Net,
                   Softmax, Subsample, ceil_out_size, window_pair)
from .userfile import regular_file
from .weights import validate_weights

DAMAGED = "the model file is damaged or was edited: export it again"   # what to do about a value no exporter writes
MAX_ONNX_BYTES = 2 * 2**30   # protobuf's limit for one message: a larger model keeps its weights as external data

_SUB_BYTE = (22, 21, 23, 25, 26)   # ONNX's 4-bit and 2-bit element types (INT4, UINT4, FLOAT4E2M1, ...), packed
SUPPORTED = ("Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "MaxPool",
             "AveragePool", "GlobalAveragePool", "ReduceMean", "Add", "Mul", "Concat", "Softmax", "Flatten", "Reshape",
             "Transpose", "Slice", "Split", "Pad", "Gemm", "MatMul", "Shape", "Constant", "Identity", "Dropout")
_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish"}
# x * act(x) is one activation: SiLU as PyTorch exports it, and hardswish at opsets before HardSwish
_TIMES_ITSELF = {"sigmoid": "silu", "hardsigmoid": "hardswish"}
# activations with act(0) == 0, which commute with zero padding
_KEEPS_ZERO = ("relu", "relu6", "tanh", "hardswish", "silu")


def _onnx():
    try:
        import onnx
    except ImportError:
        raise UserError("importing an ONNX model needs the onnx package: pip install 'clblast-compare[onnx]'") from None
    return onnx


def load_onnx(path: str | os.PathLike) -> tuple[Net, dict[str, np.ndarray]]:
    """The model in `path` as (net named after the file, weights); batch norms not yet folded."""
    path = regular_file(path, "ONNX model file", MAX_ONNX_BYTES, empty_ok=True)
    if path.stat().st_size == 0:
        raise UserError(f"ONNX model file {path} is empty; export the model again")
    onnx = _onnx()
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - any parsing problem is the file's, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"ONNX model file {path} cannot be read ({first}); export it again") from None
    if not model.HasField("graph") or not model.ir_version:
        raise UserError(f"ONNX model file {path} is not an ONNX model (it holds no graph or IR version); "
                        f"export the model again")
    net, weights = import_model(model, path.stem, str(path))
    return replace(net, model_file=str(path.resolve())), weights


class _Refused(Exception):
    """What a node lacks; turned into a UserError naming the node."""


@dataclass
class _Value:
    """A tensor the graph computes, as a view of one of our layers' outputs: `shape`
    per image ((C, H, W), (features,), or the channels split in more dimensions
    by a shuffle's reshape, H and W last); `flat`: a flattened (N, features)
    view; `order`: which of the layer's channels, in which order (None: all,
    as they are; an array of the shape's channel dimensions); `act`: an
    activation still to apply (the layer's output is also read elsewhere);
    `pad`: zero padding still to add (top, left, bottom, right), a Pad node
    waiting for the convolution it belongs to."""

    layer: str
    shape: tuple
    flat: bool = False
    order: np.ndarray | None = None
    act: str = "none"
    pad: tuple | None = None
    tensor: str = ""   # the ONNX tensor an `act` applies to (a SiLU's Mul names it again)

    @property
    def plain(self) -> bool:
        return self.order is None and self.act == "none" and self.pad is None


@dataclass
class _Pending:
    cls: type
    name: str
    inputs: tuple
    kwargs: dict
    activation: str = "none"


@dataclass
class _Graph:
    """The walk's state: our layers so far, their weights, and what each ONNX tensor is."""

    source: str
    consumers: dict                        # tensor name -> how many nodes and graph outputs read it
    batch: int = 1                         # the batch a Shape node reports (the input's, or 1 if dynamic)
    constants: dict = field(default_factory=dict)   # tensor name -> oc.Constant (initializers, shape arithmetic)
    values: dict = field(default_factory=dict)      # tensor name -> _Value
    layers: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    names: set = field(default_factory=lambda: {NET_INPUT})
    out_shapes: dict = field(default_factory=dict)  # our layer name -> its output shape per image
    fixed_batch: int | None = None
    fixed_by: str = ""
    input_shape: tuple = ()

    def layer(self, name: str) -> _Pending | None:
        return next((p for p in self.layers if p.name == name), None)

    def new_layer(self, cls, base: str, inputs: tuple, params: dict, out_shape: tuple, **kwargs) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", base.strip("/")) or cls.__name__.lower()
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        self.layers.append(_Pending(cls, name, inputs, kwargs))
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        self.out_shapes[name] = tuple(out_shape)
        return name

    def add(self, cls, node, inputs: tuple, params: dict, out_shape: tuple, **kwargs) -> str:
        name = self.new_layer(cls, node.name or node.output[0], inputs, params, out_shape, **kwargs)
        self.values[node.output[0]] = _Value(name, tuple(out_shape))
        return name

    def readers(self, layer: str) -> int:
        """How many nodes (and graph outputs) read `layer`'s output itself: a tensor that
        views it, not one that applies an activation to it still."""
        views = sum(self.consumers.get(t, 0) for t, v in getattr(self, "views", {}).items()
                    if getattr(v, "layer", None) == layer)   # read through nets/onnx_transformer.py's views
        return views + sum(self.consumers.get(t, 0) for t, v in self.values.items()
                           if v.layer == layer and v.act == "none")

    def constant(self, name: str) -> oc.Constant | None:
        return self.constants.get(name)


def _attributes(onnx, node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _take(attrs: dict, allowed: dict) -> dict:
    """`allowed` (name -> default) filled from attrs; an attribute not allowed is refused."""
    extra = sorted(set(attrs) - set(allowed))
    if extra:
        raise _Refused(f"attribute {extra[0]} is not supported")
    return {k: attrs.get(k, default) for k, default in allowed.items()}


def _computed(g: _Graph, name: str) -> _Value:
    if name in g.constants:
        raise _Refused(f"input {name!r} is a constant; we run it only on computed tensors")
    if name not in g.values:
        raise _Refused(f"input {name!r} is not computed by a node before it")
    return g.values[name]


def _plain(g: _Graph, name: str, v: _Value | None = None) -> _Value:
    """Tensor `name` (or value `v`) as a whole layer's output: a channel selection,
    an activation still to apply, a padding still to add, each made a layer here."""
    v = v or _computed(g, name)
    if v.plain:
        return v
    if (v.flat or len(v.shape) == 1) and v.act != "none":
        raise _Refused(f"input {name!r}: the {v.act} of a flattened tensor whose layer is also read elsewhere "
                       f"is not supported (our activations on (N, features) are part of the layer that makes them)")
    layer, shape = v.layer, _channel_shape(g, v)
    if v.order is not None or v.act != "none":
        order = tuple(int(c) for c in (v.order if v.order is not None else np.arange(shape[0])).reshape(-1))
        full = g.out_shapes.get(layer, shape)
        layer = g.new_layer(Channels, f"{name}_channels" if v.act == "none" else f"{name}_{v.act}", (layer,), {},
                            (len(order),) + tuple(full[1:]), order=order)
        g.layer(layer).activation = v.act
        shape = (len(order),) + tuple(full[1:])
    if v.pad is not None:   # zero padding as an identity depthwise 1x1 convolution that pads
        c = shape[0]
        spec = Conv("probe", out_channels=c, kernel=(1, 1), pad=v.pad, groups=c)
        shape = spec.out_shape(shape)
        layer = g.new_layer(Conv, f"{name}_pad", (layer,), {"weight": np.ones((c, 1, 1, 1)), "bias": np.zeros(c)},
                            shape, out_channels=c, kernel=(1, 1), pad=v.pad, groups=c)
    out = _Value(layer, tuple(shape), v.flat)
    g.values[name] = out
    return out


def _channel_shape(g: _Graph, v: _Value) -> tuple:
    """(C, H, W) of a value whose channels may be split over several dimensions."""
    if v.flat:
        return v.shape
    if len(v.shape) < 3:
        raise _Refused(f"a {len(v.shape)}-D tensor per image is not an (N, C, H, W) one")
    return (int(np.prod(v.shape[:-2])),) + tuple(v.shape[-2:])


def _spatial(g: _Graph, name: str) -> _Value:
    v = _plain(g, name)
    if v.flat or len(v.shape) != 3:
        raise _Refused(f"input {name!r} is a {len(v.shape)}-D tensor per image; it needs an (N, C, H, W) one")
    return v


def _constant(g: _Graph, name: str, what: str) -> np.ndarray:
    c = g.constant(name)
    if c is None:
        raise _Refused(f"its {what} {name!r} is computed in the graph; only constant {what}s are supported")
    if c.from_batch:
        raise _Refused(f"its {what} {name!r} is computed from the batch")
    arr = np.asarray(c.value)
    if arr.dtype.kind not in "fiu":
        raise _Refused(f"its {what} {name!r} has dtype {arr.dtype}")
    return arr


def _window(attrs: dict, shape: tuple, kernel: tuple, strides: tuple, dilations: tuple = (1, 1)) -> tuple:
    """Our (top, left, bottom, right) from ONNX's pads or auto_pad."""
    auto = attrs["auto_pad"]
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", "VALID"):
        pads = tuple(attrs["pads"] or (0, 0, 0, 0)) if auto == "NOTSET" else (0, 0, 0, 0)
        if len(pads) != 4:
            raise _Refused(f"pads {pads} are not for a 2-D window")
        return pads
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise _Refused(f"auto_pad {auto!r} is not supported")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(shape[1:], spans, strides)]
    small = [t // 2 for t in totals]
    large = [t - t // 2 for t in totals]
    begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
    return (begin[0], begin[1], end[0], end[1])


def _pair(values, what: str, default=(1, 1)) -> tuple:
    """A window's kernel_shape, strides or dilations: two whole numbers, each at least 1, before any
    arithmetic is done with them (a zero stride divides by zero)."""
    values = tuple(values or default)
    if len(values) != 2:
        raise _Refused(f"{what} {values} are not for a 2-D window")
    try:
        return window_pair(values, what)
    except ValueError as exc:
        raise _Refused(f"{str(exc).split(': ', 1)[-1]}; {DAMAGED}") from None


def _conv(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
                      "strides": None})
    weight = _constant(g, node.input[1], "weight").astype(np.float32)
    if weight.ndim != 4:
        raise _Refused(f"its weight has shape {weight.shape}; a 2-D convolution's is (K, C/group, FH, FW)")
    k, _, fh, fw = weight.shape
    if min(weight.shape) < 1:
        raise _Refused(f"its weight has shape {weight.shape}, which holds no filter tap; {DAMAGED}")
    if int(a["group"]) < 1:
        raise _Refused(f"group {a['group']} is no number of groups (at least 1); {DAMAGED}")
    kernel = _pair(a["kernel_shape"], "kernel_shape", (fh, fw))
    if kernel != (fh, fw):
        raise _Refused(f"kernel_shape {kernel} differs from its weight's {(fh, fw)}")
    bias = (_constant(g, node.input[2], "bias").astype(np.float32) if len(node.input) > 2 and node.input[2]
            else np.zeros(k, np.float32))
    x, weight, bias, order = _selection_into_conv(g, node.input[0], weight, bias, int(a["group"]))
    strides, dilations = _pair(a["strides"], "strides"), _pair(a["dilations"], "dilations")
    pad = np.array(_window(a, x.shape, kernel, strides, dilations))
    if x.pad is not None:   # a Pad node's zeros before it: more padding of ours
        pad = pad + np.array(x.pad)
        x = replace(x, pad=None)
    pad = tuple(int(p) for p in pad)
    spec = Conv("probe", out_channels=k, kernel=kernel, stride=strides, pad=pad, groups=int(a["group"]),
                dilation=dilations)
    if weight.shape[1] * spec.groups != x.shape[0]:
        raise _Refused(f"its weight reads {weight.shape[1]} channels per group, its input has {x.shape[0]} "
                       f"in {spec.groups} group(s)")
    name = g.add(Conv, node, (x.layer,), {"weight": weight, "bias": bias}, spec.out_shape(x.shape),
                 out_channels=k, kernel=kernel, stride=strides, pad=pad, groups=spec.groups, dilation=dilations)
    if order is not None:   # a depthwise conv run on the whole input, in its channels' order: select after it
        g.values[node.output[0]] = _Value(name, spec.out_shape(x.shape), order=order)


def _selection_into_conv(g: _Graph, name: str, weight: np.ndarray, bias: np.ndarray, groups: int):
    """The conv's input, weight and bias with a channel selection before it folded in where it
    can be: into the weight of a dense conv (each selected channel's filter taps moved to the
    channel it selects; a channel selected twice sums them), or, for a depthwise conv on a
    permutation of its input, the conv run on the input as it is and the same permutation
    selected after it (returned as the order).  Elsewhere the selection is made a layer."""
    v = _computed(g, name)
    if v.order is None or v.act != "none" or v.flat:
        v = _plain(g, name, v) if (v.act != "none" or v.order is not None) else v
        if v.pad is None and (v.flat or len(v.shape) != 3):
            raise _Refused(f"input {name!r} is a {len(v.shape)}-D tensor per image; it needs an (N, C, H, W) one")
        return v, weight, bias, None
    order = v.order.reshape(-1)
    full = g.out_shapes[v.layer]
    channels = full[0]
    if groups == 1:
        wide = np.zeros((weight.shape[0], channels) + weight.shape[2:], np.float64)
        np.add.at(wide, (slice(None), order), weight.astype(np.float64))
        return _Value(v.layer, tuple(full), pad=v.pad), wide.astype(np.float32), bias, None
    if groups == weight.shape[0] == len(order) == channels and sorted(order) == list(range(channels)):
        w, b = np.empty_like(weight), np.empty_like(bias)
        w[order], b[order] = weight, bias
        return _Value(v.layer, tuple(full), pad=v.pad), w, b, order
    v = _plain(g, name, v)
    return v, weight, bias, None


def _batchnorm(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1})
    if not (math.isfinite(a["epsilon"]) and a["epsilon"] >= 0):
        raise _Refused(f"epsilon {a['epsilon']} is not a finite number, 0 or more; {DAMAGED}")
    if a["training_mode"] or a["spatial"] != 1 or len([o for o in node.output if o]) > 1:
        raise _Refused("only inference batch normalisation per channel is supported (training_mode 0, one output)")
    x = _spatial(g, node.input[0])
    params = {p: _constant(g, name, p) for p, name in zip(("scale", "bias", "mean", "var"), node.input[1:5])}
    if any(v.shape != (x.shape[0],) for v in params.values()):
        raise _Refused(f"its parameters are not one per channel ({x.shape[0]})")
    g.add(BatchNorm, node, (x.layer,), params, x.shape, eps=float(a["epsilon"]))


def _activation(g: _Graph, node, act: str) -> None:
    """`act` folded into the layer that makes the input, where nothing else reads that
    input; else kept on the value, to be a SiLU's or a layer of its own (_plain)."""
    x = _computed(g, node.input[0])
    if x.act != "none":
        x = _plain(g, node.input[0], x)
    maker = g.layer(x.layer)
    if x.pad is not None and act not in _KEEPS_ZERO:
        x = _plain(g, node.input[0], x)
        maker = g.layer(x.layer)
    if maker is None or g.readers(maker.name) > 1 or maker.activation != "none" or maker.cls is Softmax:
        g.values[node.output[0]] = replace(x, act=act, tensor=node.input[0])
        return
    maker.activation = act
    g.values[node.output[0]] = x


def _clip(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"min": None, "max": None})   # attributes before opset 11, inputs after
    bounds = [a["min"], a["max"]]
    for i, name in enumerate(node.input[1:3]):
        if name:
            bounds[i] = float(_constant(g, name, "bound").reshape(-1)[0])
    low, high = (-np.inf if bounds[0] is None else bounds[0]), (np.inf if bounds[1] is None else bounds[1])
    if low == 0 and high == 6:
        _activation(g, node, "relu6")
    elif low == 0 and high == np.inf:
        _activation(g, node, "relu")
    else:
        raise _Refused(f"Clip to [{low}, {high}] is not supported (only [0, 6], ReLU6, and [0, inf], ReLU)")


def _hardsigmoid(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"alpha": 0.2, "beta": 0.5})
    if not (math.isclose(a["alpha"], 1 / 6, rel_tol=1e-6) and math.isclose(a["beta"], 0.5, rel_tol=1e-6)):
        raise _Refused(f"alpha {a['alpha']:g} and beta {a['beta']:g} are not supported; our hardsigmoid is "
                       f"PyTorch's, alpha 1/6 and beta 1/2")
    _activation(g, node, "hardsigmoid")


def _maxpool(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None, "pads": None,
                      "storage_order": 0, "strides": None})
    if len([o for o in node.output if o]) > 1:
        raise _Refused("its Indices output is not supported")
    if any(d != 1 for d in (a["dilations"] or ())):
        raise _Refused(f"dilations {tuple(a['dilations'])} are not supported (only 1)")
    x = _spatial(g, node.input[0])
    kernel, strides = _pair(a["kernel_shape"], "kernel_shape"), _pair(a["strides"], "strides")
    pad = _window(a, x.shape, kernel, strides)
    if a["ceil_mode"]:   # the last window past the padding: more padding, which never wins
        extra = _overhang(x.shape, kernel, strides, pad)
        pad = (pad[0], pad[1], pad[2] + extra[0], pad[3] + extra[1])
    try:
        spec = MaxPool("probe", kernel=kernel, stride=strides, pad=pad)
    except ValueError as exc:
        raise _Refused(str(exc).split(": ", 1)[-1]) from None
    g.add(MaxPool, node, (x.layer,), {}, spec.out_shape(x.shape), kernel=kernel, stride=strides, pad=spec.pad)


def _overhang(shape: tuple, kernel: tuple, strides: tuple, pad: tuple) -> tuple:
    """(bottom, right): how far ceil mode's last windows run past the padding."""
    out = []
    for n, k, s, before, after in zip(shape[1:], kernel, strides, pad[:2], pad[2:]):
        count = ceil_out_size(n, k, s, before, after)
        out.append(max(0, (count - 1) * s + k - (n + before + after)))
    return tuple(out)


def _avgpool(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0, "dilations": None,
                      "kernel_shape": None, "pads": None, "strides": None})
    x = _spatial(g, node.input[0])
    kernel, strides = _pair(a["kernel_shape"], "kernel_shape"), _pair(a["strides"], "strides")
    if any(d != 1 for d in (a["dilations"] or ())):
        raise _Refused(f"dilations {tuple(a['dilations'])} are not supported (only 1)")
    pad = _window(a, x.shape, kernel, strides)
    c = x.shape[0]
    if not any(pad) and not (a["ceil_mode"] and any(_overhang(x.shape, kernel, strides, pad))):
        spec = Subsample("probe", kernel=kernel, stride=strides)   # a plain average pool, which every backend runs
        g.add(Subsample, node, (x.layer,), {"coeff": np.ones(c, np.float32), "bias": np.zeros(c, np.float32)},
              spec.out_shape(x.shape), kernel=kernel, stride=strides)
        return
    try:
        spec = AvgPool("probe", kernel=kernel, stride=strides, pad=pad, ceil_mode=bool(a["ceil_mode"]),
                       count_include_pad=bool(a["count_include_pad"]))
    except ValueError as exc:
        raise _Refused(str(exc).split(": ", 1)[-1]) from None
    g.add(AvgPool, node, (x.layer,), {}, spec.out_shape(x.shape), kernel=kernel, stride=strides, pad=spec.pad,
          ceil_mode=spec.ceil_mode, count_include_pad=spec.count_include_pad)


def _global_avgpool(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    x = _spatial(g, node.input[0])
    g.add(GlobalAvgPool, node, (x.layer,), {}, (x.shape[0], 1, 1))


def _reduce_mean(g: _Graph, node, attrs: dict) -> None:
    """The mean over H and W (MnasNet's, ShuffleNet's global pool); keepdims 0 leaves (N, C)."""
    a = _take(attrs, {"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
    axes = a["axes"] if a["axes"] is not None else (
        [int(v) for v in _constant(g, node.input[1], "axes").reshape(-1)] if len(node.input) > 1 and node.input[1]
        else None)
    if axes is None or sorted(int(ax) % 4 for ax in axes) != [2, 3]:
        raise _Refused(f"a mean over axes {axes} is not supported (only over H and W, 2 and 3: a global average pool)")
    x = _spatial(g, node.input[0])
    name = g.add(GlobalAvgPool, node, (x.layer,), {}, (x.shape[0], 1, 1))
    if not a["keepdims"]:
        g.values[node.output[0]] = _Value(name, (x.shape[0],), flat=True)


def _two(g: _Graph, node) -> tuple[_Value, _Value]:
    return _computed(g, node.input[0]), _computed(g, node.input[1])


def _add(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    constant = [n for n in node.input if n in g.constants]
    if len(constant) == 1:   # a MatMul's bias
        _bias_after_matmul(g, node, constant[0])
        return
    xs = [_plain(g, n) for n in node.input]
    if any(v.shape != xs[0].shape or v.flat != xs[0].flat for v in xs):
        raise _Refused(f"it adds tensors of shapes {[v.shape for v in xs]}; only an add of equal shapes "
                       f"(no broadcasting) is supported")
    if len({v.layer for v in xs}) != len(xs):
        raise _Refused("it adds a tensor to itself; only an add of different layers is supported")
    g.add(Add, node, tuple(v.layer for v in xs), {}, xs[0].shape)
    g.values[node.output[0]].flat = xs[0].flat


def _mul(g: _Graph, node, attrs: dict) -> None:
    """x * act(x) as one activation (SiLU); an elementwise product; a product by a per-channel gate."""
    _take(attrs, {})
    if any(n in g.constants for n in node.input):
        raise _Refused("a product with a constant is not supported (only of two computed tensors)")
    a, b = _two(g, node)
    for x, y, x_name in ((a, b, node.input[0]), (b, a, node.input[1])):
        if y.act in _TIMES_ITSELF and y.tensor == x_name and x.act == "none":
            _times_itself(g, node, x_name, y)
            return
    a, b = _plain(g, node.input[0]), _plain(g, node.input[1])
    if a.flat or b.flat:
        raise _Refused("a product of flattened (N, features) tensors is not supported (only of (N, C, H, W) ones)")
    if b.shape != a.shape and a.shape == (b.shape[0], 1, 1):
        a, b = b, a   # ours takes the gate second
    if b.shape != a.shape and b.shape != (a.shape[0], 1, 1):
        raise _Refused(f"it multiplies shapes {a.shape} and {b.shape}; only equal shapes, or a tensor by a "
                       f"(C, 1, 1) gate of its channels, are supported")
    g.add(Mul, node, (a.layer, b.layer), {}, a.shape)


def _times_itself(g: _Graph, node, x_name: str, gate: _Value) -> None:
    """x * sigmoid(x) (silu) or x * hardsigmoid(x) (hardswish): into x's layer where only
    these two nodes read it, else a layer of its own."""
    act = _TIMES_ITSELF[gate.act]
    x = _computed(g, x_name)
    maker = g.layer(x.layer)
    if maker is not None and maker.activation == "none" and g.readers(maker.name) == 2 and x.pad is None \
            and maker.cls is not Softmax:
        maker.activation = act
        g.values[node.output[0]] = replace(x, act="none")
        return
    g.values[node.output[0]] = _plain(g, node.output[0], replace(x, act=act))


def _bias_after_matmul(g: _Graph, node, constant: str) -> None:
    other = next(n for n in node.input if n != constant)
    x = _computed(g, other)
    maker = g.layer(x.layer)
    bias = _constant(g, constant, "bias").astype(np.float32).reshape(-1)
    if (maker is None or maker.cls is not Dense or maker.activation != "none" or g.consumers.get(other, 0) > 1
            or bias.shape != (x.shape[0],)):
        raise _Refused("adding a constant is supported only as the bias of the MatMul before it")
    g.weights[f"{maker.name}.bias"] = g.weights[f"{maker.name}.bias"] + bias
    g.values[node.output[0]] = x


def _concat(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"axis": 1})
    xs = [_computed(g, n) for n in node.input]
    if a["axis"] not in (1, -3) or any(v.flat or len(v.shape) != 3 for v in xs):
        raise _Refused(f"a concatenation along axis {a['axis']} is not supported (only along the channels of "
                       f"(N, C, H, W) tensors)")
    if len(xs) == 1:
        g.values[node.output[0]] = xs[0]
        return
    if len({v.layer for v in xs}) == 1 and all(v.act == "none" and v.pad is None for v in xs):
        # selections of one layer's channels joined: still a selection of it
        orders = [v.order.reshape(-1) if v.order is not None else np.arange(v.shape[0]) for v in xs]
        g.values[node.output[0]] = _Value(xs[0].layer, (sum(len(o) for o in orders),) + tuple(xs[0].shape[1:]),
                                          order=np.concatenate(orders))
        return
    xs = [_plain(g, n) for n in node.input]
    if any(v.shape[1:] != xs[0].shape[1:] for v in xs):
        raise _Refused(f"it joins tensors of heights and widths {[v.shape[1:] for v in xs]}; they must be equal")
    g.add(Concat, node, tuple(v.layer for v in xs), {}, (sum(v.shape[0] for v in xs),) + tuple(xs[0].shape[1:]))


def _softmax(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"axis": -1})
    x = _plain(g, node.input[0])
    if not x.flat and len(x.shape) != 1:
        raise _Refused(f"a softmax of a {len(x.shape) + 1}-D tensor is not supported (only of (N, features))")
    if a["axis"] not in (1, -1):
        raise _Refused(f"a softmax along axis {a['axis']} is not supported (only over the features, axis 1)")
    g.add(Softmax, node, (x.layer,), {}, x.shape)
    g.values[node.output[0]].flat = True


def _flatten(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"axis": 1})
    x = _plain(g, node.input[0])
    if a["axis"] != 1:
        raise _Refused(f"axis {a['axis']} is not supported (only 1: one row per image)")
    g.values[node.output[0]] = _Value(x.layer, (int(np.prod(x.shape)),), flat=True)


def _reshape(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {"allowzero": 0})
    x = _computed(g, node.input[0])
    target_c = g.constant(node.input[1])
    if target_c is None:
        raise _Refused(f"its shape {node.input[1]!r} is computed in the graph; only shapes known at import are "
                       f"supported")
    target = [int(d) for d in np.asarray(target_c.value).reshape(-1)]
    marks = target_c.marks.reshape(-1)
    if any(marks[1:]):
        raise _Refused(f"a reshape to {target} with the batch in a dimension after the first is not supported")
    if marks[0] == oc.DERIVED:
        raise _Refused(f"a reshape to {target}, its first dimension computed from the batch, is not supported")
    first, rest = target[0], target[1:]
    features = int(np.prod(x.shape))
    if marks[0] != oc.BATCH and first == -1:
        if -1 in rest or int(np.prod(rest)) != features:
            raise _Refused(f"a reshape to {target} changes the batch; only reshapes that keep it are supported")
    elif marks[0] != oc.BATCH and first not in (0,):
        if first < 1:
            raise _Refused(f"a reshape to {target} is not supported")
        _fix_batch(g, node, first, target)
    if rest.count(-1) > 1:
        raise _Refused(f"a reshape to {target} has two dimensions to infer")
    if -1 in rest:
        known = int(np.prod([d for d in rest if d != -1]))
        if known == 0 or features % known:
            raise _Refused(f"a reshape of {features} features per image to {target} does not divide")
        rest = [features // known if d == -1 else d for d in rest]
    rest = tuple(rest)
    if int(np.prod(rest)) != features:
        raise _Refused(f"a reshape of {features} features per image to {list(target)} does not keep them")
    g.values[node.output[0]] = _reshaped(g, node.input[0], x, rest, target)


def _fix_batch(g: _Graph, node, batch: int, target: list) -> None:
    if g.fixed_batch is not None and g.fixed_batch != batch:
        raise _Refused(f"a reshape to {target} fixes the batch at {batch}, and {g.fixed_by} at {g.fixed_batch}")
    if g.fixed_batch is None:
        g.fixed_batch = batch
        g.fixed_by = f"node {node.name or node.output[0]} (Reshape to {target})"


def _reshaped(g: _Graph, name: str, x: _Value, rest: tuple, target: list) -> _Value:
    """Value `x` seen as `rest` per image: flattened, unflattened, or its channels split or joined."""
    if len(rest) == 1:
        x = _plain(g, name, x)
        return _Value(x.layer, rest, flat=True)
    full = g.out_shapes.get(x.layer) if x.flat else None
    if x.flat and full is not None and tuple(full) == rest:   # a flatten undone: the layer's own shape
        return _Value(x.layer, rest)
    if not x.flat and len(x.shape) == 3 and rest == (x.shape[0], x.shape[1] * x.shape[2]):
        raise _Refused(f"a reshape of {x.shape} per image to {target}, its pixels a sequence of tokens (a vision "
                       f"transformer's patches), is not supported: our nets hold images of channels, and what "
                       f"follows (attention, LayerNormalization, GELU) has no layer of ours")
    if not x.flat and x.act == "none" and x.pad is None and len(rest) >= 3 and rest[-2:] == tuple(x.shape[-2:]):
        order = x.order if x.order is not None else np.arange(int(np.prod(x.shape[:-2])))
        return _Value(x.layer, rest, order=order.reshape(rest[:-2]))
    raise _Refused(f"a reshape of {x.shape} per image to {target} is not supported (only a flatten to (N, features), "
                   f"or one that splits or joins the channels and keeps H and W)")


def _transpose(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"perm": None})
    x = _computed(g, node.input[0])
    perm = list(a["perm"] or reversed(range(len(x.shape) + 1)))
    n = len(x.shape) + 1
    if sorted(int(p) for p in perm) != list(range(n)):
        raise _Refused(f"perm {perm} is not an order of the {n} dimensions of its input; {DAMAGED}")
    if perm == [0, 2, 3, 1]:
        raise _Refused("a transpose to channels-last (N, H, W, C) is not supported: our nets are NCHW, and what "
                       "follows it in the models that do this (ConvNeXt's and Swin's LayerNormalization, a Linear "
                       "on each pixel) has no layer of ours")
    if x.flat or perm[0] != 0 or perm[-2:] != [n - 2, n - 1] or x.act != "none" or x.pad is not None:
        raise _Refused(f"a transpose by {perm} is not supported (only one that swaps the channel dimensions of a "
                       f"channel shuffle, keeping N, H and W in place)")
    order = x.order if x.order is not None else np.arange(int(np.prod(x.shape[:-2]))).reshape(x.shape[:-2])
    inner = [p - 1 for p in perm[1:-2]]
    g.values[node.output[0]] = _Value(x.layer, tuple(x.shape[p] for p in inner) + tuple(x.shape[-2:]),
                                      order=np.transpose(order, inner))


def _channel_slices(g: _Graph, node, x: _Value, bounds: list[tuple[int, int, int]]) -> None:
    """Each output a selection of `x`'s channels: (start, stop, step) each."""
    if x.flat or len(x.shape) != 3 or x.act != "none" or x.pad is not None:
        raise _Refused("only a slice or split along the channels of an (N, C, H, W) tensor is supported")
    order = x.order.reshape(-1) if x.order is not None else np.arange(x.shape[0])
    for out, (start, stop, step) in zip(node.output, bounds):
        if out:
            picked = order[start:stop:step]
            if len(picked) == 0:
                raise _Refused("it selects no channel")
            g.values[out] = _Value(x.layer, (len(picked),) + tuple(x.shape[1:]), order=picked)


def _slice(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    x = _computed(g, node.input[0])
    starts = [int(v) for v in _constant(g, node.input[1], "starts").reshape(-1)]
    ends = [int(v) for v in _constant(g, node.input[2], "ends").reshape(-1)]
    axes = ([int(v) for v in _constant(g, node.input[3], "axes").reshape(-1)] if len(node.input) > 3 and node.input[3]
            else list(range(len(starts))))
    steps = ([int(v) for v in _constant(g, node.input[4], "steps").reshape(-1)]
             if len(node.input) > 4 and node.input[4] else [1] * len(starts))
    if [ax % 4 for ax in axes] != [1]:
        raise _Refused(f"a slice along axes {axes} is not supported (only along the channels, axis 1)")
    c = x.shape[0]
    start, stop, step = starts[0], ends[0], steps[0]
    if step < 1:
        raise _Refused(f"a slice of step {step} is not supported")
    start = max(0, start + c if start < 0 else min(start, c))
    stop = max(0, stop + c if stop < 0 else min(stop, c))
    _channel_slices(g, node, x, [(start, stop, step)])


def _split(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"axis": 0, "split": None, "num_outputs": None})
    x = _computed(g, node.input[0])
    if a["axis"] % 4 != 1:
        raise _Refused(f"a split along axis {a['axis']} is not supported (only along the channels, axis 1)")
    c = x.shape[0]
    sizes = a["split"] or ([int(v) for v in _constant(g, node.input[1], "split").reshape(-1)]
                           if len(node.input) > 1 and node.input[1] else None)
    if sizes is None:
        n = a["num_outputs"] or len(node.output)
        part = -(-c // n)
        sizes = [part] * (n - 1) + [c - part * (n - 1)]
    sizes = [int(v) for v in sizes]
    if min(sizes, default=0) < 1 or sum(sizes) != c:
        raise _Refused(f"split sizes {sizes} do not divide its {c} channels into parts of one or more; {DAMAGED}")
    starts = np.cumsum([0] + list(sizes))
    _channel_slices(g, node, x, [(int(s), int(e), 1) for s, e in zip(starts[:-1], starts[1:])])


def _pad(g: _Graph, node, attrs: dict) -> None:
    """Zeros around H and W, kept on the value for the convolution after it (its padding)."""
    a = _take(attrs, {"mode": "constant", "pads": None, "value": 0.0})
    mode = a["mode"].decode() if isinstance(a["mode"], bytes) else a["mode"]
    pads = a["pads"] or [int(v) for v in _constant(g, node.input[1], "pads").reshape(-1)]
    value = float(a["value"])
    if len(node.input) > 2 and node.input[2]:
        value = float(_constant(g, node.input[2], "value").reshape(-1)[0])
    if len(node.input) > 3 and node.input[3]:
        raise _Refused("a Pad with axes is not supported")
    if mode != "constant" or value != 0:
        raise _Refused(f"a {mode} padding with {value:g} is not supported (only zeros)")
    pads = [int(p) for p in pads]
    if len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
        raise _Refused(f"pads {pads} are not supported (only zeros around H and W)")
    x = _computed(g, node.input[0])
    if x.flat or x.act != "none":
        x = _plain(g, node.input[0], x)
    if x.flat or len(x.shape) != 3:
        raise _Refused("only padding of an (N, C, H, W) tensor is supported")
    before = np.array(x.pad or (0, 0, 0, 0))
    pad = tuple(int(p) for p in before + np.array([pads[2], pads[3], pads[6], pads[7]]))
    g.values[node.output[0]] = replace(x, pad=pad)


def _dense_input(g: _Graph, name: str) -> _Value:
    x = _plain(g, name)
    if len(x.shape) != 1:
        raise _Refused(f"input {name!r} is an (N, C, H, W) tensor; flatten it first")
    return x


def _gemm(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    if a["transA"]:
        raise _Refused("transA is not supported")
    if not all(math.isfinite(a[k]) for k in ("alpha", "beta")):
        raise _Refused(f"alpha {a['alpha']} and beta {a['beta']} must be finite numbers; {DAMAGED}")
    x = _dense_input(g, node.input[0])
    b = _constant(g, node.input[1], "weight").astype(np.float64)
    weight = (b.T if a["transB"] else b) * a["alpha"]
    if weight.shape[0] != x.shape[0]:
        raise _Refused(f"its weight has {weight.shape[0]} rows, its input {x.shape[0]} features")
    out = weight.shape[1]
    bias = np.zeros(out)
    if len(node.input) > 2 and node.input[2]:
        c = _constant(g, node.input[2], "bias").astype(np.float64)
        if c.size not in (1, out) or c.ndim > 2:
            raise _Refused(f"its bias of shape {c.shape} does not give one value per output ({out})")
        bias = np.broadcast_to(c.reshape(-1), (out,)) * a["beta"]
    g.add(Dense, node, (x.layer,), {"weight": weight, "bias": bias}, (out,), out_features=out)


def _matmul(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    x = _dense_input(g, node.input[0])
    weight = _constant(g, node.input[1], "weight")
    if weight.ndim != 2 or weight.shape[0] != x.shape[0]:
        raise _Refused(f"its weight of shape {weight.shape} is not ({x.shape[0]}, outputs)")
    g.add(Dense, node, (x.layer,), {"weight": weight, "bias": np.zeros(weight.shape[1])}, (weight.shape[1],),
          out_features=weight.shape[1])


def _shape(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"start": 0, "end": None})
    x = _computed(g, node.input[0])
    whole = oc.shape_of(g.batch, tuple(x.shape))
    end = a["end"] if a["end"] is not None else len(whole.value)
    g.constants[node.output[0]] = oc.Constant(whole.value[a["start"]:end], whole.marks[a["start"]:end])


def _alias(g: _Graph, node) -> None:
    """Identity, and Dropout at inference: the output is the input."""
    if node.input[0] in g.constants:
        g.constants[node.output[0]] = g.constants[node.input[0]]
    else:
        g.values[node.output[0]] = _computed(g, node.input[0])


_HANDLERS = {"Conv": _conv, "BatchNormalization": _batchnorm, "Clip": _clip, "HardSigmoid": _hardsigmoid,
             "MaxPool": _maxpool, "AveragePool": _avgpool, "GlobalAveragePool": _global_avgpool,
             "ReduceMean": _reduce_mean, "Add": _add, "Mul": _mul, "Concat": _concat, "Softmax": _softmax,
             "Flatten": _flatten, "Reshape": _reshape, "Transpose": _transpose, "Slice": _slice, "Split": _split,
             "Pad": _pad, "Gemm": _gemm, "MatMul": _matmul, "Shape": _shape}


def _input_shape(onnx, model, source: str, initialized: set) -> tuple[str, tuple, int | None]:
    inputs = [i for i in model.graph.input if i.name not in initialized]
    if len(inputs) != 1:
        raise UserError(f"{source}: the model has {len(inputs)} inputs; only models of one image input are supported")
    inp = inputs[0]
    t = inp.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    if t.elem_type != onnx.TensorProto.FLOAT:
        raise UserError(f"{source}: input {inp.name!r} is not float32; only float32 models are supported")
    if len(dims) != 4 or any(d is None or d < 1 for d in dims[1:]):
        raise UserError(f"{source}: input {inp.name!r} has shape {dims}; only a fixed (N, C, H, W) image is supported")
    if dims[0] is not None and dims[0] < 1:
        raise UserError(f"{source}: input {inp.name!r} declares a batch of {dims[0]}; export the model with a batch "
                        f"of 1 or more, or a dynamic one")
    return inp.name, tuple(dims[1:]), dims[0]


def _constant_node(g: _Graph, onnx, numpy_helper, node, attrs: dict) -> None:
    value = attrs.get("value")
    if value is None:
        for key in ("value_int", "value_ints", "value_float", "value_floats"):
            if key in attrs:
                value = np.asarray(attrs[key], np.int64 if "int" in key else np.float32)
        if value is None:
            raise _Refused(f"only a tensor or number 'value' is supported, not {sorted(attrs)}")
    else:
        try:
            value = _tensor(onnx, numpy_helper, value, "its value")
        except UserError as exc:
            raise _Refused(str(exc)) from None
    g.constants[node.output[0]] = oc.Constant.plain(value)


def _tensor(onnx, numpy_helper, t, what: str) -> np.ndarray:
    """A TensorProto's array, once its dims are known to be sizes and the data it holds to be as many
    elements as they claim (numpy_helper would otherwise allocate what they claim, or fail deep inside)."""
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise UserError(f"{what} claims dims {dims}; a dimension is never negative: export the model again")
    n = math.prod(dims)
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
        field_name = onnx.helper.tensor_dtype_to_field(t.data_type)
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{what} has element type {t.data_type}, which this does not read") from None
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise UserError(f"{what} keeps its data outside the model file, and that data was not loaded")
    if dtype.kind not in "biufc" or t.data_type in _SUB_BYTE:
        raise UserError(f"{what} has element type {onnx.TensorProto.DataType.Name(t.data_type)}, which this does "
                        f"not read (numbers of a byte or more only)")
    if t.HasField("raw_data"):
        held, claimed = len(t.raw_data), n * dtype.itemsize
    else:
        held, claimed = len(getattr(t, field_name)), n * (2 if dtype.kind == "c" else 1)
    if held != claimed:
        raise UserError(f"{what} claims dims {dims} ({n:,} elements) but holds {held:,} "
                        f"{'bytes' if t.HasField('raw_data') else 'values'} where {claimed:,} are due: "
                        f"the model file is damaged or forged; export it again")
    return numpy_helper.to_array(t)


def import_model(model, name: str, source: str = "") -> tuple[Net, dict[str, np.ndarray]]:
    """An onnx.ModelProto as (net, weights); `name` names the net.  ONNX's own checks first, then one
    canonical form (nets/onnx_canonical.py), then the walk."""
    _onnx()
    source = source or name
    try:
        checked = canonical.check(model)
    except canonical.Rejected as exc:
        _refuse_rejected(model, name, source, str(exc))
    fused, _ = canonical.fuse(checked)
    return _walk(fused, name, source)


def _refuse_rejected(model, name: str, source: str, reason: str) -> None:
    """A model ONNX's checks reject is never run: ONNX's reason, and beside it our own refusal where the walk
    has one (it names the node and the value)."""
    line = f"{source}: ONNX's own checks reject the model ({reason})"
    try:
        _walk(model, name, source)
    except UserError as exc:
        ours = str(exc).removeprefix(f"{source}: ")
        line += f"; and ours: {ours}" + ("" if "export" in ours else "; export it again")
        raise UserError(line) from None
    raise UserError(f"{line}; it is not a valid graph: export it again")


def _walk(model, name: str, source: str) -> tuple[Net, dict[str, np.ndarray]]:
    onnx = _onnx()
    from onnx import numpy_helper
    graph = model.graph
    consumers: dict[str, int] = {}
    for node in graph.node:
        for n in node.input:
            consumers[n] = consumers.get(n, 0) + 1
    for out in graph.output:
        consumers[out.name] = consumers.get(out.name, 0) + 1
    g = _Graph(source, consumers)
    transformer.attach(g, _Value, _plain, _Refused)   # token sequences, attention (issue 45)
    for init in graph.initializer:
        g.constants[init.name] = oc.Constant.plain(_tensor(onnx, numpy_helper, init, f"{source}: initializer "
                                                                                     f"{init.name!r}"))
    in_name, in_shape, in_batch = _input_shape(onnx, model, source, set(g.constants))
    g.batch = in_batch or 1
    g.values[in_name] = _Value(NET_INPUT, in_shape)
    g.out_shapes[NET_INPUT] = in_shape
    for i, node in enumerate(graph.node):
        what = f"node {node.name or f'#{i}'} ({node.op_type})"
        try:
            if node.domain not in ("", "ai.onnx"):
                raise _Refused(f"operator domain {node.domain!r} is not supported")
            attrs = _attributes(onnx, node)
            inputs = [n for n in node.input if n]
            if node.op_type == "Constant":
                _constant_node(g, onnx, numpy_helper, node, attrs)
            elif node.op_type in oc.CONSTANT_OPS and inputs and all(n in g.constants for n in inputs):
                try:
                    outs = oc.evaluate(node.op_type, attrs, [g.constants.get(n) if n else None for n in node.input])
                except oc.ConstantRefused as exc:
                    raise _Refused(str(exc)) from None
                except (IndexError, TypeError) as exc:   # an index past its constant, a missing input
                    raise _Refused(f"it cannot be evaluated on its constants ({exc})") from None
                for out, c in zip(node.output, outs):
                    g.constants[out] = c
            elif transformer.claims(g, node):   # token sequences, channels-last maps, attention (issue 45)
                transformer.handle(g, node, attrs)
            elif node.op_type in ("Identity", "Dropout"):
                _alias(g, node)
            elif node.op_type in _ACTIVATIONS:
                _take(attrs, {})
                _activation(g, node, _ACTIVATIONS[node.op_type])
            elif node.op_type in _HANDLERS:
                fixed = (g.fixed_batch, g.fixed_by)
                try:
                    _HANDLERS[node.op_type](g, node, attrs)
                except _Refused:
                    # the transformer part follows every image of the file's batch: a literal batch its
                    # reshape keeps does not fix the net's
                    g.fixed_batch, g.fixed_by = fixed
                    if not transformer.retry(g, node, attrs):
                        raise
            else:
                raise _Refused(f"operator {node.op_type} is not supported (supported: {', '.join(SUPPORTED)})")
        except (_Refused, transformer.Refused) as exc:
            raise UserError(f"{source}: {what}: {exc}") from None
        except ValueError as exc:   # a spec that cannot be built: a shape we cannot run
            raise UserError(f"{source}: {what}: {str(exc).split(': ', 1)[-1]}") from None
    return _net(g, graph, name, source, in_shape)


def _net(g: _Graph, graph, name: str, source: str, in_shape: tuple) -> tuple[Net, dict[str, np.ndarray]]:
    if len(graph.output) != 1:
        raise UserError(f"{source}: the model has {len(graph.output)} outputs; only models of one output are supported")
    out_name = graph.output[0].name
    out = g.values.get(out_name)
    if out is not None and not out.plain and out.layer != NET_INPUT:
        try:
            out = _plain(g, out_name, out)
        except _Refused as exc:
            raise UserError(f"{source}: the output {out_name!r}: {exc}") from None
    if not g.layers:
        raise UserError(f"{source}: the model has no layer we can run")
    if out is None or out.layer != g.layers[-1].name:
        raise UserError(f"{source}: the output {out_name!r} is not made by the last node we run; "
                        f"only models whose last layer makes the output are supported")
    specs, previous = [], NET_INPUT
    for p in g.layers:
        # a layer that reads the one before it names nothing, so a plain chain stays a chain
        inputs = () if p.inputs == (previous,) else p.inputs
        specs.append(p.cls(p.name, p.activation, inputs=inputs, **p.kwargs))
        previous = p.name
    description = f"imported from {source}"
    if g.fixed_batch is not None:
        description += f"; {g.fixed_by} fixes its batch at {g.fixed_batch}"
    net = Net(name=re.sub(r"[^A-Za-z0-9_.-]", "-", name), input_shape=in_shape, layers=tuple(specs),
              default_batch=g.fixed_batch or 1, description=description, fixed_batch=g.fixed_batch)
    validate_weights(g.weights, net, source)
    return net, g.weights
