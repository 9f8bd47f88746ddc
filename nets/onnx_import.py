"""Bring your own model: an ONNX file as one of our nets plus the weights it holds.

Operators taken (the ones ResNet and MobileNet exporters write):
Conv (groups, pads, strides; no dilation), BatchNormalization (inference;
folded into the convolution before it by nets/batchnorm.py when the model is
loaded), Relu, Clip (0..6 as ReLU6, 0..inf as ReLU), Sigmoid, Tanh, MaxPool,
AveragePool (no padding), GlobalAveragePool, Add (of two computed tensors of
one shape; or a constant bias after a MatMul), Flatten and Reshape to
(N, features), Gemm and MatMul on a flattened tensor, and the Constant,
Identity and Dropout nodes exporters write.  An activation is folded into
the layer that makes its input when nothing else reads that input.

Anything else (another operator, dilation, ceil_mode, a broadcasting add, a
shape we cannot run) is refused with a UserError naming the node, its
operator and what we lack; never approximated.

Layouts: ONNX is NCHW like us; a Conv weight is (K, C/groups, FH, FW) as
ours, pads are (top, left, bottom, right) as ours; a Gemm's B is (in, out),
or (out, in) with transB.  Flatten of NCHW is our dense layer's C, H, W order.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nets.errors import UserError

from .spec import NET_INPUT, Add, BatchNorm, Conv, Dense, GlobalAvgPool, MaxPool, Net, Subsample
from .weights import validate_weights

SUPPORTED = ("Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Tanh", "MaxPool", "AveragePool",
             "GlobalAveragePool", "Add", "Flatten", "Reshape", "Gemm", "MatMul", "Constant", "Identity", "Dropout")
_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise UserError("importing an ONNX model needs the onnx package: pip install 'clblast-compare[onnx]'") from None
    return onnx


def load_onnx(path: str | os.PathLike) -> tuple[Net, dict[str, np.ndarray]]:
    """The model in `path` as (net named after the file, weights); batch norms not yet folded."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"ONNX model file {path} not found")
    onnx = _onnx()
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - any parsing problem is the file's, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"ONNX model file {path} cannot be read ({first}); export it again") from None
    return import_model(model, path.stem, str(path))


class _Refused(Exception):
    """What a node lacks; turned into a UserError naming the node."""


@dataclass
class _Value:
    """A tensor the graph computes: the layer that makes it, its shape per image
    (C, H, W) or (features,), and whether it is a flattened view of that layer's output."""

    layer: str
    shape: tuple
    flat: bool = False


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
    constants: dict = field(default_factory=dict)   # tensor name -> array (initializers, Constant nodes)
    values: dict = field(default_factory=dict)      # tensor name -> _Value
    layers: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)
    names: set = field(default_factory=lambda: {NET_INPUT})

    def layer(self, name: str) -> _Pending | None:
        return next((p for p in self.layers if p.name == name), None)

    def add(self, cls, node, inputs: tuple, params: dict, out_shape: tuple, **kwargs) -> None:
        base = re.sub(r"[^A-Za-z0-9_]", "_", (node.name or node.output[0]).strip("/")) or cls.__name__.lower()
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        self.layers.append(_Pending(cls, name, inputs, kwargs))
        for p, arr in params.items():
            self.weights[f"{name}.{p}"] = np.ascontiguousarray(arr, dtype=np.float32)
        self.values[node.output[0]] = _Value(name, tuple(out_shape))


