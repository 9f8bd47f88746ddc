"""ViT's layers as ONNX nodes at opset 13 (opencv_onnx.py writes the rest), so the ONNX readers (tinygrad's
own recipe, OpenCV's DNN) can run vit-tiny.

Tokens stay a (N, C, T, 1) map as in our specs, so every Linear stays a 1x1 Conv.  Opset 13 has no
LayerNormalization (17 does, and over the trailing axes only: ours is over axis 1), so it is written out:
ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, then the scale and bias.  Attention is written for the
whole map alone (ViT's: no windows, shift, cosine or position bias; any other is Unsupported): the queries,
keys and values each sliced from the channels and split into heads by a Reshape to (N, heads, head channels,
tokens), so the keys need no transpose, and the weighted sum taken transposed (values x softmax^T), so it
comes out as (N, C, T, 1) by one Reshape.  Each node is named as opencv_onnx names them: the layer's last
node its own name, the others `<layer>#<part>`.
"""
from __future__ import annotations

import numpy as np

from nets import LayerKind
from nets.errors import Unsupported

KINDS = frozenset({LayerKind.LAYERNORM, LayerKind.TOKENS, LayerKind.ATTENTION, LayerKind.TAKE_TOKEN})


def refusal(layer) -> str | None:
    """Why layer `layer` (of KINDS) has no writer here, or None: only a whole map's attention has one."""
    if layer.kind == LayerKind.ATTENTION and (layer.window != (0, 0) or layer.grid or layer.position_bias):
        return f"layer {layer.name} (attention) attends within windows or with a position bias"
    return None


def write(w, layer, params: dict, x: str, in_shape: tuple, out: str) -> None:
    """Layer `layer` (one of KINDS) reading tensor `x` of per-image shape `in_shape`, its result `out`."""
    if layer.kind == LayerKind.LAYERNORM:
        _layernorm(w, layer, params, x, out)
    elif layer.kind == LayerKind.TOKENS:
        _tokens(w, layer, params, x, in_shape, out)
    elif layer.kind == LayerKind.ATTENTION:
        _attention(w, layer, x, in_shape, out)
    else:
        _take_token(w, layer, x, out)


def _per_channel(w, name: str, values: np.ndarray) -> str:
    return w.const(name, values.astype(np.float32).reshape(1, -1, 1, 1))


def _layernorm(w, layer, params: dict, x: str, out: str) -> None:
    n = layer.name
    mean = w.node("ReduceMean", [x], f"{n}#mean", axes=[1], keepdims=1)
    d = w.node("Sub", [x, mean], f"{n}#centred")
    var = w.node("ReduceMean", [w.node("Mul", [d, d], f"{n}#squared")], f"{n}#var", axes=[1], keepdims=1)
    eps = w.const(f"{n}.eps", np.array(layer.eps, np.float32))
    std = w.node("Sqrt", [w.node("Add", [var, eps], f"{n}#var_eps")], f"{n}#std")
    normed = w.node("Div", [d, std], f"{n}#normed")
    scaled = w.node("Mul", [normed, _per_channel(w, f"{n}.scale", params["scale"])], f"{n}#scaled")
    w.node("Add", [scaled, _per_channel(w, f"{n}.bias", params["bias"])], out)


def _tokens(w, layer, params: dict, x: str, in_shape: tuple, out: str) -> None:
    n = layer.name
    c, h, wd = in_shape
    seq = w.node("Reshape", [x, w.const(f"{n}.shape", np.array([0, c, h * wd, 1], np.int64))], f"{n}#seq")
    if layer.class_token:   # one per image, a constant: a shape computed from the input is data a JIT cannot bake
        cls = np.broadcast_to(params["cls"].astype(np.float32).reshape(1, c, 1, 1), (w.batch, c, 1, 1))
        seq = w.node("Concat", [w.const(f"{n}.cls", cls), seq], f"{n}#with_cls" if layer.position else out, axis=2)
    if layer.position:
        t = params["pos"].shape[1]
        w.node("Add", [seq, w.const(f"{n}.pos", params["pos"].astype(np.float32).reshape(1, c, t, 1))], out)
    elif not layer.class_token:
        w.node("Identity", [seq], out)


def _attention(w, layer, x: str, in_shape: tuple, out: str) -> None:
    n = layer.name
    why = refusal(layer) or (f"layer {n} (attention) uses cosine attention" if layer.cosine else None)
    if why:
        raise Unsupported(f"{why}, which has no ONNX writer (only a whole map's attention, ViT's, has one)")
    c3, h, wd = in_shape
    c = c3 // 3
    heads, t = layer.heads, h * wd
    heads_shape = w.const(f"{n}.heads", np.array([0, heads, c // heads, t], np.int64))

    def part(k: int, what: str) -> str:   # queries, keys or values: channels k C .. (k + 1) C, as (N, heads, dh, T)
        taken = w.node("Slice", [x, w.const(f"{n}.{what}_from", np.array([k * c], np.int64)),
                                 w.const(f"{n}.{what}_to", np.array([(k + 1) * c], np.int64)),
                                 w.const(f"{n}.{what}_axis", np.array([1], np.int64))], f"{n}#{what}_channels")
        return w.node("Reshape", [taken, heads_shape], f"{n}#{what}")

    q = w.node("Transpose", [part(0, "q")], f"{n}#q_rows", perm=[0, 1, 3, 2])            # (N, heads, T, dh)
    scores = w.node("MatMul", [q, part(1, "k")], f"{n}#scores")                           # (N, heads, T, T)
    scaled = w.node("Mul", [scores, w.const(f"{n}.scale", np.array(layer.head_scale(in_shape), np.float32))],
                    f"{n}#scaled")
    weights = w.node("Softmax", [scaled], f"{n}#softmax", axis=-1)
    keys_first = w.node("Transpose", [weights], f"{n}#softmax_t", perm=[0, 1, 3, 2])
    summed = w.node("MatMul", [part(2, "v"), keys_first], f"{n}#sum")                   # (N, heads, dh, T)
    w.node("Reshape", [summed, w.const(f"{n}.merge", np.array([0, c, h, wd], np.int64))], out)


def _take_token(w, layer, x: str, out: str) -> None:
    n, i = layer.name, layer.index
    bounds = [w.const(f"{n}.{what}", np.array([v], np.int64))
              for what, v in (("start", i), ("end", i + 1), ("axis", 2))]
    w.node("Slice", [x] + bounds, out)
