"""Layer and net specifications: plain data that every backend reads.

Activations between layers are NCHW float32 for the spatial layers and
(N, features) for dense layers.  A dense layer that follows a spatial layer
flattens it in C, H, W order.  FLOPs count a multiply-add as two operations;
pooling counts one operation per window element read, subsampling two more
per output for its coefficient and bias.  Activations are not counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ACTIVATIONS = ("none", "relu", "sigmoid")


def _out_size(size: int, kernel: int, stride: int, pad: int, what: str) -> int:
    span = size + 2 * pad - kernel
    if span < 0:
        raise ValueError(f"{what}: window {kernel} is larger than the padded input {size + 2 * pad}")
    return span // stride + 1


@dataclass(frozen=True)
class Layer:
    """Common part of every layer: a name and a fused activation."""

    name: str
    activation: str = "none"

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"{self.name}: activation must be one of {ACTIVATIONS}, not {self.activation!r}")

    kind = "layer"

    def out_shape(self, in_shape: tuple) -> tuple:  # per image, without the batch
        raise NotImplementedError

    def param_shapes(self, in_shape: tuple) -> dict[str, tuple]:
        return {}

    def flops(self, in_shape: tuple) -> int:  # per image
        raise NotImplementedError

    def params(self, in_shape: tuple) -> int:
        total = 0
        for shape in self.param_shapes(in_shape).values():
            n = 1
            for d in shape:
                n *= d
            total += n
        return total


@dataclass(frozen=True)
class Conv(Layer):
    """2-D convolution (cross-correlation) with bias; weight is (K, C, FH, FW)."""

    out_channels: int = 1
    kernel: tuple = (3, 3)
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    kind = "conv"

    def out_shape(self, in_shape):
        c, h, w = in_shape
        return (self.out_channels,
                _out_size(h, self.kernel[0], self.stride[0], self.pad[0], self.name),
                _out_size(w, self.kernel[1], self.stride[1], self.pad[1], self.name))

    def param_shapes(self, in_shape):
        return {"weight": (self.out_channels, in_shape[0]) + tuple(self.kernel),
                "bias": (self.out_channels,)}

    def flops(self, in_shape):
        k, oh, ow = self.out_shape(in_shape)
        return 2 * k * in_shape[0] * self.kernel[0] * self.kernel[1] * oh * ow


@dataclass(frozen=True)
class Subsample(Layer):
    """LeNet's subsampling: mean of each k x k window of one channel, times a
    per-channel coefficient, plus a per-channel bias (LeCun et al. 1998)."""

    kernel: tuple = (2, 2)
    stride: tuple = (2, 2)
    kind = "subsample"

    def out_shape(self, in_shape):
        c, h, w = in_shape
        return (c, _out_size(h, self.kernel[0], self.stride[0], 0, self.name),
                _out_size(w, self.kernel[1], self.stride[1], 0, self.name))

    def param_shapes(self, in_shape):
        return {"coeff": (in_shape[0],), "bias": (in_shape[0],)}

    def flops(self, in_shape):
        c, oh, ow = self.out_shape(in_shape)
        return c * oh * ow * (self.kernel[0] * self.kernel[1] + 2)


@dataclass(frozen=True)
class MaxPool(Layer):
    kernel: tuple = (2, 2)
    stride: tuple = (2, 2)
    kind = "maxpool"

    def out_shape(self, in_shape):
        c, h, w = in_shape
        return (c, _out_size(h, self.kernel[0], self.stride[0], 0, self.name),
                _out_size(w, self.kernel[1], self.stride[1], 0, self.name))

    def flops(self, in_shape):
        c, oh, ow = self.out_shape(in_shape)
        return c * oh * ow * self.kernel[0] * self.kernel[1]


@dataclass(frozen=True)
class Dense(Layer):
    """Fully connected: y = x @ weight + bias, weight is (in, out)."""

    out_features: int = 1
    kind = "dense"

    def out_shape(self, in_shape):
        return (self.out_features,)

    def param_shapes(self, in_shape):
        n_in = 1
        for d in in_shape:
            n_in *= d
        return {"weight": (n_in, self.out_features), "bias": (self.out_features,)}

    def flops(self, in_shape):
        return 2 * self.param_shapes(in_shape)["weight"][0] * self.out_features


@dataclass(frozen=True)
class Net:
    """A named feed-forward chain of layers with a fixed per-image input shape."""

    name: str
    input_shape: tuple  # (C, H, W)
    layers: tuple
    default_batch: int = 1
    description: str = ""
    shapes: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"net {self.name}: layer names must be unique")
        shapes = [tuple(self.input_shape)]
        for layer in self.layers:
            if layer.kind != "dense" and len(shapes[-1]) != 3:
                raise ValueError(f"net {self.name}: {layer.name} ({layer.kind}) needs a C,H,W input, "
                                 f"but follows a dense layer")
            shapes.append(tuple(layer.out_shape(shapes[-1])))
        object.__setattr__(self, "shapes", tuple(shapes))

    def in_shape(self, i: int) -> tuple:
        return self.shapes[i]

    def out_shape(self, i: int) -> tuple:
        return self.shapes[i + 1]

    @property
    def output_shape(self) -> tuple:
        return self.shapes[-1]

    def layer_index(self, name: str) -> int:
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise KeyError(name)

    def param_shapes(self) -> dict[str, tuple]:
        """Every parameter array of the net, named '<layer>.<param>'."""
        out = {}
        for i, layer in enumerate(self.layers):
            for pname, shape in layer.param_shapes(self.in_shape(i)).items():
                out[f"{layer.name}.{pname}"] = shape
        return out

    def params(self) -> int:
        return sum(layer.params(self.in_shape(i)) for i, layer in enumerate(self.layers))

    def flops(self, batch: int = 1) -> int:
        return batch * sum(layer.flops(self.in_shape(i)) for i, layer in enumerate(self.layers))

    def layer_table(self, batch: int = 1) -> list[dict]:
        """One row per layer: what the results files and reports print."""
        rows = []
        for i, layer in enumerate(self.layers):
            rows.append({
                "name": layer.name,
                "kind": layer.kind,
                "activation": layer.activation,
                "in_shape": list(self.in_shape(i)),
                "out_shape": list(self.out_shape(i)),
                "params": layer.params(self.in_shape(i)),
                "flops": batch * layer.flops(self.in_shape(i)),
            })
        return rows