def _attributes(onnx, node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _take(attrs: dict, allowed: dict) -> dict:
    """`allowed` (name -> default) filled from attrs; an attribute not allowed is refused."""
    extra = sorted(set(attrs) - set(allowed))
    if extra:
        raise _Refused(f"attribute {extra[0]} is not supported")
    return {k: attrs.get(k, default) for k, default in allowed.items()}


def _spatial(g: _Graph, name: str) -> _Value:
    v = _computed(g, name)
    if v.flat or len(v.shape) != 3:
        raise _Refused(f"input {name!r} is a {len(v.shape)}-D tensor per image; it needs an (N, C, H, W) one")
    return v


def _computed(g: _Graph, name: str) -> _Value:
    if name in g.constants:
        raise _Refused(f"input {name!r} is a constant; we run it only on computed tensors")
    if name not in g.values:
        raise _Refused(f"input {name!r} is not computed by a node before it")
    return g.values[name]


def _constant(g: _Graph, name: str, what: str) -> np.ndarray:
    if name not in g.constants:
        raise _Refused(f"its {what} {name!r} is computed in the graph; only constant {what}s are supported")
    arr = g.constants[name]
    if arr.dtype.kind not in "fiu":
        raise _Refused(f"its {what} {name!r} has dtype {arr.dtype}")
    return arr


def _window(attrs: dict, shape: tuple, kernel: tuple, strides: tuple) -> tuple:
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
    totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(shape[1:], kernel, strides)]
    small = [t // 2 for t in totals]
    large = [t - t // 2 for t in totals]
    begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
    return (begin[0], begin[1], end[0], end[1])


def _pair(values, what: str, default=(1, 1)) -> tuple:
    values = tuple(int(v) for v in (values or default))
    if len(values) != 2:
        raise _Refused(f"{what} {values} are not for a 2-D window")
    return values


def _conv(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
                      "strides": None})
    x = _spatial(g, node.input[0])
    if any(d != 1 for d in (a["dilations"] or ())):
        raise _Refused(f"dilations {tuple(a['dilations'])} are not supported (only 1)")
    weight = _constant(g, node.input[1], "weight").astype(np.float32)
    if weight.ndim != 4:
        raise _Refused(f"its weight has shape {weight.shape}; a 2-D convolution's is (K, C/group, FH, FW)")
    k, _, fh, fw = weight.shape
    kernel = _pair(a["kernel_shape"], "kernel_shape", (fh, fw))
    if kernel != (fh, fw):
        raise _Refused(f"kernel_shape {kernel} differs from its weight's {(fh, fw)}")
    bias = (_constant(g, node.input[2], "bias") if len(node.input) > 2 and node.input[2]
            else np.zeros(k, np.float32))
    strides = _pair(a["strides"], "strides")
    pad = _window(a, x.shape, kernel, strides)
    spec = Conv("probe", out_channels=k, kernel=kernel, stride=strides, pad=pad, groups=int(a["group"]))
    if weight.shape[1] * spec.groups != x.shape[0]:
        raise _Refused(f"its weight reads {weight.shape[1]} channels per group, its input has {x.shape[0]} "
                       f"in {spec.groups} group(s)")
    g.add(Conv, node, (x.layer,), {"weight": weight, "bias": bias}, spec.out_shape(x.shape),
          out_channels=k, kernel=kernel, stride=strides, pad=pad, groups=spec.groups)


def _batchnorm(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1})
    if a["training_mode"] or a["spatial"] != 1 or len([o for o in node.output if o]) > 1:
        raise _Refused("only inference batch normalisation per channel is supported (training_mode 0, one output)")
    x = _spatial(g, node.input[0])
    params = {p: _constant(g, name, p) for p, name in zip(("scale", "bias", "mean", "var"), node.input[1:5])}
    if any(v.shape != (x.shape[0],) for v in params.values()):
        raise _Refused(f"its parameters are not one per channel ({x.shape[0]})")
    g.add(BatchNorm, node, (x.layer,), params, x.shape, eps=float(a["epsilon"]))


def _activation(g: _Graph, node, act: str) -> None:
    """`act` folded into the layer that makes the input, which nothing else may read."""
    x = _computed(g, node.input[0])
    maker = g.layer(x.layer)
    if maker is None:
        raise _Refused("an activation on the net's input is not supported; our activations follow a layer")
    readers = sum(g.consumers.get(t, 0) for t, v in g.values.items() if v.layer == maker.name)
    if readers > 1:
        raise _Refused(f"the output of {maker.name} is also read elsewhere; our activations are part of "
                       f"the layer that makes them")
    if maker.activation != "none":
        raise _Refused(f"a second activation after {maker.name} ({maker.activation}); our layers carry one")
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
    try:
        spec = MaxPool("probe", kernel=kernel, stride=strides, pad=pad)
    except ValueError as exc:
        raise _Refused(str(exc).split(": ", 1)[-1]) from None
    _no_ceil(a, x.shape, kernel, strides, pad)
    g.add(MaxPool, node, (x.layer,), {}, spec.out_shape(x.shape), kernel=kernel, stride=strides, pad=pad)


