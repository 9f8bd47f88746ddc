"""Layer and net specifications: plain data that every backend reads.

A net is a graph of named layers in an order where every layer comes after
the layers it reads.  A layer names its inputs (`inputs`); by default it
reads the layer before it (the first layer: the net's input, named
"input"), so a chain like LeNet-5 or VGG-16 names none.  The net's output
is the last layer's.

Activations between layers are NCHW float32 for the spatial layers and
(N, features) for dense layers.  A dense layer that follows a spatial layer
flattens it in C, H, W order.

Most layers read one input of one shape; an add and a multiply read two or
more of one shape (a multiply's second may be an (N, C, 1, 1) gate, read by
every pixel), a concatenation several of one height and width.  A layer
checks its inputs' shapes in out_shape_of().

FLOPs, per image:
- convolution: a multiply-add counts as two operations, over the channels
  each output really reads: 2 * K * (C / groups) * FH * FW * OH * OW, so a
  grouped or depthwise convolution counts 1/groups of the dense one's; a
  dilated one counts as the undilated one (the taps it reads, not its span);
- dense: 2 * inputs * outputs;
- pooling: one operation per window element read (padding included),
  subsampling two more per output for its coefficient and bias, an average
  pool one more per output for its division (the divisor is a count of the
  window's elements, worked out at prepare: no operation); a global average
  pool one per input element;
- add: one operation per output element for each input after the first;
- multiply: one per output element (a gate's broadcast is not counted);
- concatenation and channel selection (a shuffle or a slice): none, they
  move data and compute nothing;
- softmax: three per element (the exponential, its share of the sum and the
  division; subtracting the maximum first, for range, is not counted);
- batch normalisation (only before it is folded): two per element;
- activations are not counted, the newer ones (hardswish, hardsigmoid, silu,
  gelu) no more than relu;
- the transformer's layers (a token sequence of T tokens of C features is held
  as a (C, T, 1) map, and Swin's and MaxViT's token grids as their (C, H, W)
  map, so a Linear over tokens is a 1x1 convolution and counted as one):
  - layer normalisation over the channels of each pixel or token: seven per
    element (the mean's sum, the subtraction, the variance's square and sum,
    the product by 1 / sqrt(var + eps), the scale and the shift; the square
    root per token not counted);
  - tokens (the class token and the position embedding): one per element for
    the position's add (prepending the class token moves data);
  - attention, per window of n tokens (the whole map is one window) and C
    channels split into heads: the scores Q K^T and the weighted sum P V,
    2 * n * n * C each; per head n * n for the scaling, n * n for a relative
    position bias or a shifted window's mask where there is one, and the
    softmax's three per score (as the softmax layer's); cosine attention
    (Swin v2's) three more per element of the queries and the keys, 6 * n * C
    (the square, its share of the head's sum, the division by the norm; the
    square root per token and head not counted, as layer normalisation's);
    its scale per head is the scaling above;
  - a space-to-depth gather (Swin's patch merging), a crop and taking a token:
    none, they move data.

Activations, each elementwise (the oracle, compare/oracle.py, holds the formulas):
relu, relu6 = min(max(x, 0), 6), sigmoid, tanh; hardsigmoid = min(max(x/6 + 1/2, 0), 1),
PyTorch's and Keras 3's, which is ONNX's HardSigmoid with alpha 1/6 and beta 1/2 (not
ONNX's default alpha 0.2: importers refuse any other alpha or beta);
hardswish = x * hardsigmoid(x); silu = x * sigmoid(x) (Keras's swish);
gelu = x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2)), the exact form, and gelu_tanh =
x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), the tanh form (PyTorch's
approximate='tanh', Keras's approximate=True).

Pooling windows: a max-pool's padding never wins (as if it held -inf), so its
ceil mode (an extra window at the bottom or right that runs past the padded
input) is exactly more padding there, and the importers write it so.  An
average pool's divisor depends on what the window covers: `count_include_pad`
counts the padding, never the part of a ceil-mode window past it (PyTorch's
rule, which ONNX and Keras exports of these models follow); without it only
the input's own elements count (Keras's 'same').
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

NET_INPUT = "input"   # the name a layer uses for the net's input
COSINE_EPS = 1e-12    # a cosine attention's least norm of a query or key (torch's F.normalize)


class LayerKind(StrEnum):
    """What a layer computes.  A str, so `layer.kind == "conv"` holds."""

    CONV = "conv"
    SUBSAMPLE = "subsample"
    MAXPOOL = "maxpool"
    DENSE = "dense"
    ADD = "add"
    GLOBAL_AVGPOOL = "global_avgpool"
    BATCHNORM = "batchnorm"
    AVGPOOL = "avgpool"        # average pooling with padding or ceil mode (a plain one is a subsampling)
    CONCAT = "concat"          # along channels
    MUL = "mul"                # elementwise, or by a per-channel gate
    CHANNELS = "channels"      # a selection of channels: a shuffle, a slice
    SOFTMAX = "softmax"        # over each image's features
    # the transformer's kinds (issue 45); backends run them only where they say so
    LAYERNORM = "layernorm"    # over the channels of each pixel or token
    TOKENS = "tokens"          # a (C, H, W) map -> a (C, T, 1) sequence: class token, position embedding
    ATTENTION = "attention"    # multi-head scaled dot-product attention over windows of tokens
    SPACE_TO_DEPTH = "space_to_depth"   # Swin's patch merging gather
    CROP = "crop"              # Keras Cropping2D
    TAKE_TOKEN = "take_token"  # one token of a sequence (ViT's class token) as a (C, 1, 1) map


class Activation(StrEnum):
    NONE = "none"
    RELU = "relu"
    SIGMOID = "sigmoid"
    RELU6 = "relu6"   # min(max(x, 0), 6), MobileNet-v2's
    TANH = "tanh"
    HARDSIGMOID = "hardsigmoid"   # min(max(x/6 + 1/2, 0), 1): PyTorch's, Keras 3's (see the module docstring)
    HARDSWISH = "hardswish"       # x * hardsigmoid(x), MobileNet-v3's
    SILU = "silu"                 # x * sigmoid(x), EfficientNet's (Keras: swish)
    GELU = "gelu"                 # x * Phi(x), the exact form (erf)
    GELU_TANH = "gelu_tanh"       # its tanh approximation


class Feature(StrEnum):
    """What a layer may use beyond the study's chains; a backend lists the
    ones it runs (backends/base.py), the values are said in its refusals."""

    GRAPH = "an input other than the layer before"
    GROUPS = "grouped convolution"
    ASYMMETRIC_PAD = "asymmetric padding"
    POOL_PAD = "max-pool padding"
    RELU6 = "the relu6 activation"
    TANH = "the tanh activation"
    HARDSIGMOID = "the hardsigmoid activation"
    HARDSWISH = "the hardswish activation"
    SILU = "the silu activation"
    DILATION = "dilated convolution"
    GATE = "a multiply by a per-channel (N, C, 1, 1) gate"
    GELU = "the gelu activation"
    GELU_TANH = "the tanh form of gelu"
    COSINE_ATTENTION = "cosine attention (Swin v2's: queries and keys L2-normalised, a scale per head)"


ACTIVATIONS = tuple(a.value for a in Activation)
# the study's kinds and activations, which every backend runs
STUDY_KINDS = frozenset({LayerKind.CONV, LayerKind.SUBSAMPLE, LayerKind.MAXPOOL, LayerKind.DENSE})
STUDY_ACTIVATIONS = ("none", "relu", "sigmoid")
_ACTIVATION_FEATURE = {Activation.RELU6: Feature.RELU6, Activation.TANH: Feature.TANH,
                       Activation.HARDSIGMOID: Feature.HARDSIGMOID, Activation.HARDSWISH: Feature.HARDSWISH,
                       Activation.SILU: Feature.SILU, Activation.GELU: Feature.GELU,
                       Activation.GELU_TANH: Feature.GELU_TANH}
# issue 45's kinds and features: a backend that says `frozenset(LayerKind)` takes these away until it runs them
TRANSFORMER_KINDS = frozenset({LayerKind.LAYERNORM, LayerKind.TOKENS, LayerKind.ATTENTION, LayerKind.SPACE_TO_DEPTH,
                               LayerKind.CROP, LayerKind.TAKE_TOKEN})
TRANSFORMER_FEATURES = frozenset({Feature.GELU, Feature.GELU_TANH, Feature.COSINE_ATTENTION})
# the activations of the layers before issue 45, which the random nets of the tests draw from
ZOO_ACTIVATIONS = tuple(a.value for a in Activation if a not in (Activation.GELU, Activation.GELU_TANH))


def _out_size(size: int, kernel: int, stride: int, before: int, after: int, what: str) -> int:
    span = size + before + after - kernel
    if span < 0:
        raise ValueError(f"{what}: window {kernel} is larger than the padded input {size + before + after}")
    return span // stride + 1


def ceil_out_size(size: int, kernel: int, stride: int, before: int, after: int) -> int:
    """Outputs along one axis in ceil mode: one more window where the last would
    start inside the input (or its padding before) and run past the padding after."""
    span = size + before + after - kernel
    out = -(-span // stride) + 1
    return out - 1 if (out - 1) * stride >= size + before else out


def _padding(pad: tuple, what: str) -> tuple:
    """(rows, cols) or (top, left, bottom, right) -> the 2-tuple when symmetric, else the 4-tuple.
    So a backend that reads pad[0], pad[1] sees a 4-tuple only where it was refused one."""
    pad = tuple(int(p) for p in pad)
    if len(pad) == 2:
        pad = pad + pad
    if len(pad) != 4 or min(pad) < 0:
        raise ValueError(f"{what}: pad must be (rows, cols) or (top, left, bottom, right), at least 0; not {pad}")
    top, left, bottom, right = pad
    return (top, left) if (top, left) == (bottom, right) else pad


def window_pair(values, what: str, name: str = "") -> tuple:
    """A window's (rows, cols) kernel, stride or dilation as ints, each at least 1; ValueError naming
    `what` otherwise.  Every window layer and both model importers ask it before any arithmetic on
    the values (a zero stride divides by zero, a zero-sized window holds nothing)."""
    try:
        pair = tuple(int(v) for v in values)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: {what} must be two whole numbers (rows, cols), not {values!r}") from None
    if len(pair) != 2 or min(pair) < 1:
        raise ValueError(f"{name}: {what} must be (rows, cols), each at least 1; not {pair}")
    return pair


def _windowed(layer) -> None:
    """A window layer's kernel and stride checked and made tuples of ints (its __post_init__ calls this)."""
    object.__setattr__(layer, "kernel", window_pair(layer.kernel, "kernel", layer.name))
    object.__setattr__(layer, "stride", window_pair(layer.stride, "stride", layer.name))


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@dataclass(frozen=True)
class Layer:
    """Common part of every layer: a name, a fused activation, and the names of
    the layers it reads (empty: the layer before)."""

    name: str
    activation: str = "none"
    inputs: tuple = ()

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"{self.name}: activation must be one of {ACTIVATIONS}, not {self.activation!r}")
        object.__setattr__(self, "activation", Activation(self.activation))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        if self.name == NET_INPUT:
            raise ValueError(f"{NET_INPUT!r} names the net's input; a layer cannot be called so")

    kind = None   # each class's LayerKind (a class attribute, not a field)
    arity = 1     # how many inputs it reads
    flat_input = False   # True: it also reads a (features,) input (a dense layer's), flattening a C,H,W one

    def out_shape(self, in_shape: tuple) -> tuple:  # per image, without the batch
        raise NotImplementedError

    def out_shape_of(self, in_shapes: list) -> tuple:
        """The output shape for inputs of `in_shapes` (one per input, in order);
        a ValueError where they do not fit together (here: unless all are equal)."""
        if any(s != in_shapes[0] for s in in_shapes):
            raise ValueError(f"{self.name} ({self.kind}) adds inputs of different shapes {list(in_shapes)}")
        return tuple(self.out_shape(in_shapes[0]))

    def param_shapes(self, in_shape: tuple) -> dict[str, tuple]:
        return {}

    def flops(self, in_shape: tuple) -> int:  # per image
        raise NotImplementedError

    def params(self, in_shape: tuple) -> int:
        return sum(_size(shape) for shape in self.param_shapes(in_shape).values())

    def features(self) -> frozenset:
        """What of Feature this layer uses (its inputs are the net's business)."""
        extra = _ACTIVATION_FEATURE.get(self.activation)
        return frozenset({extra}) if extra else frozenset()


