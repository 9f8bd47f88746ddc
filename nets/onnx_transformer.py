"""The ONNX importer's transformer part (issue 45): what torchvision's vit_b_16,
swin_t, convnext_tiny and maxvit_t write beyond the CNNs' operators.

Those graphs move data about far more than they compute: channels-last
transposes, token sequences, windows cut by Reshape and Transpose, Swin's roll
as Slice and Concat, heads split and merged.  So a tensor here is followed by
where its elements come from: a View is one of our layers' outputs seen
through an index array of the tensor's shape, each element the flat
(image, C, H, W) index of the layer's element it holds, over every image of
the batch the file's input declares (1 where it is dynamic): so a fixed batch
written into Reshape and Gather arrays is followed like any other axis, and
what computes is checked to read each image's own elements alike.  Every data move
(Transpose, Reshape, Slice, Gather, Squeeze, Unsqueeze, Split, Concat of one
layer's views, a Pad of nothing) is done on the indices; what computes is
recognised from them:
- a MatMul or Gemm by a constant over a last axis that runs through one
  pixel's channels in order (a Linear on channels-last tokens): a 1x1
  convolution, its bias Add folded in;
- LayerNormalization over such an axis: a LayerNorm layer; Gelu: the gelu
  activation of the layer that makes its input;
- the class token's Concat and the position embedding's Add: a Tokens layer;
  one token taken (ViT's x[:, 0]): TakeToken;
- Swin's patch merging (four strided slices concatenated): SpaceToDepth;
- attention: a MatMul of two views of one layer (the queries and the keys)
  starts a score tensor, followed by cell; scalar products, added constants
  (the relative position bias, Swin's -100 mask), reshapes and the Softmax
  are recorded on it, and the MatMul by the values ends it.  Which of our
  Attention layers does that (heads, windows, grid, shift) is found by
  trying each that fits the shapes against where every query, key and value
  came from; the added constants must be one bias per head and window
  position plus a mask of at most -50 where our layer's shift leaves a key
  out (Swin adds -100: its weight exp(-100) is below float32's resolution).
  Swin v2's cosine attention: a ReduceL2 over the last axis of the queries
  (keys), clipped below and expanded, divides them (a unit View); a MatMul
  of unit queries by unit keys starts cosine scores, whose product by a
  constant per head (exp of the clipped logit scale, evaluated at import)
  becomes the layer's cosine_scale; the position bias Swin v2 makes with a
  small MLP over a constant table is a constant too, evaluated at import.
A tensor whose indices come back to the layer's own NCHW order (ConvNeXt's
transpose back) is handed back to the importer's plain values.  The shape
arithmetic these graphs trace (Sqrt, Range, Where, ScatterND... on shapes and
on the bias and mask tables) is evaluated at import with onnx's reference
implementation at the file's batch.  Anything else is refused in one line.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from . import onnx_constants as oc
from .spec import COSINE_EPS, Add, Attention, Channels, Conv, LayerNorm, SpaceToDepth, TakeToken, Tokens

# ops this module takes on plain values too (the importer has no handler for them)
OWN_OPS = ("LayerNormalization", "Gelu")
MASKED = -50.0   # an added constant at most this leaves the key out (Swin's mask adds -100)
MAX_NORM_EPS = 1e-10   # a normalisation's least norm we take as ours (COSINE_EPS): it moves only vectors of about 0


class Refused(Exception):
    """What a node lacks; the importer turns it into a UserError naming the node."""


def attach(g, value_cls, plain, refused_cls) -> None:
    """Graph `g` of the importer (nets/onnx_import.py), which hands in its plain values' class, its function
    that makes a value whole (a layer's output) and its refusal: so this module never imports it back."""
    g.views = {}
    g.value_cls, g.plain, g.refused_cls = value_cls, plain, refused_cls


@dataclass
class View:
    """An ONNX tensor as layer `layer`'s output rearranged: idx (the tensor's shape, the file's batch)
    holds flat (image, C, H, W) indices into it; `factor` a scalar the tensor is multiplied by; `unit`, where
    the tensor was L2-normalised along its last axis then (cosine attention's queries or keys), the
    set of those rows (their indices sorted, as bytes), which only the scores' MatMul may read."""

    layer: str
    idx: np.ndarray
    factor: float = 1.0
    unit: frozenset | None = None


@dataclass
class Norm:
    """The L2 norm of view `of` along its last axis (kept as an axis of 1), at least `eps`; `shape`
    the tensor's shape (the view's, once expanded)."""

    of: View
    eps: float
    shape: tuple


@dataclass
class Scores:
    """Attention's scores q.k of layer `layer`'s queries q (G, n, dh) and keys k (G, m, dh) (flat
    indices), a cell (g, i, j) numbered (g * n + i) * m + j; `cells` the tensor's shape of cell
    numbers; `added` each cell's added constant; `scale` the scores' factor, and `cell_scale` each
    cell's further factor (None: 1; Swin v2's scale per head); `cosine`: of unit queries and keys;
    softmaxed when done."""

    layer: str
    q: np.ndarray
    k: np.ndarray
    cells: np.ndarray
    scale: float
    added: np.ndarray
    softmaxed: bool = False
    cosine: bool = False
    cell_scale: np.ndarray | None = None


def _state(g) -> dict:
    """The views and score tensors of graph `g`, by ONNX tensor name (attach() made it)."""
    return g.views


def claims(g, node) -> bool:
    """Whether this module takes `node`: it reads a view or a score tensor, is an operator of its
    own, or computes a constant the importer's shape arithmetic does not evaluate."""
    views = _state(g)
    inputs = [n for n in node.input if n]
    if any(n in views for n in inputs):
        return True
    if node.op_type in OWN_OPS:
        return True
    return bool(inputs) and all(n in g.constants for n in inputs) and node.op_type not in oc.CONSTANT_OPS \
        and node.op_type not in ("Identity", "Dropout")


def retry(g, node, attrs: dict) -> bool:
    """After the importer's own handler refused `node` (a reshape of pixels into tokens, a transpose
    to channels-last, a product by a constant): take it here if we can; False: the refusal stands."""
    if node.op_type not in _MOVES and node.op_type not in ("Mul", "Add", "MatMul", "Gemm", "Div"):
        return False
    try:
        handle(g, node, attrs)
    except (Refused, g.refused_cls):
        return False
    return True


def handle(g, node, attrs: dict) -> None:
    views = _state(g)
    inputs = [n for n in node.input if n]
    if inputs and all(n in g.constants for n in inputs) and not any(n in views for n in inputs):
        _evaluate(g, node, attrs)
        return
    op = node.op_type
    if op in _MOVES:
        try:
            _MOVES[op](g, node, attrs)
        except (IndexError, ValueError) as exc:   # numpy's bounds and shapes: a move the tensor does not allow
            raise Refused(f"its {op} does not fit its input, a {_describe(g, inputs[0])} ({exc}); the model file "
                          f"is damaged or was edited: export it again") from None
        _absorbed(g, node.input[0])
    elif op in _COMPUTES:
        _COMPUTES[op](g, node, attrs)
    else:
        raise Refused(f"operator {op} on a {_describe(g, inputs[0])} is not supported "
                          f"(on token sequences and channels-last maps: {', '.join(sorted(_MOVES) + sorted(_COMPUTES))})")


# -- constants ---------------------------------------------------------------------------------------------

def _evaluate(g, node, attrs: dict) -> None:
    """A node on constants only, evaluated by onnx's reference implementation (batch 1)."""
    import onnx
    from onnx.reference import ReferenceEvaluator
    inputs = [g.constants[n] for n in node.input if n]
    feeds = {f"i{k}": np.asarray(c.value) for k, c in enumerate(inputs)}
    names = iter(feeds)
    ins = [next(names) if n else "" for n in node.input]
    outs = [f"o{k}" for k in range(len(node.output))]
    one = onnx.helper.make_node(node.op_type, ins, outs, **{a.name: onnx.helper.get_attribute_value(a)
                                                            for a in node.attribute})
    graph = onnx.helper.make_graph([one], "c", [onnx.helper.make_tensor_value_info(k, onnx.TensorProto.UNDEFINED, None)
                                                for k in feeds],
                                   [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                                    for o in outs])
    try:
        results = ReferenceEvaluator(onnx.helper.make_model(graph)).run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - any failure is the node's, said in one line
        raise Refused(f"it computes a constant we cannot evaluate ({type(exc).__name__}: {exc})") from None
    for out, value in zip(node.output, results):
        g.constants[out] = oc.Constant.plain(np.asarray(value))


def _const(g, name: str, what: str) -> np.ndarray:
    c = g.constants.get(name)
    if c is None:
        raise Refused(f"its {what} {name!r} is computed in the graph; only a constant {what} is supported")
    return np.asarray(c.value)


def _ints(g, name: str, what: str) -> list[int]:
    return [int(v) for v in _const(g, name, what).reshape(-1)]


# -- views -------------------------------------------------------------------------------------------------

def _layer_shape(g, layer: str) -> tuple:
    return tuple(g.out_shapes[layer])


def _view(g, name: str) -> View:
    """Tensor `name` as a view: a view already, or a plain value of the importer's (made whole first)."""
    views = _state(g)
    if name in views:
        v = views[name]
        if isinstance(v, Scores):
            raise Refused(f"input {name!r} is attention scores, which only a Softmax and a MatMul by the values "
                              f"may read")
        if isinstance(v, Norm):
            raise Refused(f"input {name!r} is the L2 norm of a tensor, which only a Clip, an Expand and the "
                          f"division of that tensor may read (cosine attention's normalisation)")
        return v
    v = g.plain(g, name)
    full = _layer_shape(g, v.layer)
    size = int(np.prod(full))
    shape = (g.batch,) + (tuple(v.shape) if not v.flat else (size,))
    if int(np.prod(shape)) != g.batch * size:
        raise Refused(f"input {name!r} is a part of its layer's output; only whole outputs are supported here")
    return View(v.layer, np.arange(g.batch * size, dtype=np.int64).reshape(shape))


def _describe(g, name: str) -> str:
    v = _state(g).get(name)
    if isinstance(v, Scores):
        return "attention score tensor"
    if isinstance(v, Norm):
        return "norm"
    if isinstance(v, View) and v.unit is not None:
        return f"L2-normalised tensor of shape {tuple(v.idx.shape)}"
    if isinstance(v, View):
        return f"tensor of shape {tuple(v.idx.shape)}"
    return "tensor"


def _put(g, name: str, v: View) -> None:
    """Store `v` as tensor `name`: as the importer's plain value where it is its layer's own NCHW
    output (or a (C, 1, 1) layer's (N, C) flattening), else as a view."""
    views = _state(g)
    full = _layer_shape(g, v.layer)
    size, batch = int(np.prod(full)), g.batch
    if v.factor == 1.0 and v.unit is None and v.idx.size == batch * size \
            and np.array_equal(v.idx.reshape(-1), np.arange(batch * size)):
        if v.idx.shape == (batch,) + full:
            views.pop(name, None)
            g.values[name] = g.value_cls(v.layer, full)
            return
        if v.idx.shape == (batch, size) and (len(full) == 1 or full[1:] == (1, 1)):
            views.pop(name, None)
            g.values[name] = g.value_cls(v.layer, (size,), flat=True)
            return
    g.values.pop(name, None)
    views[name] = v


def _channels_last(g, v: View) -> np.ndarray | None:
    """The token of each row of `v`'s last axis (image * H * W + pixel) where every row runs through one
    pixel's channels in order (a Linear's or a LayerNorm's input, channels-last); else None."""
    c, h, w = _layer_shape(g, v.layer)
    hw = h * w
    if v.idx.shape[-1] != c:
        return None
    rows = v.idx.reshape(-1, c)
    first = rows[:, 0]
    pix = first % (c * hw)
    if pix.max() >= hw or not np.array_equal(rows, first[:, None] + np.arange(c) * hw):
        return None
    return first // (c * hw) * hw + pix


def _mixes_images(g, v: View) -> bool:
    """Whether a row of `v`'s last axis holds elements of more than one image of the batch."""
    size = int(np.prod(_layer_shape(g, v.layer)))
    image = v.idx.reshape(-1, v.idx.shape[-1]) // size
    return bool((image != image[:, :1]).any())


MIXES = ("a reshape before it mixes the images of the batch (one row holds elements of several images), which "
         "no per-image layer computes: export with a dynamic batch (dynamic_axes) or at batch 1")


def _tokens_input(g, name: str) -> tuple[View, np.ndarray]:
    """`name` as a channels-last view and the pixel of each row; a view that is Swin's patch merging
    (strided slices side by side) becomes a SpaceToDepth layer first."""
    v = _view(g, name)
    pix = _channels_last(g, v)
    if pix is None:
        v = _space_to_depth(g, name, v)
        pix = _channels_last(g, v)
    if pix is None and _mixes_images(g, v):
        raise Refused(f"its input {name!r} of shape {tuple(v.idx.shape)}: {MIXES}")
    if pix is None:
        raise Refused(f"its input {name!r} of shape {tuple(v.idx.shape)} does not run through each token's "
                          f"channels along its last axis (a Linear or a LayerNorm over channels-last tokens)")
    if v.factor != 1.0:
        raise Refused(f"its input {name!r} is scaled by {v.factor:g}, which is not supported here")
    _not_unit(g, name, v)
    return v, pix


def _not_unit(g, name: str, v: View) -> None:
    if v.unit is not None:
        raise Refused(f"its input {name!r} is L2-normalised (cosine attention's queries or keys), which only "
                      f"the product of queries by keys may read")


def _space_to_depth(g, name: str, v: View) -> View:
    """`v` as a channels-last view of a new SpaceToDepth layer, where it is one (else `v` unchanged)."""
    c, h, w = _layer_shape(g, v.layer)
    if v.idx.ndim != 4 or v.factor != 1.0 or v.unit is not None or v.idx.shape[0] != g.batch:
        return v
    _, oh, ow, cc = v.idx.shape
    if oh == 0 or ow == 0 or h % oh or w % ow or cc != c * (h // oh) * (w // ow):
        return v
    bh, bw = h // oh, w // ow
    first = v.idx[0, 0, 0, ::c]                       # the block offset of each group of c channels
    order = tuple((int(p // w), int(p % w)) for p in first)
    try:
        spec = SpaceToDepth("probe", block=(bh, bw), order=order)
    except ValueError:
        return v
    base = np.arange(g.batch * c * h * w).reshape(g.batch, c, h, w)
    want = np.concatenate([base[:, :, dy::bh, dx::bw] for dy, dx in order], axis=1).transpose(0, 2, 3, 1)
    if not np.array_equal(want, v.idx):
        return v
    out = spec.out_shape((c, h, w))
    layer = g.new_layer(SpaceToDepth, f"{name}_space_to_depth", (v.layer,), {}, out, block=(bh, bw), order=order)
    return View(layer, np.arange(g.batch * int(np.prod(out))).reshape((g.batch,) + out).transpose(0, 2, 3, 1))


def _same_kind(v: View, idx: np.ndarray, factor: float | None = None) -> View:
    return View(v.layer, idx, v.factor if factor is None else factor, v.unit)


def _transpose(g, node, attrs):
    v = _view(g, node.input[0])
    perm = attrs.get("perm") or list(reversed(range(v.idx.ndim)))
    if sorted(int(p) for p in perm) != list(range(v.idx.ndim)):
        raise Refused(f"perm {list(perm)} is not an order of the {v.idx.ndim} dimensions of its input; the model file "
                      f"is damaged or was edited: export it again")
    scores = _state(g).get(node.input[0])
    if isinstance(scores, Scores):
        _put_scores(g, node.output[0], scores, np.transpose(scores.cells, perm))
        return
    _put(g, node.output[0], _same_kind(v, np.transpose(v.idx, perm)))


def _target_shape(g, name: str, shape: tuple, allowzero: int) -> tuple:
    target = _ints(g, name, "shape")
    out = [shape[i] if (d == 0 and not allowzero) else d for i, d in enumerate(target)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(shape)) // max(known, 1)
    if int(np.prod(out)) != int(np.prod(shape)) or min(out, default=1) < 0:
        raise Refused(f"a reshape of {tuple(shape)} to {target} does not keep its elements (at the batch of "
                      f"{g.batch} the file's input declares, 1 where it is dynamic)")
    return tuple(out)


def _reshape(g, node, attrs):
    x = _state(g).get(node.input[0])
    if isinstance(x, Scores):
        _put_scores(g, node.output[0], x, x.cells.reshape(_target_shape(g, node.input[1], x.cells.shape,
                                                                         attrs.get("allowzero", 0))))
        return
    v = _view(g, node.input[0])
    _put(g, node.output[0], _same_kind(v, v.idx.reshape(_target_shape(g, node.input[1], v.idx.shape,
                                                                       attrs.get("allowzero", 0)))))


def _flatten(g, node, attrs):
    v = _view(g, node.input[0])
    axis = int(attrs.get("axis", 1)) % max(v.idx.ndim, 1)
    _put(g, node.output[0], _same_kind(v, v.idx.reshape(int(np.prod(v.idx.shape[:axis])), -1)))


def _squeeze_unsqueeze(g, node, attrs):
    v = _view(g, node.input[0])
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = _ints(g, node.input[1], "axes")
    idx = v.idx
    if node.op_type == "Unsqueeze":
        for a in sorted(int(a) % (idx.ndim + len(axes)) for a in axes):
            idx = np.expand_dims(idx, a)
    else:
        idx = np.squeeze(idx, axis=tuple(int(a) % idx.ndim for a in axes) if axes else None)
    _put(g, node.output[0], _same_kind(v, idx))


def _slice(g, node, attrs):
    v = _view(g, node.input[0])
    starts, ends = _ints(g, node.input[1], "starts"), _ints(g, node.input[2], "ends")
    axes = _ints(g, node.input[3], "axes") if len(node.input) > 3 and node.input[3] else list(range(len(starts)))
    steps = _ints(g, node.input[4], "steps") if len(node.input) > 4 and node.input[4] else [1] * len(starts)
    index = [slice(None)] * v.idx.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        index[a % v.idx.ndim] = slice(s, e, st)
    idx = v.idx[tuple(index)]
    if idx.size == 0:
        raise Refused("it selects nothing")
    _put(g, node.output[0], _same_kind(v, idx))


def _gather(g, node, attrs):
    v = _view(g, node.input[0])
    axis = int(attrs.get("axis", 0)) % v.idx.ndim
    index = _const(g, node.input[1], "index").astype(np.int64)
    n = v.idx.shape[axis]
    if index.size and (index.min() < -n or index.max() >= n):
        raise Refused(f"it takes indices {index.min()}..{index.max()} of an axis of {n} (axis {axis} of a "
                      f"{_describe(g, node.input[0])}); the model file is damaged or was edited: export it again")
    idx = np.take(v.idx, index, axis=axis)
    c, t, w = _layer_shape(g, v.layer)
    images = (np.arange(g.batch) * c * t * w)[:, None]
    if idx.ndim == 2 and idx.shape == (g.batch, c) and w == 1 and v.factor == 1.0 and 0 <= idx[0, 0] < t \
            and np.array_equal(idx, images + idx[0, 0] + np.arange(c) * t):   # one token a sequence: ViT's x[:, 0]
        token = int(idx[0, 0])
        layer = g.new_layer(TakeToken, f"{node.output[0]}_token", (v.layer,), {}, (c, 1, 1), index=token)
        _put(g, node.output[0], View(layer, np.arange(g.batch * c).reshape(g.batch, c)))
        return
    _put(g, node.output[0], _same_kind(v, idx))


def _split(g, node, attrs):
    v = _view(g, node.input[0])
    axis = int(attrs.get("axis", 0)) % v.idx.ndim
    if len(node.input) > 1 and node.input[1]:
        sizes = _ints(g, node.input[1], "split")
    else:
        parts = len(node.output)
        sizes = [v.idx.shape[axis] // parts] * parts
    if min(sizes, default=0) < 0 or sum(sizes) != v.idx.shape[axis] or len(sizes) != len(node.output):
        raise Refused(f"split sizes {sizes} do not divide the {v.idx.shape[axis]} elements of axis {axis} into its "
                      f"{len(node.output)} outputs; the model file is damaged or was edited: export it again")
    bounds = np.cumsum([0] + sizes)
    for out, a, b in zip(node.output, bounds[:-1], bounds[1:]):
        if out:
            _put(g, out, _same_kind(v, np.take(v.idx, np.arange(a, b), axis=axis)))


def _concat(g, node, attrs):
    axis = int(attrs.get("axis", 0))
    consts = [n for n in node.input if n in g.constants]
    if consts:
        _class_token(g, node, axis)
        return
    vs = [_view(g, n) for n in node.input]
    for n, v in zip(node.input, vs):
        _not_unit(g, n, v)
    if len({v.layer for v in vs}) != 1 or len({v.factor for v in vs}) != 1:
        raise Refused("it joins tensors of different layers along a token or pixel axis, which is not supported")
    _put(g, node.output[0], _same_kind(vs[0], np.concatenate([v.idx for v in vs], axis=axis)))


def _class_token(g, node, axis: int) -> None:
    """Concat(class token, tokens) along the tokens: a Tokens layer with a class token."""
    if len(node.input) != 2 or node.input[0] not in g.constants:
        raise Refused("a concatenation with a constant is supported only as a class token before the tokens")
    cls = _const(g, node.input[0], "class token").astype(np.float32)
    v, pix = _tokens_input(g, node.input[1])
    c, h, w = _layer_shape(g, v.layer)
    # a fixed batch expands the class token to every image: the same row each
    same = cls.ndim == 3 and cls.shape[0] in (1, g.batch) and cls.shape[1:] == (1, c) and (cls == cls[:1]).all()
    if v.idx.ndim != 3 or axis % 3 != 1 or not same or not np.array_equal(pix, np.arange(g.batch * h * w)):
        raise Refused(f"a concatenation of a constant {cls.shape} and tokens of shape {tuple(v.idx.shape)} is "
                          f"not a class token before every pixel in order, which is all we support")
    layer = g.new_layer(Tokens, node.output[0], (v.layer,), {"cls": cls[0].reshape(c)}, (c, h * w + 1, 1),
                        class_token=True, position=False)
    _put(g, node.output[0], View(layer, _token_idx(c, h * w + 1, g.batch)))


def _token_idx(c: int, t: int, batch: int = 1) -> np.ndarray:
    """A (C, T, 1) layer's output as (batch, T, C) channels-last tokens."""
    return np.arange(batch * c * t).reshape(batch, c, t).transpose(0, 2, 1)


def _pad(g, node, attrs):
    v = _view(g, node.input[0])
    pads = _ints(g, node.input[1], "pads") if len(node.input) > 1 and node.input[1] else list(attrs.get("pads", []))
    if any(pads):
        raise Refused(f"a padding {pads} of a token or channels-last tensor is not supported (Swin's window "
                          f"padding: export at a size the windows tile)")
    _put(g, node.output[0], v)


def _identity(g, node, attrs):
    x = _state(g)[node.input[0]]
    _state(g)[node.output[0]] = x


def _shape(g, node, attrs):
    x = _state(g)[node.input[0]]
    shape = np.array(x.shape if isinstance(x, Norm) else (x.cells if isinstance(x, Scores) else x.idx).shape, np.int64)
    start, end = attrs.get("start", 0), attrs.get("end", None)
    g.constants[node.output[0]] = oc.Constant.plain(shape[start:end])


_MOVES = {"Transpose": _transpose, "Reshape": _reshape, "Flatten": _flatten, "Squeeze": _squeeze_unsqueeze,
          "Unsqueeze": _squeeze_unsqueeze, "Slice": _slice, "Gather": _gather, "Split": _split, "Concat": _concat,
          "Pad": _pad, "Identity": _identity, "Dropout": _identity, "Shape": _shape}


# -- computing ---------------------------------------------------------------------------------------------

def _readers(g, layer: str) -> int:
    """How many nodes read `layer`'s output, through the importer's values and our views."""
    n = sum(g.consumers.get(t, 0) for t, v in g.values.items() if v.layer == layer)
    return n + sum(g.consumers.get(t, 0) for t, v in _state(g).items() if isinstance(v, View) and v.layer == layer)


def _linear(g, node, x_name: str, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """x @ weight (+ bias) over channels-last tokens: a 1x1 convolution."""
    v, pix = _tokens_input(g, x_name)
    c, h, w = _layer_shape(g, v.layer)
    if weight.ndim != 2 or weight.shape[0] != c:
        raise Refused(f"its weight of shape {weight.shape} is not ({c}, outputs)")
    k = weight.shape[1]
    b = np.zeros(k) if bias is None else np.broadcast_to(bias.reshape(-1), (k,))
    layer = g.new_layer(Conv, node.name or node.output[0], (v.layer,),
                        {"weight": weight.T.reshape(k, c, 1, 1), "bias": b}, (k, h, w), out_channels=k, kernel=(1, 1))
    lead, hw = v.idx.shape[:-1], h * w
    first = pix // hw * (k * hw) + pix % hw   # each token's first output channel, in its image
    _put(g, node.output[0], View(layer, (first[:, None] + np.arange(k) * hw).reshape(lead + (k,))))


def _matmul(g, node, attrs):
    a, b = node.input[0], node.input[1]
    views = _state(g)
    if b in g.constants:
        _linear(g, node, a, _const(g, b, "weight").astype(np.float64), None)
    elif isinstance(views.get(a), Scores):
        _weighted_sum(g, node, views[a], _view(g, b))
    else:
        _scores(g, node, _view(g, a), _view(g, b))


def _einsum(g, node, attrs):
    """A batched product written as an einsum (MaxViT's): as the MatMul it is, operands transposed."""
    eq = attrs.get("equation", b"")
    eq = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "")
    try:
        ins, out = eq.split("->")
        a_s, b_s = ins.split(",")
    except ValueError:
        raise Refused(f"an einsum {eq!r} is not supported (only a batched product of two operands)") from None
    lead = out[:-2]
    i, j = out[-2], out[-1]
    shared = set(a_s) & set(b_s) - set(out)
    if len(shared) != 1 or a_s[:-2] != lead or b_s[:-2] != lead or {a_s[-2], a_s[-1]} != {i} | shared \
            or {b_s[-2], b_s[-1]} != {j} | shared:
        raise Refused(f"an einsum {eq!r} is not supported (only a batched product of two operands)")
    views = _state(g)
    a_name, b_name = node.input[0], node.input[1]
    transpose_a, transpose_b = a_s[-1] != next(iter(shared)), b_s[-2] != next(iter(shared))
    if isinstance(views.get(a_name), Scores):
        if transpose_a:
            raise Refused(f"an einsum {eq!r} of transposed attention weights is not supported")
        vb = _view(g, b_name)
        _weighted_sum(g, node, views[a_name], _swap(vb) if transpose_b else vb)
        return
    va, vb = _view(g, a_name), _view(g, b_name)
    _scores(g, node, _swap(va) if transpose_a else va, _swap(vb) if transpose_b else vb)


def _swap(v: View) -> View:
    return View(v.layer, np.swapaxes(v.idx, -1, -2), v.factor, v.unit)


def _gemm(g, node, attrs):
    if attrs.get("transA", 0):
        raise Refused("transA is not supported")
    weight = _const(g, node.input[1], "weight").astype(np.float64)
    weight = (weight.T if attrs.get("transB", 0) else weight) * attrs.get("alpha", 1.0)
    bias = (_const(g, node.input[2], "bias").astype(np.float64) * attrs.get("beta", 1.0)
            if len(node.input) > 2 and node.input[2] else None)
    _linear(g, node, node.input[0], weight, bias)


def _add(g, node, attrs):
    consts = [n for n in node.input if n in g.constants]
    if isinstance(_state(g).get(next(n for n in node.input if n not in g.constants)), Scores):
        s = _state(g)[next(n for n in node.input if n not in g.constants)]
        if not consts:
            raise Refused("it adds two computed tensors to attention scores, which is not supported")
        added = s.added.copy()
        const = np.broadcast_to(_const(g, consts[0], "addend").astype(np.float64), s.cells.shape)
        np.add.at(added, s.cells.reshape(-1), const.reshape(-1))
        _put_scores(g, node.output[0], dataclasses.replace(s, added=added), s.cells)
        return
    if consts:
        _add_constant(g, node, next(n for n in node.input if n not in g.constants), consts[0])
        return
    va, vb = _view(g, node.input[0]), _view(g, node.input[1])
    _not_unit(g, node.input[0], va)
    _not_unit(g, node.input[1], vb)
    if va.idx.shape != vb.idx.shape or not np.array_equal(va.idx, vb.idx) or va.factor != vb.factor \
            or _layer_shape(g, va.layer) != _layer_shape(g, vb.layer) or va.layer == vb.layer:
        raise Refused(f"it adds tensors of shapes {tuple(va.idx.shape)} and {tuple(vb.idx.shape)} that are not "
                          f"two layers' outputs in one arrangement, which is all we support")
    shape = _layer_shape(g, va.layer)
    layer = g.new_layer(Add, node.name or node.output[0], (va.layer, vb.layer), {}, shape)
    _put(g, node.output[0], View(layer, va.idx, va.factor))


def _absorbed(g, name: str) -> None:
    """Tensor `name` was read only to move its elements or to fold a constant into its layer: it no
    longer counts as a reader of the layer (so a gelu after a Linear's bias Add, or a layer scale after
    a transpose back, still goes into the layer that computes it)."""
    g.consumers[name] = g.consumers.get(name, 0) - 1


def _only_reader(g, layer: str) -> bool:
    return _readers(g, layer) == 1


def _add_constant(g, node, x_name: str, c_name: str) -> None:
    """A position embedding into the Tokens layer before it, or a per-channel bias into its convolution."""
    v = _view(g, x_name)
    _not_unit(g, x_name, v)
    const = _const(g, c_name, "addend").astype(np.float64)
    maker = g.layer(v.layer)
    c = _layer_shape(g, v.layer)[0]
    if maker is not None and maker.cls is Tokens and not maker.kwargs.get("position") and _only_reader(g, v.layer):
        t = _layer_shape(g, v.layer)[1]
        if v.idx.shape == (g.batch, t, c) and np.array_equal(v.idx, _token_idx(c, t, g.batch)) \
                and const.shape in ((1, t, c), (t, c)):
            maker.kwargs["position"] = True
            g.weights[f"{v.layer}.pos"] = np.ascontiguousarray(const.reshape(t, c).T, dtype=np.float32)
            _absorbed(g, x_name)
            _put(g, node.output[0], v)
            return
    per_channel = _per_channel(g, v, const)
    if per_channel is not None and maker is not None and maker.cls is Conv and _only_reader(g, v.layer) \
            and maker.activation == "none":
        g.weights[f"{v.layer}.bias"] = (g.weights[f"{v.layer}.bias"] + per_channel * v.factor).astype(np.float32)
        _absorbed(g, x_name)
        _put(g, node.output[0], v)
        return
    raise Refused(f"it adds a constant of shape {const.shape} to a {_describe(g, x_name)}; only a bias per "
                      f"channel after a Linear or a convolution, or a position embedding, is supported")


def _per_channel(g, v: View, const: np.ndarray) -> np.ndarray | None:
    """The per-channel values of `const` broadcast over view `v`, where it holds one per channel; else None."""
    c, h, w = _layer_shape(g, v.layer)
    full = np.broadcast_to(const, v.idx.shape) if np.broadcast_shapes(const.shape, v.idx.shape) == v.idx.shape \
        else None
    if full is None:
        return None
    values = np.full(c, np.nan)
    chans = (v.idx % (c * h * w) // (h * w)).reshape(-1)
    values[chans] = full.reshape(-1)
    again = values[chans]
    if np.isnan(values).any() or not np.allclose(again, full.reshape(-1), rtol=0, atol=0):
        return None
    return values


def _mul(g, node, attrs):
    consts = [n for n in node.input if n in g.constants]
    if not consts:
        raise Refused("it multiplies two computed tensors of the transformer part, which is not supported")
    x_name = next(n for n in node.input if n not in g.constants)
    const = _const(g, consts[0], "factor").astype(np.float64)
    _scaled(g, node, x_name, const, lambda f, c: f * c)


def _div(g, node, attrs):
    if isinstance(_state(g).get(node.input[1]), Norm):
        _normalised(g, node, _view(g, node.input[0]), _state(g)[node.input[1]])
        return
    if node.input[1] not in g.constants:
        raise Refused("a division by a computed tensor is not supported (only by a constant, or by a tensor's "
                      "own L2 norm)")
    _scaled(g, node, node.input[0], _const(g, node.input[1], "divisor").astype(np.float64), lambda f, c: f / c)


def _scaled(g, node, x_name: str, const: np.ndarray, combine) -> None:
    s = _state(g).get(x_name)
    if const.size == 1:
        value = float(const.reshape(-1)[0])
        if isinstance(s, Scores):
            if s.softmaxed:
                raise Refused("it scales attention weights after their softmax, which is not supported")
            _put_scores(g, node.output[0], dataclasses.replace(s, scale=combine(s.scale, value),
                                                               added=combine(s.added, value)), s.cells)
            return
        v = _view(g, x_name)
        _absorbed(g, x_name)
        _put(g, node.output[0], View(v.layer, v.idx, combine(v.factor, value), v.unit))
        return
    if isinstance(s, Scores):   # Swin v2's scale per head: a factor per cell
        if s.softmaxed:
            raise Refused("it scales attention weights after their softmax, which is not supported")
        try:
            full = np.broadcast_to(const, s.cells.shape)
        except ValueError:
            raise Refused(f"it multiplies attention scores of shape {tuple(s.cells.shape)} by a constant of shape "
                          f"{const.shape}, which does not broadcast to them") from None
        factors = np.ones(s.added.size)
        factors[s.cells.reshape(-1)] = full.reshape(-1)
        old = np.ones(s.added.size) if s.cell_scale is None else s.cell_scale
        _put_scores(g, node.output[0], dataclasses.replace(s, cell_scale=combine(old, factors),
                                                           added=combine(s.added, factors)), s.cells)
        return
    # a per-channel scale (ConvNeXt's layer scale) into the convolution that makes its input
    v = _view(g, x_name)
    _not_unit(g, x_name, v)
    maker = g.layer(v.layer)
    per_channel = _per_channel(g, v, const)
    if per_channel is None or maker is None or maker.cls is not Conv or not _only_reader(g, v.layer) \
            or maker.activation != "none":
        raise Refused(f"it multiplies a {_describe(g, x_name)} by a constant of shape {const.shape}; only a "
                          f"scalar, or one factor per channel after a convolution, is supported")
    factor = combine(np.ones_like(per_channel), per_channel) * v.factor
    w = g.weights[f"{v.layer}.weight"]
    g.weights[f"{v.layer}.weight"] = (w * factor[:, None, None, None]).astype(np.float32)
    g.weights[f"{v.layer}.bias"] = (g.weights[f"{v.layer}.bias"] * factor).astype(np.float32)
    _absorbed(g, x_name)
    _put(g, node.output[0], View(v.layer, v.idx))


def _layernorm(g, node, attrs):
    axis = int(attrs.get("axis", -1))
    v, _ = _tokens_input(g, node.input[0])
    c = _layer_shape(g, v.layer)[0]
    if axis not in (-1, v.idx.ndim - 1):
        raise Refused(f"a LayerNormalization over axes from {axis} is not supported (only the last: channels)")
    if int(attrs.get("stash_type", 1)) != 1:
        raise Refused("stash_type other than float is not supported")
    scale = _const(g, node.input[1], "scale").astype(np.float32).reshape(-1)
    bias = (_const(g, node.input[2], "bias").astype(np.float32).reshape(-1) if len(node.input) > 2 and node.input[2]
            else np.zeros(c, np.float32))
    if scale.size != c or bias.size != c:
        raise Refused(f"its scale and bias are not one per channel ({c})")
    shape = _layer_shape(g, v.layer)
    layer = g.new_layer(LayerNorm, node.name or node.output[0], (v.layer,), {"scale": scale, "bias": bias}, shape,
                        eps=float(attrs.get("epsilon", 1e-5)))
    _put(g, node.output[0], View(layer, v.idx))


def _gelu(g, node, attrs):
    approx = attrs.get("approximate", "none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    if approx not in ("none", "tanh"):
        raise Refused(f"approximate={approx!r} is not supported")
    act = "gelu" if approx == "none" else "gelu_tanh"
    v = _view(g, node.input[0])
    if v.factor != 1.0:
        raise Refused(f"the gelu of a tensor scaled by {v.factor:g} is not supported")
    _not_unit(g, node.input[0], v)
    maker = g.layer(v.layer)
    if maker is None or maker.activation != "none" or not _only_reader(g, v.layer) \
            or maker.cls in (Attention, Tokens, TakeToken):
        c, h, w = _layer_shape(g, v.layer)
        layer = g.new_layer(Channels, f"{node.output[0]}_{act}", (v.layer,), {}, (c, h, w), order=tuple(range(c)))
        g.layer(layer).activation = act
        _put(g, node.output[0], View(layer, v.idx))
        return
    maker.activation = act
    _put(g, node.output[0], v)


# -- attention ---------------------------------------------------------------------------------------------

def _put_scores(g, name: str, s: Scores, cells: np.ndarray) -> None:
    g.values.pop(name, None)
    _state(g)[name] = dataclasses.replace(s, cells=cells)


def _scores(g, node, a: View, b: View) -> None:
    """q @ k^T: both views of one layer (the queries', keys' and values' projection)."""
    if a.layer != b.layer:
        raise Refused("it multiplies two computed tensors of different layers; only attention's queries by its "
                          "keys (of one projection) are supported")
    if a.idx.ndim < 2 or a.idx.shape[:-2] != b.idx.shape[:-2] or a.idx.shape[-1] != b.idx.shape[-2]:
        raise Refused(f"it multiplies shapes {tuple(a.idx.shape)} and {tuple(b.idx.shape)}, which is not "
                          f"batched queries by keys")
    lead = a.idx.shape[:-2]
    n, dh, m = a.idx.shape[-2], a.idx.shape[-1], b.idx.shape[-1]
    groups = int(np.prod(lead))
    q = a.idx.reshape(groups, n, dh)
    k = np.swapaxes(b.idx.reshape(groups, dh, m), 1, 2)
    if (a.unit is None) != (b.unit is None):
        raise Refused("it multiplies L2-normalised queries by keys that are not (or the other way round); cosine "
                      "attention normalises both")
    if a.unit is not None and not (_rows(q) <= a.unit and _rows(k) <= b.unit):
        raise Refused("its queries and keys were L2-normalised along another axis than the one it multiplies "
                      "over (each head's channels), which is not cosine attention")
    cells = np.arange(groups * n * m).reshape(lead + (n, m))
    _put_scores(g, node.output[0], Scores(a.layer, q, k, cells, a.factor * b.factor, np.zeros(groups * n * m),
                                          cosine=a.unit is not None), cells)


def _rows(idx: np.ndarray) -> frozenset:
    """The rows of `idx` along its last axis, each's indices sorted, as a set (a View's `unit`)."""
    rows = np.sort(idx.reshape(-1, idx.shape[-1]), axis=1).astype(np.int64)
    return frozenset(r.tobytes() for r in rows)


# -- cosine attention's normalisation (Swin v2) --------------------------------------------------------------

def _reduce_l2(g, node, attrs):
    v = _view(g, node.input[0])
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = _ints(g, node.input[1], "axes")
    last = v.idx.ndim - 1
    if not axes or [int(a) % v.idx.ndim for a in axes] != [last] or not attrs.get("keepdims", 1):
        raise Refused(f"a ReduceL2 over axes {axes} of a {_describe(g, node.input[0])} is not supported (only "
                      f"over the last axis, kept: cosine attention's norms)")
    if v.factor <= 0 or v.unit is not None:
        raise Refused(f"a ReduceL2 of a {_describe(g, node.input[0])} scaled by {v.factor:g} is not supported")
    _state(g)[node.output[0]] = Norm(v, 0.0, v.idx.shape[:-1] + (1,))
    g.values.pop(node.output[0], None)


def _norm_input(g, name: str, op: str) -> Norm:
    x = _state(g).get(name)
    if not isinstance(x, Norm):
        raise Refused(f"{op} of a {_describe(g, name)} is not supported (only of an L2 norm: cosine attention's)")
    return x


def _clip(g, node, attrs):
    x = _norm_input(g, node.input[0], "a Clip")
    low = _const(g, node.input[1], "min") if len(node.input) > 1 and node.input[1] else attrs.get("min")
    high = _const(g, node.input[2], "max") if len(node.input) > 2 and node.input[2] else attrs.get("max")
    if low is None or high is not None or np.size(low) != 1:
        raise Refused("a Clip of a norm is supported only from below (a least norm), by one value")
    _state(g)[node.output[0]] = Norm(x.of, max(x.eps, float(np.reshape(low, -1)[0])), x.shape)


def _expand(g, node, attrs):
    x = _norm_input(g, node.input[0], "an Expand")
    shape = tuple(_ints(g, node.input[1], "shape"))
    try:
        out = np.broadcast_shapes(x.shape, shape)
    except ValueError:
        raise Refused(f"an Expand of a norm of shape {x.shape} to {shape} does not broadcast") from None
    if out != tuple(x.of.idx.shape):
        raise Refused(f"an Expand of a norm to {out}, not the shape {tuple(x.of.idx.shape)} of the tensor it is "
                      f"the norm of, is not supported")
    _state(g)[node.output[0]] = Norm(x.of, x.eps, out)


def _normalised(g, node, v: View, norm: Norm) -> None:
    """A tensor divided by its own L2 norm: a unit view."""
    if v.layer != norm.of.layer or not np.array_equal(v.idx, norm.of.idx) or v.factor != norm.of.factor \
            or norm.shape != tuple(v.idx.shape):
        raise Refused("it divides a tensor by the L2 norm of another (or by a norm not expanded to its shape); "
                      "only a tensor's own normalisation (cosine attention's) is supported")
    if not 0 < norm.eps <= MAX_NORM_EPS:
        raise Refused(f"its norms are held at least {norm.eps:g}, where ours are at least {COSINE_EPS:g} (torch's "
                      f"F.normalize); only a least norm in (0, {MAX_NORM_EPS:g}] is supported")
    _put(g, node.output[0], View(v.layer, v.idx, 1.0, _rows(v.idx)))


def _softmax(g, node, attrs):
    s = _state(g).get(node.input[0])
    if not isinstance(s, Scores):
        raise Refused(f"a softmax of a {_describe(g, node.input[0])} is not supported (only of attention scores, "
                          f"or of a classifier's features)")
    axis = int(attrs.get("axis", -1)) % s.cells.ndim
    m = s.k.shape[1]
    rows = np.moveaxis(s.cells, axis, -1).reshape(-1, m)
    if axis != s.cells.ndim - 1 or not np.array_equal(rows, rows[:, :1] + np.arange(m)) or (rows[:, 0] % m).any():
        raise Refused("a softmax over another axis than each query's keys is not supported")
    _put_scores(g, node.output[0], dataclasses.replace(s, softmaxed=True), s.cells)


def _weighted_sum(g, node, s: Scores, v: View) -> None:
    """softmax(scores) @ values: our Attention layer, found and checked against the indices."""
    if not s.softmaxed:
        raise Refused("a product of attention scores before their softmax is not supported")
    if v.layer != s.layer or v.factor != 1.0 or v.unit is not None or s.cells.shape[:-1] + (v.idx.shape[-1],) != \
            s.cells.shape[:-2] + (s.cells.shape[-2], v.idx.shape[-1]) or v.idx.shape[:-1] != \
            s.cells.shape[:-2] + (s.cells.shape[-1],):
        raise Refused(f"it multiplies attention weights of shape {tuple(s.cells.shape)} by a tensor of shape "
                          f"{tuple(v.idx.shape)} that is not the values of the same projection")
    c3, h, w = _layer_shape(g, s.layer)
    hw, c = h * w, c3 // 3
    size = c3 * hw
    groups, n, dh = s.q.shape
    m = s.k.shape[1]
    lead = s.cells.shape[:-2]
    rows = s.cells.reshape(-1, s.cells.shape[-2], m)                        # (L, n, m)
    vals = v.idx.reshape(-1, m, v.idx.shape[-1])                            # (L, m, dv)
    gq = rows[:, :, 0] // m                                                 # (L, n): the (g, i) of each row
    grp, qi = gq // n, gq % n
    if c3 % 3 or dh == 0 or c % dh or vals.shape[-1] != dh or (grp != grp[:, :1]).any():
        raise Refused("the attention's queries, keys and values are not heads of one projection's three parts")
    heads = c // dh
    g_of_l = grp[:, 0]
    image = s.q[:, 0, 0] // size   # each group's image of the batch: its queries, keys and values all of it
    if not ((s.q // size == image[:, None, None]).all() and (s.k // size == image[:, None, None]).all()
            and (vals // size == image[g_of_l][:, None, None]).all()):
        raise Refused(f"the attention's groups of queries, keys and values: {MIXES}")
    q, k, vals = s.q % size, s.k % size, vals % size
    # each group: one head, its queries' and keys' pixels; the keys and the values of one pixel
    head = q[:, 0, 0] // hw // dh
    want_q = (head[:, None] * dh + np.arange(dh))[:, None, :] * hw + (q[:, :, :1] % hw)
    want_k = (c + head[:, None] * dh + np.arange(dh))[:, None, :] * hw + (k[:, :, :1] % hw)
    want_v = (2 * c + head[g_of_l][:, None] * dh + np.arange(dh))[:, None, :] * hw + (k[g_of_l][:, :, :1] % hw)
    if not (np.array_equal(q, want_q) and np.array_equal(k, want_k) and np.array_equal(vals, want_v)):
        raise Refused("the attention's queries, keys and values are not the heads of one projection's queries, "
                          "keys and values (channels q, k, v, each heads of equal width), which is all we support")
    qpix, kpix = q[:, :, 0] % hw, k[:, :, 0] % hw
    spec, windows = _find_attention(heads, h, w, n, m, head, qpix, kpix, image, g.batch)
    if spec is None:
        raise Refused(f"its {groups} groups of {n} queries over a {h}x{w} map are not the windows of our "
                          f"attention (the whole map; windows; a grid; a shift of the windows) in every image alike")
    layer = _make_attention(g, node, s, spec, windows, head, qpix, kpix, heads, (c3, h, w), image)
    out = image[g_of_l][:, None, None] * (c * hw) + (head[g_of_l][:, None, None] * dh + np.arange(dh)) * hw \
        + qpix[grp, qi][:, :, None]                                         # (L, n, dh)
    _put(g, node.output[0], View(layer, out.reshape(lead + (s.cells.shape[-2], dh))))


def _candidates(h: int, w: int, n: int):
    """Our attention's windows of n tokens on an h x w map: (window, grid, shift)."""
    if n == h * w:
        yield (0, 0), False, (0, 0)
    for wh in range(1, h + 1):
        if n % wh or h % wh or w % (n // wh) or (wh, n // wh) == (h, w):
            continue
        ww = n // wh
        yield (wh, ww), False, (0, 0)
        yield (wh, ww), True, (0, 0)
        for sh, sw in itertools.product(range(wh), range(ww)):
            if sh or sw:
                yield (wh, ww), False, (sh, sw)


def _our_windows(h: int, w: int, window, grid: bool, shift) -> list[np.ndarray]:
    """Each window's pixels (flat, in the original map) in our token order (compare/oracle.py's)."""
    wh, ww = (h, w) if window == (0, 0) else window
    out = []
    if grid:
        sh, sw = h // wh, w // ww
        for a, b in itertools.product(range(sh), range(sw)):
            out.append(np.array([(a + i * sh) * w + b + j * sw for i in range(wh) for j in range(ww)]))
        return out
    for a, b in itertools.product(range(h // wh), range(w // ww)):
        rows = [((a * wh + i + shift[0]) % h, (b * ww + j + shift[1]) % w) for i in range(wh) for j in range(ww)]
        out.append(np.array([r * w + q for r, q in rows]))
    return out


def _find_attention(heads, h, w, n, m, head, qpix, kpix, image, batch: int):
    """The first of our attention layers whose windows are exactly the groups' query and key sets, the
    same in every image of the batch."""
    if n != m:
        return None, None
    groups = {}
    for gi in range(len(head)):
        if set(qpix[gi].tolist()) != set(kpix[gi].tolist()):
            return None, None
        groups.setdefault((int(image[gi]), frozenset(qpix[gi].tolist())), set()).add(int(head[gi]))
    if any(len(hs) != heads for hs in groups.values()) or len(head) != len(groups) * heads:
        return None, None
    for window, grid, shift in _candidates(h, w, n):
        windows = _our_windows(h, w, window, grid, shift)
        if len(windows) * batch == len(groups) and all((b, frozenset(win.tolist())) in groups
                                                       for b in range(batch) for win in windows):
            return (window, grid, shift), windows
    return None, None


def _make_attention(g, node, s: Scores, spec, windows, head, qpix, kpix, heads, in_shape, image) -> str:
    """Our Attention layer for the groups found; the constants added to the scores checked to be one
    bias per head, the same in every window of every image (and the shift's mask)."""
    window, grid, shift = spec
    n, count = len(windows[0]), len(windows)
    which = {frozenset(win.tolist()): k for k, win in enumerate(windows)}
    pos = [{int(p): t for t, p in enumerate(win)} for win in windows]
    added = s.added.reshape(len(head), n, n)
    ours = np.zeros((g.batch * count, heads, n, n))   # each image's windows in turn
    for gi in range(len(head)):
        k = which[frozenset(qpix[gi].tolist())]
        qi = [pos[k][int(p)] for p in qpix[gi]]
        kj = [pos[k][int(p)] for p in kpix[gi]]
        ours[int(image[gi]) * count + k, int(head[gi])][np.ix_(qi, kj)] = added[gi]
    keep = Attention("probe", heads=heads, window=window, shift=shift, grid=grid).keep(in_shape)
    keep = np.tile(np.ones((count, n, n), bool) if keep is None else keep, (g.batch, 1, 1))
    kept = np.broadcast_to(keep[:, None], ours.shape)
    bias = np.where(kept, ours, np.nan)
    first = np.nanmax(np.where(kept, ours, -np.inf), axis=0)              # (heads, n, n): one window's value
    spread = np.nanmax(np.abs(bias - first[None]), axis=0)
    if np.isnan(first).any() or np.isinf(first).any() or (spread > 1e-5 * (1 + np.abs(first))).any():
        raise Refused("the constants added to its scores are not one relative position bias per head, the same "
                          "in every window, which is all we support")
    if (ours[~kept] - np.broadcast_to(first[None], ours.shape)[~kept] > MASKED).any():
        raise Refused(f"the constants added to its scores do not leave out (at most {MASKED:g}) the keys a "
                          f"shifted window's mask leaves out")
    c = in_shape[0] // 3
    params = {"bias": first.astype(np.float32)} if np.abs(first).max() > 0 else {}
    per_head = _head_factors(s, head, heads)
    if s.cosine:
        params["cosine_scale"] = (s.scale * per_head).astype(np.float32)
        scale = 0.0
    else:
        if np.ptp(per_head) > 1e-6 * np.abs(per_head).max():
            raise Refused("its scores are scaled by a factor per head, which only cosine attention (Swin v2's) takes")
        total = s.scale * float(per_head[0])
        default = 1.0 / float(np.sqrt(c // heads))
        scale = 0.0 if abs(total - default) <= 1e-6 * default else total
    return g.new_layer(Attention, node.name or node.output[0], (s.layer,), params, (c,) + tuple(in_shape[1:]),
                       heads=heads, window=window, shift=shift, grid=grid, position_bias="bias" in params,
                       scale=scale, cosine=s.cosine)


def _head_factors(s: Scores, head: np.ndarray, heads: int) -> np.ndarray:
    """(heads,) each head's factor of its scores beyond `scale` (ones where none was given); Refused where
    a group's cells, or the groups of one head, are not scaled alike."""
    if s.cell_scale is None:
        return np.ones(heads)
    per_group = s.cell_scale.reshape(len(head), -1)
    out = np.full(heads, np.nan)
    for gi, hd in enumerate(head):
        f = per_group[gi]
        if np.ptp(f) > 1e-6 * np.abs(f).max() or (not np.isnan(out[hd]) and abs(out[hd] - f[0]) > 1e-6 * abs(f[0])):
            raise Refused("its scores are scaled by factors that are not one per head, the same in every window")
        out[hd] = f[0]
    return out


_COMPUTES = {"MatMul": _matmul, "Einsum": _einsum, "Gemm": _gemm, "Add": _add, "Mul": _mul, "Div": _div, "Softmax": _softmax,
             "LayerNormalization": _layernorm, "Gelu": _gelu, "ReduceL2": _reduce_l2, "Clip": _clip,
             "Expand": _expand}