def _no_ceil(a: dict, shape: tuple, kernel: tuple, strides: tuple, pad: tuple) -> None:
    """ceil_mode is refused where it changes the output size (our pools round down)."""
    if not a["ceil_mode"]:
        return
    for n, k, s, before, after in zip(shape[1:], kernel, strides, pad[:2], pad[2:]):
        if (n + before + after - k) % s:
            raise _Refused("ceil_mode 1 makes a larger output here; only ceil_mode 0 is supported")


def _avgpool(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0, "dilations": None,
                      "kernel_shape": None, "pads": None, "strides": None})
    x = _spatial(g, node.input[0])
    kernel, strides = _pair(a["kernel_shape"], "kernel_shape"), _pair(a["strides"], "strides")
    if any(d != 1 for d in (a["dilations"] or ())):
        raise _Refused(f"dilations {tuple(a['dilations'])} are not supported (only 1)")
    if any(_window(a, x.shape, kernel, strides)):
        raise _Refused("padding is not supported on an average pool")
    _no_ceil(a, x.shape, kernel, strides, (0, 0, 0, 0))
    c = x.shape[0]
    spec = Subsample("probe", kernel=kernel, stride=strides)
    g.add(Subsample, node, (x.layer,), {"coeff": np.ones(c, np.float32), "bias": np.zeros(c, np.float32)},
          spec.out_shape(x.shape), kernel=kernel, stride=strides)


def _global_avgpool(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    x = _spatial(g, node.input[0])
    g.add(GlobalAvgPool, node, (x.layer,), {}, (x.shape[0], 1, 1))


def _add(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {})
    constant = [n for n in node.input if n in g.constants]
    if len(constant) == 1:   # a MatMul's bias
        _bias_after_matmul(g, node, constant[0])
        return
    xs = [_computed(g, n) for n in node.input]
    if any(v.shape != xs[0].shape or v.flat != xs[0].flat for v in xs):
        raise _Refused(f"it adds tensors of shapes {[v.shape for v in xs]}; only an add of equal shapes "
                       f"(no broadcasting) is supported")
    if len({v.layer for v in xs}) != len(xs):
        raise _Refused("it adds a tensor to itself; only an add of different layers is supported")
    g.add(Add, node, tuple(v.layer for v in xs), {}, xs[0].shape)
    g.values[node.output[0]].flat = xs[0].flat


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


def _flatten(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"axis": 1})
    x = _computed(g, node.input[0])
    if a["axis"] != 1:
        raise _Refused(f"axis {a['axis']} is not supported (only 1: one row per image)")
    g.values[node.output[0]] = _Value(x.layer, (int(np.prod(x.shape)),), flat=True)


def _reshape(g: _Graph, node, attrs: dict) -> None:
    _take(attrs, {"allowzero": 0})
    x = _computed(g, node.input[0])
    target = [int(d) for d in _constant(g, node.input[1], "shape").reshape(-1)]
    features = int(np.prod(x.shape))
    flattens = len(target) == 2 and ((target[1] == features and target[0] in (-1, 0, 1))
                                     or (target[1] == -1 and target[0] in (0, 1)))
    if not flattens:
        raise _Refused(f"a reshape to {target} is not supported (only to (N, {features}), a flatten)")
    g.values[node.output[0]] = _Value(x.layer, (features,), flat=True)


def _dense_input(g: _Graph, name: str) -> _Value:
    x = _computed(g, name)
    if len(x.shape) != 1:
        raise _Refused(f"input {name!r} is an (N, C, H, W) tensor; flatten it first")
    return x


