"""Our graph as an ONNX model, for OpenCV's DNN (which reads ONNX, not our specs).

One small writer per layer kind, with the onnx package's helper API, at
opset 13.  Each layer's nodes are named after it: its last node is named
and outputs the layer's own name, the others `<layer>#<part>`, so a layer
of OpenCV's (named after its node, 'onnx_node!<node>' in the classic
engine) tells which of ours it belongs to (layer_of).  Parameters are
initialisers named `<layer>.<param>`.  The batch is fixed in the input's
shape (OpenCV's classic engine sizes every blob from it).

A kind without a writer here is Unsupported, naming it; activations are
ONNX's own operators (relu6 as Clip 0..6, hardswish as x * HardSigmoid(x),
silu as x * Sigmoid(x), the forms our ONNX importer reads back; gelu as
x/2 (1 + Erf(x / sqrt 2))), except hardsigmoid, written out as
Clip(x / 6 + 1/2, 0, 1): OpenCV fuses any Mul that reads a HardSigmoid node;
and gelu's tanh form, written as x * Sigmoid(2z): OpenCV 5's process died
on the tanh form beside a gate (our importer reads neither back; nothing
here needs it to).  ViT's layers are written by onnx_transformer_writer.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from nets import LayerKind, Net
from nets.errors import Unsupported

from ..base import layer_params
from . import onnx_transformer_writer

OPSET = 13
INPUT = "input"
PART = "#"              # <layer>#<part>: a node of a layer before its last
PREFIX = "onnx_node!"   # OpenCV's classic engine names a layer after its node so


def layer_of(cv_name: str, ours: set[str]) -> str | None:
    """Our layer that OpenCV's layer `cv_name` runs part of, or None (a layer OpenCV added)."""
    name = cv_name[len(PREFIX):] if cv_name.startswith(PREFIX) else cv_name
    if name in ours:
        return name
    base = name.rsplit(PART, 1)[0]
    return base if PART in name and base in ours else None


class _Writer:
    """The nodes and initialisers of one model, added a layer at a time."""

    def __init__(self, onnx, batch: int):
        self.onnx, self.helper = onnx, onnx.helper
        self.batch = batch   # fixed in the model's input; a constant sized by it needs no shape computed at run time
        self.nodes: list = []
        self.inits: list = []

    def const(self, name: str, value) -> str:
        from onnx import numpy_helper
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, **attrs) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def activation(self, act: str, x: str, out: str) -> str:
        """`x` through activation `act`, the result named `out`."""
        if act == "none":
            return self.node("Identity", [x], out)
        if act == "relu":
            return self.node("Relu", [x], out)
        if act == "sigmoid":
            return self.node("Sigmoid", [x], out)
        if act == "tanh":
            return self.node("Tanh", [x], out)
        if act == "relu6":
            lo = self.const(f"{out}#min", np.array(0.0, np.float32))
            hi = self.const(f"{out}#max", np.array(6.0, np.float32))
            return self.node("Clip", [x, lo, hi], out)
        if act == "hardsigmoid":
            # not ONNX's HardSigmoid: OpenCV's importer fuses any Mul that reads a HardSigmoid into a HardSwish of
            # the HardSigmoid's input, whatever the Mul's other input (a gate net lost its layers or was 6x off)
            scaled = self.node("Mul", [x, self.const(f"{out}#sixth", np.array(1.0 / 6.0, np.float32))], f"{out}#scaled")
            shifted = self.node("Add", [scaled, self.const(f"{out}#half", np.array(0.5, np.float32))], f"{out}#shifted")
            lo = self.const(f"{out}#min", np.array(0.0, np.float32))
            hi = self.const(f"{out}#max", np.array(1.0, np.float32))
            return self.node("Clip", [shifted, lo, hi], out)
        if act == "hardswish":
            gate = self.node("HardSigmoid", [x], f"{out}#gate", alpha=1.0 / 6.0, beta=0.5)
            return self.node("Mul", [x, gate], out)
        if act == "silu":
            gate = self.node("Sigmoid", [x], f"{out}#gate")
            return self.node("Mul", [x, gate], out)
        if act == "gelu":   # x/2 (1 + erf(x / sqrt 2)): the Erf form opset 13 has (GELU's own operator is 20's)
            scaled = self.node("Mul", [x, self.const(f"{out}#root_half", np.array(np.sqrt(0.5), np.float32))],
                               f"{out}#scaled")
            one_plus = self.node("Add", [self.node("Erf", [scaled], f"{out}#erf"),
                                         self.const(f"{out}#one", np.array(1.0, np.float32))], f"{out}#one_plus")
            half = self.node("Mul", [x, self.const(f"{out}#half", np.array(0.5, np.float32))], f"{out}#half_x")
            return self.node("Mul", [half, one_plus], out)
        if act == "gelu_tanh":
            # x/2 (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3): the tanh form as OpenCV 5 read
            # it (its GELU approximation) crashed its process where the result fed a per-channel gate (a Mul)
            cube = self.node("Mul", [self.node("Mul", [x, x], f"{out}#square"), x], f"{out}#cube")
            cube_k = self.node("Mul", [cube, self.const(f"{out}#k", np.array(0.044715, np.float32))], f"{out}#cube_k")
            inner = self.node("Add", [x, cube_k], f"{out}#inner")
            twice = self.node("Mul", [inner, self.const(f"{out}#c", np.array(2 * np.sqrt(2 / np.pi), np.float32))],
                              f"{out}#inner_c")
            return self.node("Mul", [x, self.node("Sigmoid", [twice], f"{out}#gate")], out)
        raise Unsupported(f"no ONNX writer for the {act} activation")


