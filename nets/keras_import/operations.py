"""Keras operators on a tensor (functional models' `x + y`, `x * 0.5`, ...), not layers: the sum of
two tensors (ConvNeXt's residual) is an Add; x + c, x * c, x / c with a number c are kept until
their chain is one of our activations (MobileNetV3's relu6(x + 3) * (1 / 6): a hardsigmoid)."""
from __future__ import annotations

from ..errors import UserError
from .builder import Builder, Value
from .merging import add


def operation(b: Builder, op, inputs: list[Value]):
    """Keras operator `op` (reading `inputs`) imported into `b`."""
    kind = type(op).__name__
    what = f"operation {op.name} ({kind})"
    if kind == "Add" and len(inputs) == 2:   # x + y of two tensors: ConvNeXt's residual
        add(b, op, what, inputs)
    else:
        _scalar_op(b, op, what, op._inbound_nodes[0])


# a chain of scalar operations that is one of our activations
_OP_ACTIVATIONS = {(("add", 3.0), ("relu6",), ("mul", 1 / 6)): "hardsigmoid",
                   (("add", 3.0), ("relu6",), ("div", 6.0)): "hardsigmoid"}


def _scalar_op(b: Builder, op, what: str, node):
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