def _gemm(g: _Graph, node, attrs: dict) -> None:
    a = _take(attrs, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    if a["transA"]:
        raise _Refused("transA is not supported")
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


def _alias(g: _Graph, node) -> None:
    """Identity, and Dropout at inference: the output is the input."""
    if node.input[0] in g.constants:
        g.constants[node.output[0]] = g.constants[node.input[0]]
    else:
        g.values[node.output[0]] = _computed(g, node.input[0])


_HANDLERS = {"Conv": _conv, "BatchNormalization": _batchnorm, "Clip": _clip, "MaxPool": _maxpool,
             "AveragePool": _avgpool, "GlobalAveragePool": _global_avgpool, "Add": _add, "Flatten": _flatten,
             "Reshape": _reshape, "Gemm": _gemm, "MatMul": _matmul}


def _input_shape(onnx, model, source: str, initialized: set) -> tuple[str, tuple]:
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
    return inp.name, tuple(dims[1:])


def import_model(model, name: str, source: str = "") -> tuple[Net, dict[str, np.ndarray]]:
    """An onnx.ModelProto as (net, weights); `name` names the net."""
    onnx = _onnx()
    from onnx import numpy_helper
    source = source or name
    graph = model.graph
    consumers: dict[str, int] = {}
    for node in graph.node:
        for n in node.input:
            consumers[n] = consumers.get(n, 0) + 1
    for out in graph.output:
        consumers[out.name] = consumers.get(out.name, 0) + 1
    g = _Graph(source, consumers)
    for init in graph.initializer:
        g.constants[init.name] = numpy_helper.to_array(init)
    in_name, in_shape = _input_shape(onnx, model, source, set(g.constants))
    g.values[in_name] = _Value(NET_INPUT, in_shape)
    for i, node in enumerate(graph.node):
        what = f"node {node.name or f'#{i}'} ({node.op_type})"
        try:
            if node.domain not in ("", "ai.onnx"):
                raise _Refused(f"operator domain {node.domain!r} is not supported")
            attrs = _attributes(onnx, node)
            if node.op_type == "Constant":
                value = attrs.get("value")
                if value is None:
                    raise _Refused(f"only a tensor 'value' is supported, not {sorted(attrs)}")
                g.constants[node.output[0]] = numpy_helper.to_array(value)
            elif node.op_type in ("Identity", "Dropout"):
                _alias(g, node)
            elif node.op_type in _ACTIVATIONS:
                _take(attrs, {})
                _activation(g, node, _ACTIVATIONS[node.op_type])
            elif node.op_type in _HANDLERS:
                _HANDLERS[node.op_type](g, node, attrs)
            else:
                raise _Refused(f"operator {node.op_type} is not supported (supported: {', '.join(SUPPORTED)})")
        except _Refused as exc:
            raise UserError(f"{source}: {what}: {exc}") from None
        except ValueError as exc:   # a spec that cannot be built: a shape we cannot run
            raise UserError(f"{source}: {what}: {str(exc).split(': ', 1)[-1]}") from None
    return _net(g, graph, name, source, in_shape)


def _net(g: _Graph, graph, name: str, source: str, in_shape: tuple) -> tuple[Net, dict[str, np.ndarray]]:
    if len(graph.output) != 1:
        raise UserError(f"{source}: the model has {len(graph.output)} outputs; only models of one output are supported")
    if not g.layers:
        raise UserError(f"{source}: the model has no layer we can run")
    out = g.values.get(graph.output[0].name)
    if out is None or out.layer != g.layers[-1].name:
        raise UserError(f"{source}: the output {graph.output[0].name!r} is not made by the last node we run; "
                        f"only models whose last layer makes the output are supported")
    specs, previous = [], NET_INPUT
    for p in g.layers:
        # a layer that reads the one before it names nothing, so a plain chain stays a chain
        inputs = () if p.inputs == (previous,) else p.inputs
        specs.append(p.cls(p.name, p.activation, inputs=inputs, **p.kwargs))
        previous = p.name
    net = Net(name=re.sub(r"[^A-Za-z0-9_.-]", "-", name), input_shape=in_shape, layers=tuple(specs),
              default_batch=1, description=f"imported from {source}")
    validate_weights(g.weights, net, source)
    return net, g.weights