@dataclass(frozen=True)
class Conv(Layer):
    """2-D convolution (cross-correlation) with bias; weight is (K, C / groups, FH, FW).
    pad is (rows, cols) or (top, left, bottom, right); groups split the input
    and output channels into that many independent convolutions (groups == C:
    depthwise); dilation (rows, cols) spaces the filter's taps that far apart,
    so a window spans (FH - 1) * dilation + 1 rows."""

    kind = LayerKind.CONV

    out_channels: int = 1
    kernel: tuple = (3, 3)
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    groups: int = 1
    dilation: tuple = (1, 1)

    def __post_init__(self):
        super().__post_init__()
        _windowed(self)
        object.__setattr__(self, "pad", _padding(self.pad, self.name))
        object.__setattr__(self, "dilation", tuple(int(d) for d in self.dilation))
        if self.out_channels < 1:
            raise ValueError(f"{self.name}: out_channels must be at least 1, not {self.out_channels}")
        if self.groups < 1 or self.out_channels % self.groups:
            raise ValueError(f"{self.name}: {self.out_channels} output channels do not split into "
                             f"{self.groups} groups")
        if len(self.dilation) != 2 or min(self.dilation) < 1:
            raise ValueError(f"{self.name}: dilation must be (rows, cols), at least 1; not {self.dilation}")

    @property
    def span(self) -> tuple:
        """The rows and columns a window covers, its dilation included."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilation))

    @property
    def padding(self) -> tuple:
        """(top, left, bottom, right)."""
        return self.pad if len(self.pad) == 4 else self.pad + self.pad

    def out_shape(self, in_shape):
        c, h, w = in_shape
        if c % self.groups:
            raise ValueError(f"{self.name}: {c} input channels do not split into {self.groups} groups")
        top, left, bottom, right = self.padding
        fh, fw = self.span
        return (self.out_channels,
                _out_size(h, fh, self.stride[0], top, bottom, self.name),
                _out_size(w, fw, self.stride[1], left, right, self.name))

    def param_shapes(self, in_shape):
        return {"weight": (self.out_channels, in_shape[0] // self.groups) + tuple(self.kernel),
                "bias": (self.out_channels,)}

    def flops(self, in_shape):
        k, oh, ow = self.out_shape(in_shape)
        return 2 * k * (in_shape[0] // self.groups) * self.kernel[0] * self.kernel[1] * oh * ow

    def features(self):
        extra = {Feature.GROUPS} if self.groups != 1 else set()
        if len(self.pad) == 4:
            extra.add(Feature.ASYMMETRIC_PAD)
        if self.dilation != (1, 1):
            extra.add(Feature.DILATION)
        return super().features() | extra


@dataclass(frozen=True)
class Subsample(Layer):
    """LeNet's subsampling: mean of each k x k window of one channel, times a
    per-channel coefficient, plus a per-channel bias (LeCun et al. 1998)."""

    kind = LayerKind.SUBSAMPLE

    kernel: tuple = (2, 2)
    stride: tuple = (2, 2)

    def __post_init__(self):
        super().__post_init__()
        _windowed(self)

    def out_shape(self, in_shape):
        c, h, w = in_shape
        return (c, _out_size(h, self.kernel[0], self.stride[0], 0, 0, self.name),
                _out_size(w, self.kernel[1], self.stride[1], 0, 0, self.name))

    def param_shapes(self, in_shape):
        return {"coeff": (in_shape[0],), "bias": (in_shape[0],)}

    def flops(self, in_shape):
        c, oh, ow = self.out_shape(in_shape)
        return c * oh * ow * (self.kernel[0] * self.kernel[1] + 2)


@dataclass(frozen=True)
class MaxPool(Layer):
    """Max of each window; padding (as Conv's) never wins, as if it held -inf."""

    kind = LayerKind.MAXPOOL

    kernel: tuple = (2, 2)
    stride: tuple = (2, 2)
    pad: tuple = (0, 0)

    def __post_init__(self):
        super().__post_init__()
        _windowed(self)
        object.__setattr__(self, "pad", _padding(self.pad, self.name))
        top, left, bottom, right = self.padding
        if max(top, bottom) >= self.kernel[0] or max(left, right) >= self.kernel[1]:
            raise ValueError(f"{self.name}: padding {self.padding} as wide as the window {self.kernel} "
                             f"makes windows of padding alone")

    @property
    def padding(self) -> tuple:
        """(top, left, bottom, right)."""
        return self.pad if len(self.pad) == 4 else self.pad + self.pad

    def out_shape(self, in_shape):
        c, h, w = in_shape
        top, left, bottom, right = self.padding
        return (c, _out_size(h, self.kernel[0], self.stride[0], top, bottom, self.name),
                _out_size(w, self.kernel[1], self.stride[1], left, right, self.name))

    def flops(self, in_shape):
        c, oh, ow = self.out_shape(in_shape)
        return c * oh * ow * self.kernel[0] * self.kernel[1]

    def features(self):
        return super().features() | ({Feature.POOL_PAD} if any(self.padding) else set())


@dataclass(frozen=True)
class Dense(Layer):
    """Fully connected: y = x @ weight + bias, weight is (in, out)."""

    kind = LayerKind.DENSE
    flat_input = True

    out_features: int = 1

    def out_shape(self, in_shape):
        return (self.out_features,)

    def param_shapes(self, in_shape):
        return {"weight": (_size(in_shape), self.out_features), "bias": (self.out_features,)}

    def flops(self, in_shape):
        return 2 * self.param_shapes(in_shape)["weight"][0] * self.out_features


@dataclass(frozen=True)
class Add(Layer):
    """The elementwise sum of its inputs (a residual connection), then its activation.
    It names its inputs, two or more, all of one shape."""

    kind = LayerKind.ADD

    def __post_init__(self):
        super().__post_init__()
        if len(self.inputs) < 2:
            raise ValueError(f"{self.name}: an add names the two or more layers it sums, not {self.inputs}")

    @property
    def arity(self):
        return len(self.inputs)

    def out_shape(self, in_shape):
        return tuple(in_shape)

    def flops(self, in_shape):
        return (len(self.inputs) - 1) * _size(in_shape)


@dataclass(frozen=True)
class GlobalAvgPool(Layer):
    """The mean of each channel: (C, H, W) -> (C, 1, 1)."""

    kind = LayerKind.GLOBAL_AVGPOOL

    def out_shape(self, in_shape):
        return (in_shape[0], 1, 1)

    def flops(self, in_shape):
        return _size(in_shape)


@dataclass(frozen=True)
class BatchNorm(Layer):
    """Inference batch normalisation per channel: (x - mean) / sqrt(var + eps) * scale + bias.
    Only an imported model holds one, until nets/batchnorm.py folds it into the
    convolution before it."""

    kind = LayerKind.BATCHNORM

    eps: float = 1e-5

    def __post_init__(self):
        super().__post_init__()
        if not (math.isfinite(self.eps) and self.eps >= 0):
            raise ValueError(f"{self.name}: epsilon must be a finite number, 0 or more; not {self.eps}")

    def out_shape(self, in_shape):
        return tuple(in_shape)

    def param_shapes(self, in_shape):
        c = in_shape[0]
        return {"scale": (c,), "bias": (c,), "mean": (c,), "var": (c,)}

    def flops(self, in_shape):
        return 2 * _size(in_shape)


@dataclass(frozen=True)
class AvgPool(Layer):
    """The mean of each window of one channel, with padding (as Conv's) and ceil
    mode; the divisor per output is what `count_include_pad` says (the module
    docstring).  A plain average pool (no padding, no ceil-mode window) is
    imported as a Subsample of coefficient 1, which every backend runs."""

    kind = LayerKind.AVGPOOL

    kernel: tuple = (2, 2)
    stride: tuple = (2, 2)
    pad: tuple = (0, 0)
    ceil_mode: bool = False
    count_include_pad: bool = True

    def __post_init__(self):
        super().__post_init__()
        _windowed(self)
        object.__setattr__(self, "pad", _padding(self.pad, self.name))
        object.__setattr__(self, "ceil_mode", bool(self.ceil_mode))
        object.__setattr__(self, "count_include_pad", bool(self.count_include_pad))
        top, left, bottom, right = self.padding
        if max(top, bottom) >= self.kernel[0] or max(left, right) >= self.kernel[1]:
            raise ValueError(f"{self.name}: padding {self.padding} as wide as the window {self.kernel} "
                             f"makes windows of padding alone")

    @property
    def padding(self) -> tuple:
        """(top, left, bottom, right)."""
        return self.pad if len(self.pad) == 4 else self.pad + self.pad

    def out_shape(self, in_shape):
        c, h, w = in_shape
        top, left, bottom, right = self.padding
        if self.ceil_mode:
            return (c, ceil_out_size(h, self.kernel[0], self.stride[0], top, bottom),
                    ceil_out_size(w, self.kernel[1], self.stride[1], left, right))
        return (c, _out_size(h, self.kernel[0], self.stride[0], top, bottom, self.name),
                _out_size(w, self.kernel[1], self.stride[1], left, right, self.name))

    def overhang(self, in_shape) -> tuple:
        """(bottom, right): how far the last ceil-mode window runs past the padding (never counted)."""
        _, oh, ow = self.out_shape(in_shape)
        top, left, bottom, right = self.padding
        return (max(0, (oh - 1) * self.stride[0] + self.kernel[0] - (in_shape[1] + top + bottom)),
                max(0, (ow - 1) * self.stride[1] + self.kernel[1] - (in_shape[2] + left + right)))

    def divisors(self, in_shape) -> np.ndarray:
        """(OH, OW) float32: each output's divisor, the window's elements that count."""
        _, h, w = in_shape
        _, oh, ow = self.out_shape(in_shape)
        top, left, bottom, right = self.padding
        counted = [(-top, h + bottom), (-left, w + right)] if self.count_include_pad else [(0, h), (0, w)]

        def along(n_out, k, s, before, lo_hi):
            lo, hi = lo_hi
            starts = np.arange(n_out) * s - before
            return np.minimum(starts + k, hi) - np.maximum(starts, lo)
        rows = along(oh, self.kernel[0], self.stride[0], top, counted[0])
        cols = along(ow, self.kernel[1], self.stride[1], left, counted[1])
        return np.outer(rows, cols).astype(np.float32)

    def flops(self, in_shape):
        c, oh, ow = self.out_shape(in_shape)
        return c * oh * ow * (self.kernel[0] * self.kernel[1] + 1)


@dataclass(frozen=True)
class Concat(Layer):
    """Its inputs, two or more of one height and width, side by side along the
    channels in the order named; then its activation."""

    kind = LayerKind.CONCAT

    def __post_init__(self):
        super().__post_init__()
        if len(self.inputs) < 2:
            raise ValueError(f"{self.name}: a concatenation names the two or more layers it joins, not {self.inputs}")

    @property
    def arity(self):
        return len(self.inputs)

    def out_shape_of(self, in_shapes):
        if any(len(s) != 3 or s[1:] != in_shapes[0][1:] for s in in_shapes):
            raise ValueError(f"{self.name} (concat) joins inputs of different heights and widths {list(in_shapes)}")
        return (sum(s[0] for s in in_shapes),) + tuple(in_shapes[0][1:])

    def out_shape(self, in_shape):
        raise ValueError(f"{self.name}: a concatenation's shape depends on all its inputs (out_shape_of)")

    def flops(self, in_shape):
        return 0

    @staticmethod
    def offsets(in_shapes: list) -> list[int]:
        """The first channel of each input in the output."""
        out, at = [], 0
        for s in in_shapes:
            out.append(at)
            at += s[0]
        return out


@dataclass(frozen=True)
class Mul(Layer):
    """The elementwise product of its two inputs, then its activation: of one
    shape, or the second an (N, C, 1, 1) gate that scales each channel of the
    first (squeeze-and-excitation)."""

    kind = LayerKind.MUL
    arity = 2

    def __post_init__(self):
        super().__post_init__()
        if len(self.inputs) != 2:
            raise ValueError(f"{self.name}: a multiply names the two layers it multiplies, not {self.inputs}")

    def out_shape_of(self, in_shapes):
        x, g = in_shapes
        if g != x and tuple(g) != (x[0], 1, 1):
            raise ValueError(f"{self.name} (mul) multiplies shapes {list(in_shapes)}; the second must be the "
                             f"first's, or ({x[0]}, 1, 1), a gate per channel")
        return tuple(x)

    def out_shape(self, in_shape):
        return tuple(in_shape)

    @staticmethod
    def is_gate(in_shapes: list) -> bool:
        return tuple(in_shapes[1]) != tuple(in_shapes[0])

    def flops(self, in_shape):
        return _size(in_shape)


@dataclass(frozen=True)
class Channels(Layer):
    """A selection of its input's channels: output channel j is input channel
    order[j].  A channel shuffle is a permutation, a slice (Split, chunk) a
    range; importers fold one into the convolution that reads it where they can."""

    kind = LayerKind.CHANNELS

    order: tuple = ()

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "order", tuple(int(c) for c in self.order))
        if not self.order or min(self.order) < 0:
            raise ValueError(f"{self.name}: order must list the input channels to keep, not {self.order}")

    def out_shape(self, in_shape):
        if max(self.order) >= in_shape[0]:
            raise ValueError(f"{self.name}: order names channel {max(self.order)} of an input of {in_shape[0]}")
        return (len(self.order),) + tuple(in_shape[1:])

    def flops(self, in_shape):
        return 0

    def runs(self) -> list[tuple[int, int, int]]:
        """(first input channel, first output channel, count) of each run of consecutive channels."""
        out = []
        for j, c in enumerate(self.order):
            if out and out[-1][0] + out[-1][2] == c:
                out[-1] = (out[-1][0], out[-1][1], out[-1][2] + 1)
            else:
                out.append((c, j, 1))
        return out


