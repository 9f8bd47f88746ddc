"""One form for every export of a model, before the importer matches it (issue 54).

Exporters write the same network in different nodes: PyTorch at opsets
17-19 (both exporters) writes exact GELU as Div, Erf, Add, Mul, Mul, in one
order or another, and the tanh GELU as Pow (or Mul, Mul), Mul, Add, Mul, Tanh,
Add, Mul, Mul; below opset 17 (and Keras, TF exports) LayerNorm is written out
as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add.  ONNX has
`LayerNormalization` from opset 17 and `Gelu` from opset 20 only.  So:

1. ONNX's own checks, `check()`: strict shape inference with data propagation,
   then the checker on the inferred model (which has every output's shape, so
   a hand-built output declared without one is no defect).  Their reason is
   the refusal's (nets/onnx_import.py says it in one line).
2. `fuse()`: each written-out GELU becomes one `Gelu` node (approximate none or
   tanh) and each written-out LayerNorm one `LayerNormalization` (last axis),
   found by what the nodes compute, not by their order: the nodes between a
   tensor x and a candidate output are read as a polynomial in x and in the
   Erf (Tanh) of x, so 0.5 * x * (1 + erf(x / sqrt 2)) matches however the
   exporter associates the products.  Only nodes nothing else reads are
   replaced; the constants must agree with GELU's to float32's rounding.

The fused graph is ours only (the importer reads it; it is never saved): its
`Gelu` and `LayerNormalization` stand at whatever opset the file declares.
Constants the exporters leave unfolded (shape arithmetic) are evaluated by
the importer as it walks (nets/onnx_constants.py); torch's exporters fold
the rest.  onnxscript's rewriter would do step 2 too, but its LayerNorm rule
takes only opset 18's ReduceMean (axes an input) and its GELU rules emit
Microsoft's contrib op; these few rules need nothing beyond onnx.
"""
from __future__ import annotations

import math

import numpy as np

RTOL = 1e-6   # GELU's and LayerNorm's constants as float32 writes them (its eps 1.2e-7, a few roundings)
_SQRT_2_PI = math.sqrt(2 / math.pi)
# GELU, as polynomials in x and e (the Erf or Tanh of the inner polynomial): {(power of x, power of e): coeff}
_OUTER = {(1, 0): 0.5, (1, 1): 0.5}
_INNER = {"Erf": ({(1, 0): 1 / math.sqrt(2)}, "none"),
          "Tanh": ({(1, 0): _SQRT_2_PI, (3, 0): _SQRT_2_PI * 0.044715}, "tanh")}
_POLY_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Neg")
_MAX_DEPTH = 12   # a GELU's chain is at most 6 nodes deep


class Rejected(Exception):
    """ONNX's checker or shape inference rejects the model: its reason, one line."""


def check(model):
    """The model with ONNX's inferred shapes; Rejected where ONNX's strict checks fail."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        onnx.checker.check_model(inferred)
    except Exception as exc:  # noqa: BLE001 - any of ONNX's errors is its verdict on the file
        raise Rejected(_one_line(str(exc)) or type(exc).__name__) from None
    return inferred


def _one_line(text: str) -> str:
    """ONNX's message without its repeated tags and line breaks."""
    text = " ".join(text.replace("[ShapeInferenceError]", "").replace("[TypeInferenceError]", "").split())
    return text.replace("Inference error(s): ", "").strip()


