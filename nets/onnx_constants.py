"""The shape arithmetic of an exported ONNX graph, worked out at import.

An exporter that traces `x.size()` (PyTorch's channel shuffle and chunk, with a
dynamic batch) writes Shape, Gather, Unsqueeze, Concat, Div... on the shapes of
computed tensors.  Every shape but the batch is fixed, so these nodes are
constants; each element also carries a mark of whether it is the batch
(BATCH), was computed from it (DERIVED), or is neither (0), so that a Reshape
can tell "keep the batch" from a literal that fixes it (nets/onnx_import.py).
With a model whose input fixes the batch, Shape gives that number, marked
BATCH all the same.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BATCH = 1     # the element is the batch
DERIVED = 2   # computed from the batch


class ConstantRefused(Exception):
    """The constant operation is not one we evaluate."""


@dataclass
class Constant:
    value: np.ndarray
    marks: np.ndarray   # per element: 0, BATCH or DERIVED

    @classmethod
    def plain(cls, value) -> "Constant":
        value = np.asarray(value)
        return cls(value, np.zeros(value.shape, np.int8))

    @property
    def from_batch(self) -> bool:
        return bool(self.marks.any())


def shape_of(batch: int, per_image: tuple) -> Constant:
    """Shape of a computed tensor: the batch, then its per-image shape."""
    marks = np.zeros(1 + len(per_image), np.int8)
    marks[0] = BATCH
    return Constant(np.array((batch,) + tuple(per_image), np.int64), marks)


def _ints(c: Constant | None, what: str) -> list[int] | None:
    if c is None:
        return None
    if c.from_batch:
        raise ConstantRefused(f"its {what} depend on the batch")
    return [int(v) for v in np.asarray(c.value).reshape(-1)]


def _arithmetic(op: str, a: Constant, b: Constant) -> Constant:
    x, y = np.asarray(a.value), np.asarray(b.value)
    if op == "Add":
        value = x + y
    elif op == "Sub":
        value = x - y
    elif op == "Mul":
        value = x * y
    else:   # Div: integers truncate toward zero, as ONNX says
        value = (np.trunc(x / y).astype(np.result_type(x, y)) if np.issubdtype(np.result_type(x, y), np.integer)
                 else x / y)
    marks = np.broadcast_to(np.where((a.marks > 0), DERIVED, 0), value.shape) | \
        np.broadcast_to(np.where((b.marks > 0), DERIVED, 0), value.shape)
    return Constant(value, np.asarray(marks, np.int8))


def evaluate(op: str, attrs: dict, inputs: list[Constant | None]) -> list[Constant]:
    """The outputs of constant node `op`; ConstantRefused where we do not evaluate it."""
    x = inputs[0] if inputs else None
    if op in ("Identity", "Cast"):
        value = x.value if op == "Identity" else x.value.astype(_ONNX_DTYPES.get(attrs.get("to"), np.float32))
        return [Constant(value, x.marks.copy())]
    if op in ("Add", "Sub", "Mul", "Div"):
        return [_arithmetic(op, inputs[0], inputs[1])]
    if op == "Gather":
        axis = int(attrs.get("axis", 0))
        index = np.asarray(inputs[1].value).astype(np.int64)
        return [Constant(np.take(x.value, index, axis=axis), np.take(x.marks, index, axis=axis))]
    if op in ("Unsqueeze", "Squeeze"):
        axes = attrs.get("axes") or _ints(inputs[1] if len(inputs) > 1 else None, "axes") or []
        value, marks = np.asarray(x.value), x.marks
        if op == "Unsqueeze":
            for a in sorted(int(a) % (value.ndim + len(axes)) for a in axes):
                value, marks = np.expand_dims(value, a), np.expand_dims(marks, a)
        else:
            axes = tuple(int(a) % value.ndim for a in axes) or None
            value, marks = np.squeeze(value, axis=axes), np.squeeze(marks, axis=axes)
        return [Constant(value, marks)]
    if op == "Concat":
        axis = int(attrs.get("axis", 0))
        return [Constant(np.concatenate([np.asarray(c.value) for c in inputs], axis=axis),
                         np.concatenate([c.marks for c in inputs], axis=axis))]
    if op == "Slice":
        starts, ends = _ints(inputs[1], "starts"), _ints(inputs[2], "ends")
        axes = _ints(inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
        steps = _ints(inputs[4], "steps") if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
        index = [slice(None)] * np.ndim(x.value)
        for a, s, e, st in zip(axes, starts, ends, steps):
            index[a] = slice(s, e, st)
        return [Constant(np.asarray(x.value)[tuple(index)], x.marks[tuple(index)])]
    raise ConstantRefused(f"operator {op} on constants is not evaluated")


# ONNX TensorProto element types -> numpy, for Cast
_ONNX_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 11: np.float64, 10: np.float16, 9: np.bool_}

CONSTANT_OPS = ("Identity", "Cast", "Add", "Sub", "Mul", "Div", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice")