@dataclass(frozen=True)
class Softmax(Layer):
    """exp(x - max) / sum over each image's features (a C,H,W input flattened
    in that order, as a dense layer reads it); the classifier's last layer."""

    kind = LayerKind.SOFTMAX
    flat_input = True

    def __post_init__(self):
        super().__post_init__()
        if self.activation != "none":
            raise ValueError(f"{self.name}: a softmax carries no activation of its own")

    def out_shape(self, in_shape):
        return (_size(in_shape),)

    def flops(self, in_shape):
        return 3 * _size(in_shape)


@dataclass(frozen=True)
class LayerNorm(Layer):
    """Layer normalisation over the channels of each pixel or token:
    (x - mean) / sqrt(var + eps) * scale + bias, mean and (biased) var over C.
    A transformer's tokens are a (C, T, 1) map, ConvNeXt's and Swin's (C, H, W)
    maps are normalised at each pixel as PyTorch's channels-last LayerNorm does."""

    kind = LayerKind.LAYERNORM

    eps: float = 1e-5

    def out_shape(self, in_shape):
        return tuple(in_shape)

    def param_shapes(self, in_shape):
        return {"scale": (in_shape[0],), "bias": (in_shape[0],)}

    def flops(self, in_shape):
        return 7 * _size(in_shape)