class _Graph:
    """The lookups the rules need over an onnx GraphProto."""

    def __init__(self, graph):
        from onnx import numpy_helper
        self.graph = graph
        self.nodes = list(graph.node)   # the same objects throughout: the rules compare nodes by identity
        self.consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.producer, self.readers = {}, {}
        for node in self.nodes:
            for out in node.output:
                self.producer[out] = node
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
            if node.op_type == "Constant" and len(node.output) == 1:
                value = _constant_attr(node)
                if value is not None:
                    self.consts[node.output[0]] = value
            elif node.op_type == "Identity" and node.input[0] in self.consts:   # torch shares equal weights so
                self.consts[node.output[0]] = self.consts[node.input[0]]
        self.outputs = {o.name for o in graph.output}
        self.shapes = {}
        for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
            dims = vi.type.tensor_type.shape.dim
            if vi.type.tensor_type.HasField("shape"):
                self.shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)

    def scalar(self, name: str) -> float | None:
        c = self.consts.get(name)
        if c is None or c.size != 1 or c.ndim > 1 or c.dtype.kind not in "fiu":
            return None
        return float(c.reshape(-1)[0])

    def only_reader(self, name: str, node) -> bool:
        return name not in self.outputs and all(r is node for r in self.readers.get(name, []))


def _constant_attr(node) -> np.ndarray | None:
    from onnx import helper, numpy_helper
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(value)
        if a.name in ("value_float", "value_floats", "value_int", "value_ints"):
            return np.asarray(value, np.float64 if "float" in a.name else np.int64)
    return None


# -- GELU ----------------------------------------------------------------------------------------------

def _poly(g: _Graph, name: str, leaves: dict, depth: int = 0) -> dict | None:
    """Tensor `name` as a polynomial {(px, pe): coeff} in the leaves (x and e, by name); None where it is not
    one (another op, a constant that is not a scalar, too deep)."""
    if name in leaves:
        return {leaves[name]: 1.0}
    c = g.scalar(name)
    if c is not None:
        return {(0, 0): c}
    node = g.producer.get(name)
    if node is None or node.op_type not in _POLY_OPS or depth > _MAX_DEPTH or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Pow":
        base, power = _poly(g, node.input[0], leaves, depth + 1), g.scalar(node.input[1])
        if base is None or power not in (2.0, 3.0):
            return None
        out = base
        for _ in range(int(power) - 1):
            out = _times(out, base)
        return out
    args = [_poly(g, n, leaves, depth + 1) for n in node.input]
    if any(a is None for a in args):
        return None
    if node.op_type == "Neg":
        return {k: -v for k, v in args[0].items()}
    a, b = args
    if node.op_type in ("Add", "Sub"):
        sign = 1.0 if node.op_type == "Add" else -1.0
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + sign * v
        return out
    if node.op_type == "Mul":
        return _times(a, b)
    divisor = g.scalar(node.input[1])   # Div: by a constant only
    if divisor is None or divisor == 0:
        return None
    return {k: v / divisor for k, v in a.items()}


def _times(a: dict, b: dict) -> dict:
    out: dict = {}
    for (pa, ea), va in a.items():
        for (pb, eb), vb in b.items():
            key = (pa + pb, ea + eb)
            out[key] = out.get(key, 0.0) + va * vb
    return out


def _same(p: dict, want: dict) -> bool:
    keys = {k for k, v in p.items() if v != 0} | set(want)
    return all(math.isclose(p.get(k, 0.0), want.get(k, 0.0), rel_tol=RTOL, abs_tol=0.0) for k in keys)


def _candidates(g: _Graph, name: str) -> list:
    """The tensors the polynomial ops before `name` read, nearest first: the x a GELU may start from."""
    out, todo = [], [(name, 0)]
    while todo:
        n, depth = todo.pop(0)
        if g.scalar(n) is not None or any(n == o for o in out):
            continue
        out.append(n)
        node = g.producer.get(n)
        if node is not None and node.op_type in _POLY_OPS and depth < _MAX_DEPTH:
            todo.extend((i, depth + 1) for i in (node.input[:1] if node.op_type == "Pow" else node.input))
    return out[1:]


def _nodes_between(g: _Graph, name: str, stop: set) -> list | None:
    """The nodes that compute `name` from the tensors in `stop` and constants."""
    seen, todo = [], [name]
    while todo:
        n = todo.pop()
        if n in stop or g.scalar(n) is not None:
            continue
        node = g.producer.get(n)
        if node is None:
            return None
        if all(node is not s for s in seen):
            seen.append(node)
            todo.extend(node.input)
    return seen


