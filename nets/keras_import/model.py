"""A Keras model, in memory, as one of our nets: its layers walked in order, each imported by
its class's handler (table.py) or refused in one line naming it and what we lack."""
from __future__ import annotations

import os

import numpy as np

from ..errors import UserError
from ..spec import NET_INPUT, Net
from ..weights import validate_weights
from .builder import Builder, Value
from .operations import operation
from .table import HANDLERS, REFUSED, SUPPORTED
from .transformer import inline_sequential


def need_keras():
    """Keras, imported; a UserError saying how to install it where it is missing."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # TensorFlow's C++ INFO/WARNING lines; errors stay
    try:
        import keras
    except ImportError:
        raise UserError("importing a Keras model needs Keras and TensorFlow: "
                        "pip install 'clblast-compare[tensorflow]'") from None
    return keras


def _inbound(keras, model, what_model: str) -> tuple[list, dict[str, list[str]]]:
    """The model's operations in order (layers, and Keras operators on tensors), and
    for each the names of the operations it reads."""
    if isinstance(model, keras.Sequential):
        layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
        names = [NET_INPUT] + [layer.name for layer in layers]
        return layers, {layer.name: [names[i]] for i, layer in enumerate(layers)}
    ops = [op for op in model.operations if type(op).__name__ != "InputLayer"]
    inbound = {}
    for op in ops:
        nodes = op._inbound_nodes
        if len(nodes) != 1:
            raise UserError(f"{what_model}: layer {op.name} is used {len(nodes)} times; only layers used "
                            f"once are supported")
        inbound[op.name] = [t._keras_history.operation.name for t in nodes[0].input_tensors]
    return ops, inbound


def _import_layer(keras, b: Builder, layer, what: str, inputs: list[Value]) -> None:
    """Keras layer `layer`, reading `inputs`, imported into `b` by its class's handler."""
    cls = type(layer).__name__
    handler = HANDLERS.get(cls)
    if handler is None or handler.unary:
        if len(inputs) != 1:
            raise UserError(f"{what}: reads {len(inputs)} tensors; only Add, Multiply and Concatenate read more "
                            f"than one")
        if b.ops and not (handler is not None and handler.takes_ops):
            raise UserError(f"{what}: follows scalar operations {b.ops} that are not one of our activations")
    if handler is None:
        raise _refusal(keras, layer, what)
    if handler.unary and not handler.takes_pad:
        b.materialise(what)
    handler.run(b, layer, what, inputs)


def _refusal(keras, layer, what: str) -> UserError:
    """Why a layer of a class no handler takes is refused."""
    cls = type(layer).__name__
    if cls in REFUSED:
        return UserError(f"{what}: {REFUSED[cls]}")
    if isinstance(layer, keras.Model):   # ConvNeXt's stem and downsampling: name what is inside too
        lacking = sorted({type(inner).__name__ for inner in layer.layers} - set(HANDLERS) - {"InputLayer"})
        return UserError(f"{what}: a model nested in the model is not supported"
                         + (f", nor what it holds: {', '.join(lacking)}" if lacking else
                            " (its layers are: save it flattened into the outer model)"))
    return UserError(f"{what}: layer type {cls} is not supported (supported: {SUPPORTED})")


def import_model(model, name: str, source: str = "") -> tuple[Net, dict[str, np.ndarray]]:
    """A Keras model, Sequential or functional, as (net, weights); `name` names the net."""
    keras = need_keras()
    what_model = source or name
    if not isinstance(model, keras.Model):
        raise UserError(f"{what_model}: a {type(model).__name__} is not a Keras model")
    try:
        shape = tuple(model.inputs[0].shape)
    except (AttributeError, IndexError, ValueError):
        raise UserError(f"{what_model}: the model has no input shape; build it with keras.Input((H, W, C))") from None
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UserError(f"{what_model}: the model has {len(model.inputs)} inputs and {len(model.outputs)} outputs; "
                        f"only one of each is supported")
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise UserError(f"{what_model}: input shape {shape[1:]} is not a fixed (H, W, C) image")
    h, w, c = (int(d) for d in shape[1:])
    ops, inbound = _inbound(keras, model, what_model)
    ops, inbound = inline_sequential(keras, ops, inbound)   # ConvNeXt's stem (issue 45)
    readers: dict[str, int] = {}
    for names in inbound.values():
        for n in names:
            readers[n] = readers.get(n, 0) + 1
    b = Builder((c, h, w), readers)
    input_names = {t._keras_history.operation.name for t in model.inputs}
    last = None
    for layer in ops:
        what = f"layer {layer.name} ({type(layer).__name__})"
        dtype = getattr(layer, "compute_dtype", "float32")
        if dtype != "float32":
            raise UserError(f"{what}: computes in {dtype}; only float32 models are supported")
        inputs = [Value(NET_INPUT, (c, h, w)) if n in input_names or n == NET_INPUT else b.values[n]
                  for n in inbound[layer.name]]
        b.start(inputs[0])
        if isinstance(layer, keras.layers.Layer):
            _import_layer(keras, b, layer, what, inputs)
        else:   # a Keras operator on tensors
            operation(b, layer, inputs)
        b.values[layer.name] = last = b.output()
    if not b.layers:
        raise UserError(f"{what_model}: the model has no layer we can run")
    _check_output(b, b.values.get(model.outputs[0]._keras_history.operation.name), last, what_model)
    description = f"imported from {source or 'a Keras model'}" + (f"; {'; '.join(b.notes)}" if b.notes else "")
    net = b.net(name, description, (c, h, w))
    validate_weights(b.weights, net, what_model)
    return net, b.weights


def _check_output(b: Builder, output: Value | None, last: Value | None, what_model: str) -> None:
    """The model's output is what our last layer makes, with nothing still pending on it."""
    if output is not None and (output.pad or output.ops):
        raise UserError(f"{what_model}: the model ends in a ZeroPadding2D or a scalar operation; we take one only "
                        f"before the convolution or pooling it belongs to (or an activation it spells)")
    if output is None or output is not last or output.layer != b.layers[-1].name or output.pad or output.ops:
        raise UserError(f"{what_model}: the output is not made by the last layer; only models whose last layer "
                        f"makes the output are supported")
    if output.flatten_from is not None and output.flatten_from[1:] != (1, 1):
        raise UserError(f"{what_model}: a Flatten must be followed by a Dense layer")