@dataclass(frozen=True)
class Tokens(Layer):
    """A (C, H, W) map of patches as a sequence of tokens, a (C, T, 1) map:
    the pixels in row-major order (ViT's flatten), after a learned class token
    where `class_token` (param "cls", (C,)), and plus a learned position
    embedding where `position` (param "pos", (C, T))."""

    kind = LayerKind.TOKENS

    class_token: bool = True
    position: bool = True

    def out_shape(self, in_shape):
        c, h, w = in_shape
        return (c, h * w + (1 if self.class_token else 0), 1)

    def param_shapes(self, in_shape):
        c, t, _ = self.out_shape(in_shape)
        return ({"cls": (c,)} if self.class_token else {}) | ({"pos": (c, t)} if self.position else {})

    def flops(self, in_shape):
        return _size(self.out_shape(in_shape)) if self.position else 0


@dataclass(frozen=True)
class TakeToken(Layer):
    """Token `index` of a (C, T, 1) sequence (ViT's class token) as a (C, 1, 1) map."""

    kind = LayerKind.TAKE_TOKEN

    index: int = 0

    def out_shape(self, in_shape):
        c, t, w = in_shape
        if w != 1 or not 0 <= self.index < t:
            raise ValueError(f"{self.name}: token {self.index} of a sequence of shape {tuple(in_shape)}, "
                             f"which holds tokens 0..{t - 1} as (C, T, 1)")
        return (c, 1, 1)

    def flops(self, in_shape):
        return 0


