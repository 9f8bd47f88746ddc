"""Layers shaped for a CPU's vector units (kernels/cpu_conv.cl): convs, depthwise
convs, LeNet's subsamplings, max-pools and dense layers, a form `vectorised` and
`vectorised-tiled` measure at prepare against the form they would otherwise run
(direct, Winograd, blocked 1x1, tiled, float4 pooling and GEMV) and keep where faster.

On PoCL a work-group is a loop over its work-items on one core, and PoCL's
vectoriser widens that loop only where the kernel is scalar code with no
inner loop of its own; `vectorised`'s float4 kernels get neither, so they
run at half an AVX2 register and a quarter of an AVX-512 one.  Here one
work-item holds a register tile of RP output pixels x NV vectors of VW
output channels, VW the device's preferred float vector width
(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT: 8 on AVX2, 16 on AVX-512), so that
every multiply-add is a full-width vector instruction and each weight
vector loaded feeds RP pixels; the input's padding channels are skipped
(LeNet's C1 reads 1 channel of the 4 stored).  A depthwise conv (a
subsampling is one whose taps weigh coeff / taps; a max-pool the same
with max for multiply-add) holds RP neighbouring columns of VW channels;
a dense layer is a conv of one pixel an image.

A conv of fewer output channels than VW (LeNet's C1: 6, stored as 8) would leave most of
those lanes idle; where it reads the net's input and no add reads its output, conv_row_vec is
offered too, its vector along the output row: VW neighbouring columns of RY rows a work-item,
every output channel (row_variants(); step "vector conv along x VW px RY rows").  (On LeNet's
S2, a subsampling, the same along x measured level with dw_vec: not kept.)

The variants (RP, NV) come from the vector width and the layer's shape
(variants(), dw_variants()); each is built, run on one random input and
checked against the layer computed in float64 on the host, one whose
relative L2 error exceeds MAX_REL_L2 (or that the compiler refuses) is
refused, and the rest are timed against the form already chosen with
their launches (measured.py); the fastest runs.  `config["cpu_conv"]`
records per layer every form's time and error, and the step is named
"vector conv VWxNV RP px" (depthwise, subsample, maxpool, dense).  No
device name decides: they are offered where the device prefers float
vectors of MIN_WIDTH or more (PoCL on AVX2 or AVX-512), not where it
prefers float4 or narrower, where `vectorised`'s kernels already fit
(NVIDIA reports 1, Oclgrind 1).

`cpu_conv` (the nets' argument): "measured" (the default; not where the
caller forced another form, winograd="F2" or pointwise="always", or
narrowed vectorised-tiled's tiles), "never", "always" (the first variant
wherever it applies, unmeasured and unchecked here: the tests check each
variant against the oracle so), or a variant "VW,NV,RP".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import choose_local
from ..reference.numpy_backend import _activate, _conv
from .filters import dense_rows, depthwise_filters, is_depthwise, pad_to
from .layout import round_up
from .measured import HOW, fastest_ms, outputs_on, rel_l2
from .net import KernelOp
from .pointwise import PointwiseOp
from .residual import ResidualConvOp
from .vectors import vector_width
from .winograd import WinogradOp
from .winograd_gemm import WinogradGemmOp

SOURCE = "cpu_conv.cl"
MAX_REL_L2 = 1e-5   # as Winograd's: a tenth of the float32 tolerance
SEED = 46
MIN_WIDTH = 8       # offered where the device prefers vectors at least this wide (float4 is vectorised's)
# (pixels, vectors) per work-item, in order of preference: AVX2 has 16 vector registers, so at
# most 8 accumulators beside the weight vectors and the broadcast input; measured on
# ResNet-18's convs (AVX2), (6, 2) ran up to 1.6x slower than (4, 2)
TILES = ((4, 2), (8, 1))
DW_PIXELS = (4, 8)  # depthwise: output columns per work-item (their input vectors are registers too)
MAX_WASTE = 0.125   # output channels a variant may compute past the stored ones
# (channel blocks, pixel blocks) per work-group: a work-group is a loop on one core, its
# work-items along id 0 reading the same pixels' inputs (in L1) with other weights
SHAPES = ((4, 4), (8, 4), (2, 8), (4, 2), (2, 2), (2, 1), (1, 1))
# conv_row_vec (along the output row, for fewer output channels than the vector): rows per work-item,
# in order of preference, and the accumulators (rows x channels) a work-item may hold beside its input
# vector: AVX-512 has 32 vector registers, AVX2 16
ROW_TILES = (4, 2, 1)
ROW_ACCUMULATORS = {8: 12, 16: 24}


def parse_mode(mode: str):
    """"measured", "never", "always" (each layer's first variant), or "VW,NV,RP": that variant
    wherever it applies (a depthwise conv takes RP, and VW or the widest below it that divides its
    channels); a Variant for the last."""
    if mode in ("measured", "never", "always"):
        return mode
    try:
        vw, nv, rp = (int(v) for v in mode.split(","))
        return Variant(vw, nv, rp)
    except ValueError:
        raise ValueError(f"cpu_conv {mode!r}: measured, never, always, or a variant 'VW,NV,RP' "
                         f"(VW 4, 8 or 16)") from None


@dataclass(frozen=True)
class Variant:
    vw: int   # floats per vector
    nv: int   # vectors per work-item along output channels
    rp: int   # output pixels per work-item

    def __post_init__(self):
        if self.vw not in (4, 8, 16) or self.nv < 1 or self.rp < 1:
            raise ValueError(f"variant {self}: VW 4, 8 or 16, NV and RP at least 1")

    @property
    def kw(self) -> int:
        return self.vw * self.nv

    @property
    def label(self) -> str:
        return f"{self.vw}x{self.nv} {self.rp} px"


def variants(vw: int, channels_stored: int, pixels: int) -> list[Variant]:
    """The variants for a conv (or dense layer) of `channels_stored` output channels and
    `pixels` outputs a channel (images x rows x columns): of the tiles no taller than the
    pixels (else one pixel a work-item), those whose channel block wastes at most MAX_WASTE,
    else the least wasteful."""
    every = [Variant(vw, nv, rp) for rp, nv in TILES if rp <= pixels] or [Variant(vw, nv, 1) for nv in (2, 1)]
    waste = {v: round_up(channels_stored, v.kw) / channels_stored - 1 for v in every}
    fit = [v for v in every if waste[v] <= MAX_WASTE]
    if fit:
        return fit
    least = min(waste.values())
    return [v for v in every if waste[v] == least]


def dw_variants(vw: int, channels_stored: int) -> list[Variant]:
    """The variants for a depthwise conv: the widest vector up to `vw` that divides the channels
    (a vector never reaches past a pixel's), each number of columns."""
    while channels_stored % vw:
        vw //= 2
    return [Variant(vw, 1, rp) for rp in DW_PIXELS]


@dataclass(frozen=True)
class RowVariant:
    """conv_row_vec's: VW output columns (one vector) x RY output rows a work-item, every output channel."""
    vw: int
    ry: int

    @property
    def label(self) -> str:
        return f"along x {self.vw} px {self.ry} rows"


def row_variants(vw: int, channels: int, out_h: int) -> list[RowVariant]:
    """The along-x variants for a layer of `channels` output channels and `out_h` rows: only where the
    channels are fewer than the vector width (else conv_vec's lanes are all busy), RY of ROW_TILES
    whose RY x channels accumulators fit the registers and whose rows the output has."""
    if channels >= vw or vw not in ROW_ACCUMULATORS:
        return []
    return [RowVariant(vw, ry) for ry in ROW_TILES if ry * channels <= ROW_ACCUMULATORS[vw] and ry <= out_h]


def kind(net, index: int, layer) -> str | None:
    """'conv' (ungrouped), 'depthwise' (a subsampling and a max-pool too: the same kernel),
    'dense' (a conv of one pixel an image), or None where no vector kernel applies."""
    if layer.kind in ("subsample", "maxpool"):
        return "depthwise"
    if layer.kind == "dense":
        return "dense"
    if layer.kind != "conv" or tuple(layer.dilation) != (1, 1):
        return None
    if layer.groups == 1:
        return "conv"
    return "depthwise" if is_depthwise(layer, net.input_layout(index).c) else None


class CpuConvOp(KernelOp):
    def __init__(self, net, index, launch, weight, bias, variant: Variant, defines: dict, what: str):
        # a max-pool has no weight and no bias
        super().__init__(net, index, launch, () if weight is None else (weight, bias),
                         step_name(f"{what} {variant.label}", net.net.layers[index].activation))
        self.variant, self.defines, self.what = variant, defines, what

    def describe(self) -> dict:
        return {**super().describe(), "variant": self.variant.label}


@dataclass(frozen=True)
class ConvParams:
    weight: np.ndarray   # (K, C / groups, FH, FW)
    bias: np.ndarray
    stride: tuple
    padding: tuple       # (top, left, bottom, right)
    groups: int


def as_conv(layer, params: dict) -> ConvParams:
    """The layer as a conv: a subsampling as the depthwise conv it equals (each tap weighs coeff / taps)."""
    if layer.kind == "subsample":
        fh, fw = layer.kernel
        coeff = np.asarray(params["coeff"], np.float64)
        weight = np.broadcast_to((coeff / (fh * fw))[:, None, None, None], (len(coeff), 1, fh, fw))
        return ConvParams(weight, params["bias"], layer.stride, (0, 0, 0, 0), len(coeff))
    return ConvParams(params["weight"], params["bias"], layer.stride, layer.padding, layer.groups)


def _launch(net, index: int, defines: dict, v: "Variant | RowVariant") -> Launch:
    dst = net.layouts[index + 1]
    if "CONV_ROW_VEC" in defines:
        grid = (-(-dst.w // v.vw), net.batch * -(-dst.h // v.ry))
        name = "conv_row_vec"
    elif "DW_VEC" in defines:
        grid = (dst.c_stored // v.vw, net.batch * dst.h * -(-dst.w // v.rp))
        name = "dw_vec"
    else:
        grid = (defines["KP"] // v.kw, -(-net.batch * dst.h * dst.w // v.rp))
        name = "conv_vec"
    return Launch(net.rt, SOURCE, name, defines, grid, lambda lim: choose_local(grid, SHAPES, lim))


def build(net, index: int, params: dict, v: Variant) -> CpuConvOp:
    """Conv layer `index` as variant `v` of the conv or depthwise vector kernel."""
    layer = net.net.layers[index]
    src, dst = net.input_layout(index), net.layouts[index + 1]
    window = net.window_defines(layer, src, dst)
    if kind(net, index, layer) == "depthwise":
        if src.c_stored % v.vw:
            raise ValueError(f"{layer.name}: {src.c_stored} stored channels are no multiple of the vector width {v.vw}")
        defines = {**window, "DW_VEC": 1, "VW": v.vw, "NV": 1, "RP": v.rp}
        if layer.kind == "maxpool":
            defines["POOL_MAX"] = 1
            return CpuConvOp(net, index, _launch(net, index, defines, v), None, None, v, defines, "vector maxpool")
        conv = as_conv(layer, params)
        # vectorised's depthwise buffers: dw_pw and the block kernels can take them as they are
        return CpuConvOp(net, index, _launch(net, index, defines, v),
                         net.upload(depthwise_filters(conv.weight, src.c_stored), f"{layer.name} weights"),
                         net.upload(pad_to(conv.bias, dst.c_stored), f"{layer.name} bias"), v, defines,
                         "vector depthwise" if layer.kind == "conv" else f"vector {layer.kind.value}")
    kp = round_up(dst.c_stored, v.kw)
    if layer.kind == "dense":
        return _dense(net, index, layer, params, v, src, dst, kp)
    defines = {**window, "CONV_VEC": 1, "XC": src.c, "VW": v.vw, "NV": v.nv, "RP": v.rp, "KP": kp}
    k, c, fh, fw = params["weight"].shape
    weight = np.zeros((fh, fw, src.c_stored, kp), np.float32)
    weight[:, :, :c, :k] = np.asarray(params["weight"], np.float32).transpose(2, 3, 1, 0)
    # each work-item's block of KW output channels as one contiguous stream (kernels/cpu_conv.cl)
    weight = weight.reshape(fh, fw, src.c_stored, kp // v.kw, v.kw).transpose(3, 0, 1, 2, 4)
    bias = np.zeros(kp, np.float32)
    bias[:k] = params["bias"]
    return CpuConvOp(net, index, _launch(net, index, defines, v),
                     net.upload(weight, f"{layer.name} weights (vector conv)"),
                     net.upload(bias, f"{layer.name} bias (vector conv)"), v, defines, "vector conv")


def build_row(net, index: int, params: dict, v: RowVariant) -> CpuConvOp:
    """Conv layer `index` as conv_row_vec variant `v`; ValueError where it does not apply (not an
    ungrouped conv, no fewer output channels than the vector, too few rows)."""
    layer = net.net.layers[index]
    src, dst = net.input_layout(index), net.layouts[index + 1]
    if kind(net, index, layer) != "conv" or dst.c >= v.vw or dst.h < v.ry:
        raise ValueError(f"{layer.name}: no along-x form for {layer.kind.value} of {dst.c} channels, {dst.h} rows")
    defines = {**net.window_defines(layer, src, dst), "CONV_ROW_VEC": 1, "XC": src.c, "VW": v.vw, "RY": v.ry}
    conv = as_conv(layer, params)
    # a work-item's weights for one input channel and tap: the YC output channels' scalars in a row
    weight = np.asarray(conv.weight, np.float32).transpose(1, 2, 3, 0)   # (K, C, FH, FW) -> (C, FH, FW, K)
    return CpuConvOp(net, index, _launch(net, index, defines, v),
                     net.upload(np.ascontiguousarray(weight), f"{layer.name} weights (along x)"),
                     net.upload(np.asarray(conv.bias, np.float32), f"{layer.name} bias (along x)"), v, defines,
                     "vector conv")


def _dense(net, index, layer, params, v: Variant, src, dst, kp: int) -> CpuConvOp:
    """A dense layer as conv_vec: one pixel an image, its channels the input buffer's image,
    border and padding channels included (their weights are zero, as vectorised's dense kernels')."""
    in4 = src.hp * src.wp * src.c_stored
    defines = {"CONV_VEC": 1, "N": net.batch, "XC4": in4, "XC": in4, "XHP": 1, "XWP": 1, "XH": 1, "XW": 1,
               "XPT": 0, "XPL": 0, "PT": 0, "PL": 0, "YC": dst.c, "YC4": dst.c_stored, "YH": 1, "YW": 1,
               "YHP": dst.hp, "YWP": dst.wp, "YPT": dst.pad_h, "YPL": dst.pad_w, "FH": 1, "FW": 1, "SH": 1, "SW": 1,
               "ACT": ACT_CODES[layer.activation], "VW": v.vw, "NV": v.nv, "RP": v.rp, "KP": kp}
    rows = dense_rows(params["weight"], src.c, src.h, src.w, src.c_stored, src.border)   # (OUT, in4)
    weight = np.zeros((in4, kp), np.float32)
    weight[:, :rows.shape[0]] = rows.T
    weight = weight.reshape(in4, kp // v.kw, v.kw).transpose(1, 0, 2)   # a work-item's block contiguous
    bias = np.zeros(kp, np.float32)
    bias[:len(params["bias"])] = params["bias"]
    return CpuConvOp(net, index, _launch(net, index, defines, v),
                     net.upload(weight, f"{layer.name} weights (vector dense)"),
                     net.upload(bias, f"{layer.name} bias (vector dense)"), v, defines, "vector dense")


def with_residual(net, op: CpuConvOp, j: int, extra: dict, residual) -> ResidualConvOp | None:
    """`op` with add j in its epilogue (`extra`: its -D constants), writing the add's output;
    None for the depthwise and along-x kernels, which have no such epilogue."""
    if "DW_VEC" in op.defines or "CONV_ROW_VEC" in op.defines:
        return None
    layer = net.net.layers[op.index]
    defines = {**op.defines, **net.window_defines(layer, net.input_layout(op.index), net.layouts[j + 1]), **extra}
    return ResidualConvOp(op, _launch(net, op.index, defines, op.variant), residual, net.activations[j + 1],
                          step_name(f"{op.what} {op.variant.label}+add", net.net.layers[j].activation))


def _errors(net, index: int, params: dict, forms: dict) -> dict:
    """Each form's relative L2 error against the layer in float64 on one random input."""
    layer = net.net.layers[index]
    src = net.input_layout(index)
    x = np.random.default_rng(SEED + index).standard_normal(src.canonical_shape).astype(np.float32)
    if layer.kind == "dense":
        flat = x.astype(np.float64).reshape(len(x), -1)
        ref = _activate(flat @ np.asarray(params["weight"], np.float64) + np.asarray(params["bias"], np.float64),
                        layer.activation)
        return _compare(net, index, forms, x, ref)
    if layer.kind == "maxpool":
        return _compare(net, index, forms, x, _activate(_maxpool(x.astype(np.float64), layer), layer.activation))
    conv = as_conv(layer, params)
    ref = _activate(_conv(x.astype(np.float64), np.asarray(conv.weight, np.float64),
                          np.asarray(conv.bias, np.float64), conv.stride, conv.padding, conv.groups),
                    layer.activation)
    return _compare(net, index, forms, x, ref)


def _maxpool(x: np.ndarray, layer) -> np.ndarray:
    """The window maxima, padding as -inf (never winning)."""
    top, left, bottom, right = layer.padding
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    (fh, fw), (sh, sw) = layer.kernel, layer.stride
    win = sliding_window_view(padded, (fh, fw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.max(axis=(4, 5))


def _compare(net, index: int, forms: dict, x: np.ndarray, ref: np.ndarray) -> dict:
    return {form: rel_l2(out, ref) for form, out in outputs_on(net, index, forms, x).items()}


class ChoosesCpuConv:
    """A VectorisedNet mixin, first in line: choose_form() takes the form the others
    chose, then puts a vector kernel in its place where that measured faster."""

    def choose_form(self, index: int, layer, params: dict, op, bufs: list):
        first = len(self.buffers) - len(bufs)
        op = super().choose_form(index, layer, params, op, bufs)
        mode = self.forms.cpu_mode
        which = kind(self, index, layer)
        if mode == "never" or which is None or self.reads_or_writes_a_view(index):
            return op   # (its kernels take no channel pitch)
        vw = vector_width(self.rt.info)
        if mode == "measured" and (vw < MIN_WIDTH or self._forced(op)):
            return op
        owned = {"chosen": self.buffers[first:]}
        c_stored = self.layouts[index + 1].c_stored
        if isinstance(mode, Variant):   # a depthwise conv narrows the vector to divide its channels
            options = [Variant(dw_variants(mode.vw, c_stored)[0].vw, 1, mode.rp)] if which == "depthwise" else [mode]
        else:
            out = self.layouts[index + 1]
            options = (dw_variants(vw, c_stored) if which == "depthwise"
                       else variants(vw, c_stored, self.batch * out.h * out.w))
        if mode != "measured":
            self.release(owned["chosen"])
            return build(self, index, params, options[0])
        # the along-x form, measured only, for a conv reading the image alone whose output no add reads:
        # few output channels are common there (LeNet's C1); elsewhere they sit in chains whose adds,
        # depthwise folds and block kernels a kernel of its own would break (it has no epilogue for them)
        layers = self.net.layers
        if (which == "conv" and all(s < 0 for s in self.net.sources(index))
                and not any(index in self.net.sources(j) for j in range(len(layers)) if layers[j].kind == "add")):
            out = self.layouts[index + 1]
            options = options + row_variants(vw, out.c, out.h)
        chosen = getattr(op, "step", type(op).__name__)
        forms = {chosen: op}
        refused = {}
        for v in options:
            start = len(self.buffers)
            try:
                forms[v.label] = (build_row if isinstance(v, RowVariant) else build)(self, index, params, v)
            except KernelBuildError as exc:   # a variant this device's compiler refuses is no choice
                self.release(self.buffers[start:])
                refused[v.label] = str(exc).splitlines()[0][:200]
                continue
            owned[v.label] = self.buffers[start:]
        owned[chosen] = owned.pop("chosen")
        errors = _errors(self, index, params, forms)
        for f, err in errors.items():
            if f != chosen and not err <= MAX_REL_L2:   # NaN too
                refused[f] = f"relative L2 {err:.1e} against float64, above {MAX_REL_L2:.0e}"
                del forms[f]
        times = fastest_ms(self.rt, {f: [o] for f, o in forms.items()})
        best = min(times, key=times.get)
        for f, b in owned.items():
            if f != best:
                self.release(b)
        self.config.setdefault("cpu_conv", {})[layer.name] = {
            "chosen": best, "vector_width": vw, "ms": {f: round(t, 4) for f, t in times.items()},
            "rel_l2_against_float64": {f: float(f"{e:.2e}") for f, e in errors.items()},
            **({"refused": refused} if refused else {})}
        self.config["measured_forms"] = HOW
        return forms[best]

    def _forced(self, op) -> bool:
        """`op` is a form its own mode forced (winograd="F2", pointwise="always"): the caller's choice stands."""
        return ((isinstance(op, PointwiseOp) and self.forms.pointwise == "always")
                or (isinstance(op, (WinogradOp, WinogradGemmOp)) and self.forms.forces("winograd")))