def _pads(padding: tuple) -> list[int]:
    top, left, bottom, right = padding
    return [top, left, bottom, right]   # ONNX: the starts of H and W, then their ends


def _avgpool(w: _Writer, layer, x: str, out: str, in_shape: tuple) -> None:
    """An average pool as our spec (PyTorch's rule) means it.  In ceil mode a last window that would start in
    the bottom or right padding is dropped there and not in OpenCV's ceil mode, so the pool is written without
    ceil mode, the last window's overhang (where its window is kept) as padding, and no padding counted;
    with count_include_pad the padding (not the overhang) is counted after, by a scale of each output by its
    divisor uncounted over its divisor counted (OpenCV counted no padding either way: 0.49 off before)."""
    top, left, bottom, right = layer.padding
    down, across = layer.overhang(in_shape) if layer.ceil_mode else (0, 0)
    pooled = f"{out}#pool" if layer.count_include_pad else out
    w.node("AveragePool", [x], pooled, kernel_shape=list(layer.kernel), strides=list(layer.stride),
           pads=_pads((top, left, bottom + down, right + across)), count_include_pad=0)
    if layer.count_include_pad:
        uncounted = dataclasses.replace(layer, count_include_pad=False).divisors(in_shape)
        scale = (uncounted / layer.divisors(in_shape)).astype(np.float32)
        w.node("Mul", [pooled, w.const(f"{out}.divisors", scale[None, None])], out)


