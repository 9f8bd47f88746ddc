"""1x1 stride-1 convolutions as a register-blocked GEMM (kernels/pointwise.cl),
a form `vectorised` and `vectorised-tiled` measure at prepare against the
layer's direct kernel (measured.py: launches count) and keep where faster;
`config["pointwise"]` records both times per layer and the step is named
"pointwise 1x1".  MobileNet-v2's 34 expands and projects are such convs;
they are its largest share of the work on a CPU, where `vectorised`'s conv
kernel loads each weight float4 for one pixel only.

A work-item computes RP pixels x KW channels: on a CPU KW = 8 (a float8,
the peak kernel's fastest width here), on a GPU KW = 4; RP = 4.  The
work-group is the first of the device's shapes that fits and adds at most
1/8 idle work-items (backends/opencl/workgroups.py).

`pointwise` (the nets' argument): "measured" (the default), "never" or
"always" (unmeasured: the tests and Oclgrind check the kernel so).
"""
from __future__ import annotations

import numpy as np

from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.workgroups import choose_local
from .layout import round_up
from .measured import HOW, fastest_ms
from .net import KernelOp
from .residual import ResidualConvOp

SOURCE = "pointwise.cl"
MODES = ("measured", "never", "always")
RP = 4
# (channel groups, pixel groups) per work-group, in order of preference
SHAPES = {"cpu": ((16, 4), (8, 8), (32, 2), (8, 4), (4, 4), (4, 2), (2, 2), (1, 1)),
          "gpu": ((32, 4), (16, 8), (64, 2), (16, 4), (8, 8), (8, 4), (4, 4), (2, 2), (1, 1))}


def applies(layer) -> bool:
    """A 1x1 stride-1 unpadded ungrouped conv."""
    return (layer.kind == "conv" and tuple(layer.kernel) == (1, 1) and tuple(layer.stride) == (1, 1)
            and not any(layer.padding) and layer.groups == 1)


class PointwiseOp(KernelOp):
    """A 1x1 conv layer as kernels/pointwise.cl's kernel."""

    def __init__(self, net, index, launch, weight, bias, defines: dict):
        super().__init__(net, index, launch, (weight, bias),
                         step_name("pointwise 1x1", net.net.layers[index].activation))
        self.defines = defines


def _defines(net, i: int, dst, src=None) -> dict:
    """The -D constants of 1x1 layer i writing `dst`, reading `src` (by default its own input's layout;
    a layernorm folded into it: the layernorm's input, layernorm_fused.py)."""
    src = src or net.input_layout(i)
    kw = 4 if net.device != "cpu" else 8
    return {"N": net.batch, "XC4": src.c_stored, "XHP": src.hp, "XWP": src.wp, "XPT": src.pad_h, "XPL": src.pad_w,
            "YC": dst.c, "YC4": dst.c_stored, "YH": dst.h, "YW": dst.w, "YHP": dst.hp, "YWP": dst.wp,
            "YPT": dst.pad_h, "YPL": dst.pad_w, "KW": kw, "RP": RP, "KP": round_up(dst.c_stored, kw),
            # the output a slice of a concatenation's buffer (the 1x1's own, or an add's folded into it)
            "YS": dst.c_pitch // 4, "YO": dst.c_offset // 4}


def _launch(net, i: int, defines: dict) -> Launch:
    dst = net.layouts[i + 1]
    # NB blocks of KW channels a work-item (layernorm_fused.py; else 1)
    grid = (-(-defines["KP"] // (defines["KW"] * defines.get("NB", 1))), -(-net.batch * dst.h * dst.w // RP))
    shapes = SHAPES["cpu" if net.device == "cpu" else "gpu"]
    return Launch(net.rt, SOURCE, "pointwise", defines, grid, lambda lim: choose_local(grid, shapes, lim))


def build(net, index: int, params: dict) -> PointwiseOp:
    layer = net.net.layers[index]
    src, dst = net.input_layout(index), net.layouts[index + 1]
    defines = {**_defines(net, index, dst), "ACT": ACT_CODES[layer.activation]}
    kp = defines["KP"]
    weight = np.zeros((src.c_stored, kp), np.float32)
    weight[:src.c, :dst.c] = np.asarray(params["weight"], np.float32)[:, :, 0, 0].T
    bias = np.zeros(kp, np.float32)
    bias[:dst.c] = params["bias"]
    return PointwiseOp(net, index, _launch(net, index, defines),
                       net.upload(weight, f"{layer.name} weights (pointwise)"),
                       net.upload(bias, f"{layer.name} bias (pointwise)"), defines)


def with_residual(net, op: PointwiseOp, j: int, extra: dict, residual) -> ResidualConvOp:
    """`op` with add j in its epilogue (`extra`: its -D constants), writing the add's output."""
    defines = {**op.defines, **_defines(net, op.index, net.layouts[j + 1]), **extra}
    return ResidualConvOp(op, _launch(net, op.index, defines), residual, net.activations[j + 1],
                          step_name("pointwise 1x1+add", net.net.layers[j].activation))


class ChoosesPointwise:
    """A VectorisedNet mixin: choose_form() puts a pointwise op in place of a
    1x1 conv's direct one where the `pointwise` mode says so."""

    pointwise = "measured"

    def choose_form(self, index: int, layer, params: dict, op, bufs: list):
        if self.forms.pointwise == "never" or not applies(layer) or self.input_layout(index).is_view:
            return super().choose_form(index, layer, params, op, bufs)   # it reads whole pixels
        first = len(self.buffers)
        blocked = build(self, index, params)
        if self.forms.pointwise == "always":
            self.release(bufs)
            return blocked
        times = fastest_ms(self.rt, {"direct": [op], "pointwise": [blocked]})
        keep = "pointwise" if times["pointwise"] < times["direct"] else "direct"
        self.release(bufs if keep == "pointwise" else self.buffers[first:])
        self.config.setdefault("pointwise", {})[layer.name] = {
            "chosen": keep, "ms": {k: round(v, 4) for k, v in times.items()}}
        self.config["measured_forms"] = HOW
        return blocked if keep == "pointwise" else op