def _gelu_at(g: _Graph, act) -> tuple | None:
    """(x, output tensor, approximate, nodes to replace) where Erf/Tanh node `act` is part of a GELU."""
    inner_want, approx = _INNER[act.op_type]
    x = next((t for t in _candidates(g, act.input[0])
              if (p := _poly(g, act.input[0], {t: (1, 0)})) is not None and _same(p, inner_want)), None)
    if x is None:
        return None
    e = act.output[0]
    frontier, seen = [e], set()
    while frontier:   # forward from e, through polynomial ops, to the tensor that is the GELU
        name = frontier.pop(0)
        for node in g.readers.get(name, []):
            if node.op_type not in _POLY_OPS or id(node) in seen or len(seen) > 8:
                continue
            seen.add(id(node))
            out = node.output[0]
            p = _poly(g, out, {x: (1, 0), e: (0, 1)})
            if p is None:
                continue
            if _same(p, _OUTER):
                inside = [n for n in _nodes_between(g, out, {x}) or []]
                if _replaceable(g, inside, out) and any(n is act for n in inside):
                    return x, out, approx, inside
                return None
            frontier.append(out)
    return None


def _replaceable(g: _Graph, nodes: list, out: str) -> bool:
    """Whether only these nodes read what they compute (but `out`)."""
    ids = {id(n) for n in nodes}
    for node in nodes:
        for t in node.output:
            if t == out:
                continue
            if t in g.outputs or any(id(r) not in ids for r in g.readers.get(t, [])):
                return False
    return True


# -- LayerNorm -----------------------------------------------------------------------------------------

def _axes(g: _Graph, node) -> list | None:
    from onnx import helper
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("keepdims", 1) != 1:
        return None
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    if len(node.input) > 1 and node.input[1] in g.consts:
        return [int(a) for a in g.consts[node.input[1]].reshape(-1)]
    return None


def _last_axis(g: _Graph, x: str, axes: list | None) -> bool:
    rank = len(g.shapes[x]) if x in g.shapes else None
    return axes is not None and len(axes) == 1 and (axes[0] == -1 or (rank is not None and axes[0] == rank - 1))


def _one_reader(g: _Graph, name: str, ops: tuple):
    readers = g.readers.get(name, [])
    if len(readers) != 1 or name in g.outputs or readers[0].op_type not in ops:
        return None
    return readers[0]


def _other(node, name: str) -> str:
    return node.input[1] if node.input[0] == name else node.input[0]