def _layer(w: _Writer, layer, params: dict, ins: list[str], in_shapes: list) -> None:
    """Layer `layer`'s nodes, reading tensors `ins`; its output tensor is named after it."""
    name, kind, act = layer.name, layer.kind, layer.activation.value
    last = name if act == "none" else f"{name}#pre"
    x = ins[0]
    if kind == LayerKind.CONV:
        w.node("Conv", [x, w.const(f"{name}.weight", params["weight"]), w.const(f"{name}.bias", params["bias"])],
               last, kernel_shape=list(layer.kernel), strides=list(layer.stride), pads=_pads(layer.padding),
               dilations=list(layer.dilation), group=layer.groups)
    elif kind == LayerKind.SUBSAMPLE:
        pooled = w.node("AveragePool", [x], f"{name}#pool", kernel_shape=list(layer.kernel),
                        strides=list(layer.stride))
        scaled = w.node("Mul", [pooled, w.const(f"{name}.coeff", params["coeff"].reshape(1, -1, 1, 1))],
                        f"{name}#scale")
        w.node("Add", [scaled, w.const(f"{name}.bias", params["bias"].reshape(1, -1, 1, 1))], last)
    elif kind == LayerKind.MAXPOOL:
        w.node("MaxPool", [x], last, kernel_shape=list(layer.kernel), strides=list(layer.stride),
               pads=_pads(layer.padding))
    elif kind == LayerKind.AVGPOOL:
        _avgpool(w, layer, x, last, in_shapes[0])
    elif kind == LayerKind.DENSE:
        flat = w.node("Flatten", [x], f"{name}#flat", axis=1) if len(in_shapes[0]) != 1 else x
        w.node("Gemm", [flat, w.const(f"{name}.weight", params["weight"]), w.const(f"{name}.bias", params["bias"])],
               last)
    elif kind == LayerKind.ADD:
        total = x
        for k, other in enumerate(ins[1:], 1):
            total = w.node("Add", [total, other], last if k == len(ins) - 1 else f"{name}#sum{k}")
    elif kind == LayerKind.GLOBAL_AVGPOOL:
        w.node("GlobalAveragePool", [x], last)
    elif kind == LayerKind.CONCAT:
        w.node("Concat", ins, last, axis=1)
    elif kind == LayerKind.MUL:
        w.node("Mul", ins, last)
    elif kind == LayerKind.CHANNELS:
        w.node("Gather", [x, w.const(f"{name}.order", np.array(layer.order, np.int64))], last, axis=1)
    elif kind == LayerKind.SOFTMAX:
        flat = w.node("Flatten", [x], f"{name}#flat", axis=1) if len(in_shapes[0]) != 1 else x
        w.node("Softmax", [flat], last, axis=1)
    elif kind == LayerKind.BATCHNORM:
        stats = [w.const(f"{name}.{p}", params[p]) for p in ("scale", "bias", "mean", "var")]
        w.node("BatchNormalization", [x] + stats, last, epsilon=float(layer.eps))
    elif kind in onnx_transformer_writer.KINDS:
        onnx_transformer_writer.write(w, layer, params, x, in_shapes[0], last)
    else:
        raise Unsupported(f"layer {name} is a {kind} layer, which has no ONNX writer for OpenCV")
    if act != "none":
        w.activation(act, last, name)


def _value(helper, name: str, shape: tuple):
    from onnx import TensorProto
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _model(w: _Writer, inputs: list[tuple[str, tuple]], outputs: list[tuple[str, tuple]], title: str) -> bytes:
    h = w.helper
    graph = h.make_graph(w.nodes, title, [_value(h, n, s) for n, s in inputs], [_value(h, n, s) for n, s in outputs],
                         w.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="clblast-compare")
    model.ir_version = min(model.ir_version, 8)   # what opset 13 needs; older readers refuse newer IR versions
    return model.SerializeToString()


def _onnx():
    try:
        import onnx
    except ImportError:
        raise Unsupported("the onnx package is missing (pip install 'clblast-compare[opencv]')") from None
    return onnx


def net_model(net: Net, weights: dict[str, np.ndarray], batch: int) -> bytes:
    """The whole net as one ONNX model: input `input`, output the last layer's, at batch `batch`."""
    w = _Writer(_onnx(), batch)
    for i, layer in enumerate(net.layers):
        ins = [INPUT if s < 0 else net.layers[s].name for s in net.sources(i)]
        _layer(w, layer, layer_params(net, weights, i), ins, net.in_shapes(i))
    last = net.layers[-1].name
    return _model(w, [(INPUT, (batch,) + tuple(net.input_shape))], [(last, (batch,) + tuple(net.output_shape))],
                  net.name)


def layer_model(net: Net, weights: dict[str, np.ndarray], batch: int, index: int) -> tuple[bytes, list[str]]:
    """Layer `index` alone as an ONNX model reading one input per input it names (`input#0`, `input#1`...):
    the model and its input names."""
    w = _Writer(_onnx(), batch)
    layer = net.layers[index]
    shapes = net.in_shapes(index)
    ins = [f"{INPUT}{PART}{k}" for k in range(len(shapes))]
    _layer(w, layer, layer_params(net, weights, index), ins, shapes)
    return (_model(w, [(n, (batch,) + tuple(s)) for n, s in zip(ins, shapes)],
                   [(layer.name, (batch,) + tuple(net.out_shape(index)))], f"{net.name}:{layer.name}"), ins)