@dataclass(frozen=True)
class Attention(Layer):
    """Multi-head scaled dot-product attention.  Its input is a (3C, H, W) map
    of queries, keys and values (channels 0..C-1, C..2C-1, 2C..3C-1: one 1x1
    convolution before it projects all three, as PyTorch's in_proj); each is
    split into `heads` of C / heads channels.  Its output is the (C, H, W)
    map of every head's weighted sum, heads in order (the projection after it
    is another 1x1 convolution).

    The tokens that attend to one another form windows: `window` (rows, cols)
    tiles the map into windows of that many tokens (0, 0: the whole map, ViT's);
    with `grid`, a window is instead every (H / rows)-th row and (W / cols)-th
    column (MaxViT's grid attention).  `shift` (rows, cols) rolls the map up
    and left before the windows are cut and back after (Swin's shifted
    windows): in the last row (column) of windows, the rows (columns) that the
    roll brought round from the top (left) and those it did not attend only
    among themselves (Swin's mask, which adds -100 to the other scores; here
    they are left out, which differs by less than exp(-100)).  Scores are q.k * scale (0: 1/sqrt(C /
    heads)), plus param "bias" (heads, n, n) where `position_bias` (Swin's and
    MaxViT's relative position bias, gathered from its table by the importer),
    then softmax over the keys.

    With `cosine` (Swin v2's attention), each head's query and key are first
    divided by their L2 norm over the head's channels (at least COSINE_EPS, as
    torch's F.normalize), and a query's scores are multiplied by its head's
    param "cosine_scale" (heads,) instead of `scale` (Swin v2's
    exp(min(logit_scale, log 100)), worked out by the importer)."""

    kind = LayerKind.ATTENTION

    heads: int = 1
    window: tuple = (0, 0)
    shift: tuple = (0, 0)
    grid: bool = False
    position_bias: bool = False
    scale: float = 0.0
    cosine: bool = False

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "window", tuple(int(v) for v in self.window))
        object.__setattr__(self, "shift", tuple(int(v) for v in self.shift))
        if self.heads < 1:
            raise ValueError(f"{self.name}: heads must be at least 1, not {self.heads}")
        if len(self.window) != 2 or min(self.window) < 0 or (0 in self.window and self.window != (0, 0)):
            raise ValueError(f"{self.name}: window must be (rows, cols), both positive, or (0, 0) for the whole "
                             f"map; not {self.window}")
        if len(self.shift) != 2 or min(self.shift) < 0 or (any(self.shift) and (self.grid or self.window == (0, 0))):
            raise ValueError(f"{self.name}: shift {self.shift} must be (rows, cols) at least 0, and only of "
                             f"windows (not the whole map, not a grid)")
        if self.activation != "none":
            raise ValueError(f"{self.name}: attention carries no activation of its own")
        if self.cosine and self.scale:
            raise ValueError(f"{self.name}: a cosine attention's scale is per head (param cosine_scale), not "
                             f"scale={self.scale}")

    def windows(self, in_shape) -> tuple:
        """(rows, cols) of a window on an input of `in_shape` (the whole map for (0, 0))."""
        _, h, w = in_shape
        return (h, w) if self.window == (0, 0) else self.window

    def keep(self, in_shape) -> np.ndarray | None:
        """(windows, n, n): True where a window's query reads a key, after the shift (None: unshifted,
        every key).  Windows row by row, tokens row-major in each, as the oracle takes them."""
        if not any(self.shift):
            return None
        _, h, w = in_shape
        wh, ww = self.windows(in_shape)

        def regions(size, k, s):
            r = np.arange(size)
            return np.where(r < size - k, 0, np.where(r < size - s, 1, 2)) if s else np.zeros(size, int)
        label = regions(h, wh, self.shift[0])[:, None] * 3 + regions(w, ww, self.shift[1])[None, :]
        lab = label.reshape(h // wh, wh, w // ww, ww).transpose(0, 2, 1, 3).reshape(-1, wh * ww)
        return lab[:, :, None] == lab[:, None, :]

    def window_pixels(self, in_shape) -> np.ndarray:
        """(windows, n): each window's tokens as flat pixel indices (row * W + col) of the map, windows
        and tokens in the oracle's order, the shift's roll included."""
        _, h, w = in_shape
        wh, ww = self.windows(in_shape)
        rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        if self.grid:
            pick = lambda a: a.reshape(wh, h // wh, ww, w // ww).transpose(1, 3, 0, 2)   # noqa: E731
        else:
            pick = lambda a: a.reshape(h // wh, wh, w // ww, ww).transpose(0, 2, 1, 3)   # noqa: E731
        r = (pick(rows) + self.shift[0]) % h
        c = (pick(cols) + self.shift[1]) % w
        return (r * w + c).reshape(-1, wh * ww)

    def added_scores(self, in_shape, bias: np.ndarray | None) -> np.ndarray | None:
        """(windows or 1, heads, n, n) float32: what is added to the scaled scores, the position bias and
        -inf where the shift's mask leaves a key out; None where nothing is."""
        keep = self.keep(in_shape)
        if bias is None and keep is None:
            return None
        wh, ww = self.windows(in_shape)
        n = wh * ww
        out = np.zeros((1 if keep is None else len(keep), self.heads, n, n), np.float32)
        if bias is not None:
            out += np.asarray(bias, np.float32)[None]
        if keep is not None:
            out[np.broadcast_to(~keep[:, None], out.shape)] = -np.inf
        return out

    def head_scale(self, in_shape) -> float:
        """The factor of the scores q.k; 1 for a cosine layer, whose backends fold each head's
        cosine_scale into its normalised queries (normalised_qk)."""
        if self.cosine:
            return 1.0
        return self.scale or 1.0 / float(np.sqrt(in_shape[0] // 3 // self.heads))

    def features(self):
        return super().features() | ({Feature.COSINE_ATTENTION} if self.cosine else set())

    def out_shape(self, in_shape):
        c3, h, w = in_shape
        if c3 % (3 * self.heads):
            raise ValueError(f"{self.name}: {c3} channels are not queries, keys and values of {self.heads} "
                             f"heads each (a multiple of {3 * self.heads})")
        wh, ww = self.windows(in_shape)
        if h % wh or w % ww:
            raise ValueError(f"{self.name}: windows of {wh}x{ww} do not tile a {h}x{w} map")
        if self.shift[0] >= wh or self.shift[1] >= ww:
            raise ValueError(f"{self.name}: shift {self.shift} must be less than the window {(wh, ww)}")
        return (c3 // 3, h, w)

    def param_shapes(self, in_shape):
        shapes = {}
        if self.position_bias:
            wh, ww = self.windows(in_shape)
            shapes["bias"] = (self.heads, wh * ww, wh * ww)
        if self.cosine:
            shapes["cosine_scale"] = (self.heads,)
        return shapes

    def flops(self, in_shape):
        c, h, w = self.out_shape(in_shape)
        wh, ww = self.windows(in_shape)
        n, count = wh * ww, (h // wh) * (w // ww)
        per_head = n * n * (1 + 3 + (1 if self.position_bias or any(self.shift) else 0))
        return count * (4 * n * n * c + self.heads * per_head + (6 * n * c if self.cosine else 0))


@dataclass(frozen=True)
class SpaceToDepth(Layer):
    """Each `block` (rows, cols) of pixels as one pixel of their channels side by
    side: output channel q * C + c is input channel c at offset order[q] (dy, dx)
    of the block.  Swin's patch merging concatenates x[0::2, 0::2], x[1::2, 0::2],
    x[0::2, 1::2], x[1::2, 1::2]: order ((0, 0), (1, 0), (0, 1), (1, 1))."""

    kind = LayerKind.SPACE_TO_DEPTH

    block: tuple = (2, 2)
    order: tuple = ((0, 0), (1, 0), (0, 1), (1, 1))

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "block", tuple(int(b) for b in self.block))
        object.__setattr__(self, "order", tuple((int(dy), int(dx)) for dy, dx in self.order))
        bh, bw = self.block
        every = sorted((dy, dx) for dy in range(bh) for dx in range(bw))
        if min(self.block) < 1 or sorted(self.order) != every:
            raise ValueError(f"{self.name}: order must list each offset of a {bh}x{bw} block once, not {self.order}")

    def out_shape(self, in_shape):
        c, h, w = in_shape
        bh, bw = self.block
        if h % bh or w % bw:
            raise ValueError(f"{self.name}: blocks of {bh}x{bw} do not tile a {h}x{w} map")
        return (c * bh * bw, h // bh, w // bw)

    def flops(self, in_shape):
        return 0


@dataclass(frozen=True)
class Crop(Layer):
    """The map less `crop` (top, left, bottom, right) rows and columns (Keras Cropping2D)."""

    kind = LayerKind.CROP

    crop: tuple = (0, 0, 0, 0)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "crop", tuple(int(v) for v in self.crop))
        if len(self.crop) != 4 or min(self.crop) < 0:
            raise ValueError(f"{self.name}: crop must be (top, left, bottom, right), at least 0; not {self.crop}")

    def out_shape(self, in_shape):
        c, h, w = in_shape
        top, left, bottom, right = self.crop
        if top + bottom >= h or left + right >= w:
            raise ValueError(f"{self.name}: cropping {self.crop} leaves nothing of a {h}x{w} map")
        return (c, h - top - bottom, w - left - right)

    def flops(self, in_shape):
        return 0


@dataclass(frozen=True)
class Net:
    """A named graph of layers with a fixed per-image input shape; its output is the last layer's."""

    name: str
    input_shape: tuple  # (C, H, W)
    layers: tuple
    default_batch: int = 1
    description: str = ""
    fixed_batch: int | None = None   # the only batch it runs at: an imported model whose graph fixes it
    # the ONNX file it was imported from ("" for any other net): a peer that reads ONNX itself (opencv) runs
    # the user's file as given; not part of the net's identity
    model_file: str = field(default="", compare=False)
    shapes: tuple = field(init=False, repr=False, compare=False)    # input, then each layer's output
    _sources: tuple = field(init=False, repr=False, compare=False)  # per layer: indices read, -1 the input

    def __post_init__(self):
        index = {NET_INPUT: -1}
        shapes = [tuple(self.input_shape)]
        sources = []
        for i, layer in enumerate(self.layers):
            if layer.name in index:
                raise ValueError(f"net {self.name}: layer names must be unique ({layer.name!r} twice)")
            names = layer.inputs or ((self.layers[i - 1].name if i else NET_INPUT),)
            missing = [n for n in names if n not in index]
            if missing:
                raise ValueError(f"net {self.name}: {layer.name} reads {missing[0]!r}, which is neither "
                                 f"{NET_INPUT!r} nor a layer before it")
            src = tuple(index[n] for n in names)
            in_shapes = [shapes[s + 1] for s in src]
            if not layer.flat_input and any(len(s) != 3 for s in in_shapes):
                raise ValueError(f"net {self.name}: {layer.name} ({layer.kind}) needs a C,H,W input, "
                                 f"but follows a dense layer")
            if len(src) != layer.arity:
                raise ValueError(f"net {self.name}: {layer.name} ({layer.kind}) reads {layer.arity} input(s), "
                                 f"not {len(src)}")
            try:
                shapes.append(tuple(layer.out_shape_of(in_shapes)))
            except ValueError as exc:
                raise ValueError(f"net {self.name}: {exc}") from None
            sources.append(src)
            index[layer.name] = i
        object.__setattr__(self, "shapes", tuple(shapes))
        object.__setattr__(self, "_sources", tuple(sources))

    def sources(self, i: int) -> tuple:
        """The indices of the layers layer i reads, in order; -1 is the net's input."""
        return self._sources[i]

    def in_shape(self, i: int) -> tuple:
        """The shape of layer i's (first) input."""
        return self.shapes[self._sources[i][0] + 1]

    def in_shapes(self, i: int) -> list:
        """The shapes of all of layer i's inputs, in order."""
        return [self.shapes[s + 1] for s in self._sources[i]]

    def out_shape(self, i: int) -> tuple:
        return self.shapes[i + 1]

    @property
    def output_shape(self) -> tuple:
        return self.shapes[-1]

    @property
    def is_chain(self) -> bool:
        """Every layer reads the one before it (the first: the input)."""
        return all(src == (i - 1,) for i, src in enumerate(self._sources))

    def layer_features(self, i: int) -> frozenset:
        """What of Feature layer i uses, its inputs included."""
        extra = {Feature.GRAPH} if self._sources[i] != (i - 1,) else set()
        if self.layers[i].kind == LayerKind.MUL and Mul.is_gate(self.in_shapes(i)):
            extra.add(Feature.GATE)
        return self.layers[i].features() | extra

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
                "kind": layer.kind.value,
                "activation": layer.activation.value,
                "in_shape": list(self.in_shape(i)),
                "out_shape": list(self.out_shape(i)),
                "params": layer.params(self.in_shape(i)),
                "flops": batch * layer.flops(self.in_shape(i)),
                "category": layer_category(layer, self.in_shape(i)),
            })
        return rows


def layer_category(layer: Layer, in_shape: tuple) -> str:
    """The kind of work a layer is, as the per-kind tables group it: a 1x1
    convolution is a plain GEMM, a depthwise one a batch of tiny ones, a 3x3
    one an im2col GEMM; dense layers, adds and every pooling stand apart."""
    if layer.kind == LayerKind.CONV:
        window = f"{layer.kernel[0]}x{layer.kernel[1]}"
        if layer.groups == 1:
            return f"conv {window}"
        if layer.groups == in_shape[0] == layer.out_channels:
            return f"depthwise {window}"
        return f"grouped conv {window}"
    if layer.kind in (LayerKind.MAXPOOL, LayerKind.SUBSAMPLE, LayerKind.GLOBAL_AVGPOOL, LayerKind.AVGPOOL):
        return "pooling"
    return str(layer.kind.value)