def _layernorm_at(g: _Graph, mean):
    """(x, output, eps, scale, bias, nodes) where ReduceMean node `mean` starts a written-out LayerNorm."""
    x = mean.input[0]
    if not _last_axis(g, x, _axes(g, mean)):
        return None
    sub = _one_reader(g, mean.output[0], ("Sub",))
    if sub is None or list(sub.input) != [x, mean.output[0]]:
        return None
    d = sub.output[0]
    readers = g.readers.get(d, [])
    square = [r for r in readers if (r.op_type == "Pow" and g.scalar(r.input[1]) == 2.0 and r.input[0] == d)
              or (r.op_type == "Mul" and list(r.input) == [d, d])]
    if len(readers) != 2 or len(square) != 1 or d in g.outputs:
        return None
    var = _one_reader(g, square[0].output[0], ("ReduceMean",))
    if var is None or not _last_axis(g, x, _axes(g, var)):
        return None
    add = _one_reader(g, var.output[0], ("Add",))
    eps = g.scalar(_other(add, var.output[0])) if add is not None else None
    sqrt = _one_reader(g, add.output[0], ("Sqrt",)) if eps is not None else None
    if sqrt is None or not eps >= 0:
        return None
    nodes = [mean, sub, square[0], var, add, sqrt]
    norm = next(r for r in readers if r is not square[0])
    if norm.op_type == "Div" and list(norm.input) == [d, sqrt.output[0]]:
        if _one_reader(g, sqrt.output[0], ("Div",)) is not norm:
            return None
    elif norm.op_type == "Mul":
        rec = _one_reader(g, sqrt.output[0], ("Reciprocal",))
        if rec is None or _other(norm, d) != rec.output[0] or _one_reader(g, rec.output[0], ("Mul",)) is not norm:
            return None
        nodes.append(rec)
    else:
        return None
    nodes.append(norm)
    out, scale, bias = norm.output[0], None, None
    for op in ("Mul", "Add"):
        nxt = _one_reader(g, out, (op,))
        c = g.consts.get(_other(nxt, out)) if nxt is not None else None
        if c is None or c.dtype.kind != "f" or c.ndim < 1 or int(np.prod(c.shape[:-1])) != 1:
            continue
        scale, bias = (c.reshape(-1), bias) if op == "Mul" else (scale, c.reshape(-1))
        nodes.append(nxt)
        out = nxt.output[0]
    width = (g.shapes.get(x) or (None,))[-1]
    for c in (scale, bias):
        width = c.size if c is not None and width is None else width
        if c is not None and c.size != width:
            return None
    if width is None:
        return None
    return x, out, eps, scale, bias, nodes, width


# -- the rewrite ---------------------------------------------------------------------------------------

def fuse(model):
    """A copy of `model` with each written-out GELU and LayerNorm one node: (model, {op: how many fused})."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    counts = {"Gelu": 0, "LayerNormalization": 0}
    changed = True
    while changed:   # one fusion at a time: each changes who reads what
        changed = False
        g = _Graph(graph)
        for node in g.nodes:
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in _INNER:
                found = _gelu_at(g, node)
                if found is not None:
                    x, out, approx, nodes = found
                    new = helper.make_node("Gelu", [x], [out], name=_name(g, nodes, "Gelu"), approximate=approx)
                    _replace(g, nodes, new)
                    counts["Gelu"] += 1
                    changed = True
                    break
            elif node.op_type == "ReduceMean":
                found = _layernorm_at(g, node)
                if found is not None:
                    x, out, eps, scale, bias, nodes, width = found
                    base = _name(g, nodes, "LayerNormalization")
                    inits = []
                    for what, value, default in (("scale", scale, 1.0), ("bias", bias, 0.0)):
                        arr = np.full(width, default, np.float32) if value is None else value.astype(np.float32)
                        inits.append(numpy_helper.from_array(arr, _fresh(g, f"{base}.{what}")))
                    graph.initializer.extend(inits)
                    new = helper.make_node("LayerNormalization", [x, inits[0].name, inits[1].name], [out], name=base,
                                           axis=-1, epsilon=eps)
                    _replace(g, nodes, new)
                    counts["LayerNormalization"] += 1
                    changed = True
                    break
    return model, counts


def _name(g: _Graph, nodes: list, op: str) -> str:
    last = nodes[0].name if nodes and nodes[0].name else op
    return f"{last.rsplit('/', 1)[0]}/{op}" if "/" in last else f"{last}_{op}"


def _fresh(g: _Graph, base: str) -> str:
    name, k = base, 1
    while name in g.consts or name in g.producer:
        k += 1
        name = f"{base}_{k}"
    return name


def _replace(g: _Graph, nodes: list, new) -> None:
    """`nodes` out of the graph, `new` where the one that wrote its output stood."""
    ids = {id(n) for n in nodes}
    kept = []
    for node in g.nodes:
        if id(node) in ids:
            if node.output[0] == new.output[0]:
                kept.append(new)
            continue
        kept.append(node)
    kept = [type(n).FromString(n.SerializeToString()) for n in kept]   # copies: the originals go with the field
    del g.graph.node[:]
    g.graph.node.extend(kept)
