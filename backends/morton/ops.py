"""The `morton` backend's layer operations.  Every op reads one buffer and
writes another of owner.data_buffers, numbered as in plan.py: the
two shared buffers 0 and 1 and the net's input buffer (a convolution goes
back and forth through both shared ones).  Data between layers is compact
NCHW (or (N, features)) at the start of a buffer.  Kernels are in
kernels/morton_*.cl, built once per layer shape with -D constants and
launched through backends/opencl/launch.py."""
from __future__ import annotations

import numpy as np

from ..opencl.launch import ACT_CODES, Launch
from ..opencl.net import LayerOp
from .layout import parse
FILTER_LAYOUT = parse("R_2_4_R")   # the Morton 4-2 GEMM's left matrix
IM2COL_LAYOUT = parse("C_4_2_C")   # ... and its right matrix, written by im2col


class MortonOp(LayerOp):
    def __init__(self, owner, layer, index, plan):
        super().__init__(layer, index)
        self.rt = owner.rt
        self.plan = plan
        self.src, self.dst = owner.data_buffers[plan.src], owner.data_buffers[plan.dst]
        self.in_shape = (owner.batch,) + tuple(owner.net.in_shape(index))
        self.out_shape = (owner.batch,) + tuple(owner.net.out_shape(index))
        self.steps: list[tuple[str, object, tuple]] = []   # (step name, launch, arguments)

    def write_input(self, x):
        self.rt.write(self.src, x)

    def read_output(self):
        return self.rt.read(self.dst, self.out_shape)

    def enqueue(self, rec):
        for name, launch, args in self.steps:
            rec.kernel(name, launch(*args))


def zero_launch(rt, count: int) -> Launch:
    return Launch(rt, "morton_copy.cl", "zero", {"COUNT": count}, (-(-count // 4),), (64,))


def box_launch(rt, planes, rows, cols, src=(0, 0, 0), dst=(0, 0, 0)) -> Launch:
    """copy_box: src and dst are (offset, plane stride, row stride) in floats."""
    defines = {"PLANES": planes, "ROWS": rows, "COLS": cols,
               "SRC_OFF": src[0], "SRC_PLANE": src[1], "SRC_ROW": src[2],
               "DST_OFF": dst[0], "DST_PLANE": dst[1], "DST_ROW": dst[2]}
    return Launch(rt, "morton_copy.cl", "copy_box", defines, (cols, rows, planes), (32, 2, 1))


class ConvOp(MortonOp):
    """The study's 8-step convolution (section 7.3.2): [zero] pad, [zero]
    im2col, [zero] morton-gemm, [zero] unpad, a zero step only where the
    plan shows the next step would read something unwritten.  The bias and
    activation are fused into the GEMM's store (the padding rows of the
    GEMM's output get bias 0 and are cut by unpad)."""

    def __init__(self, owner, layer, index, plan, weight, bias, gemm_work_group):
        super().__init__(owner, layer, index, plan)
        rt, s = self.rt, plan.shape
        buf = owner.data_buffers
        a = FILTER_LAYOUT.to_layout(weight.reshape(s.filters, s.depth), pad_to=(s.filters_pad, s.depth_pad))
        self.filters = owner.upload(a, f"filters of {layer.name} (R_2_4_R)")
        padded_bias = np.zeros(s.filters_pad, np.float32)
        padded_bias[:s.filters] = bias
        self.bias = owner.upload(padded_bias, f"bias of {layer.name}")
        hp, wp = s.padded_hw
        oh, ow = s.out_hw
        act = ACT_CODES[layer.activation]
        for st in plan.steps:
            if st.zero_first:
                self.steps.append(("zero", zero_launch(rt, st.reads_next), (buf[st.dst],)))
            if st.name == "pad":
                launch = box_launch(rt, s.batch * s.channels, s.height, s.width,
                                    src=(0, s.height * s.width, s.width),
                                    dst=(s.pad[0] * wp + s.pad[1], hp * wp, wp))
                args = (buf[st.src], buf[st.dst])
            elif st.name == "im2col":
                defines = {"C": s.channels, "HP": hp, "WP": wp, "KH": s.kernel[0], "KW": s.kernel[1],
                           "SH": s.stride[0], "SW": s.stride[1], "OH": oh, "OW": ow, "BATCH": s.batch,
                           "L_PAD": s.depth_pad}
                launch = Launch(rt, "morton_im2col.cl", "im2col", defines, (ow, oh, s.channels), (8, 8, 1))
                args = (buf[st.src], buf[st.dst])
            elif st.name == "morton-gemm":
                defines = {"L_PAD": s.depth_pad, "N_PAD": s.columns_pad, "ACT": act}
                launch = Launch(rt, "morton_gemm.cl", "morton_gemm", defines,
                                (s.filters_pad // 2, s.columns_pad // 2), gemm_work_group, exact=True)
                args = (self.filters, buf[st.src], self.bias, buf[st.dst])
            elif st.name == "unpad":
                launch = box_launch(rt, s.batch, s.filters, oh * ow,
                                    src=(0, oh * ow, s.columns_pad), dst=(0, s.filters * oh * ow, oh * ow))
                args = (buf[st.src], buf[st.dst])
            else:
                raise ValueError(f"unknown convolution step {st.name!r}")
            self.steps.append((st.name, launch, args))


class MaxPoolOp(MortonOp):
    def __init__(self, owner, layer, index, plan):
        super().__init__(owner, layer, index, plan)
        n, c, h, w = self.in_shape
        _, _, oh, ow = self.out_shape
        defines = {"ACT": ACT_CODES[layer.activation], "H": h, "W": w, "OH": oh, "OW": ow,
                   "KH": layer.kernel[0], "KW": layer.kernel[1], "SH": layer.stride[0], "SW": layer.stride[1]}
        launch = Launch(self.rt, "morton_layers.cl", "maxpool", defines, (ow, oh, n * c), (8, 8, 1))
        self.steps.append(("maxpool", launch, (self.src, self.dst)))


class SubsampleOp(MortonOp):
    def __init__(self, owner, layer, index, plan, coeff, bias):
        super().__init__(owner, layer, index, plan)
        n, c, h, w = self.in_shape
        _, _, oh, ow = self.out_shape
        self.coeff = owner.upload(coeff, f"coefficients of {layer.name}")
        self.bias = owner.upload(bias, f"bias of {layer.name}")
        defines = {"ACT": ACT_CODES[layer.activation], "H": h, "W": w, "OH": oh, "OW": ow, "C": c, "BATCH": n,
                   "KH": layer.kernel[0], "KW": layer.kernel[1], "SH": layer.stride[0], "SW": layer.stride[1]}
        launch = Launch(self.rt, "morton_layers.cl", "subsample", defines, (ow, oh, c), (8, 8, 1))
        self.steps.append(("subsample", launch, (self.src, self.dst, self.coeff, self.bias)))


class DenseOp(MortonOp):
    """Vectorised GEMV at batch 1 (study 7.4), the same kernel over a
    second NDRange dimension for a batch; weights transposed once here."""

    def __init__(self, owner, layer, index, plan, weight, bias):
        super().__init__(owner, layer, index, plan)
        d, f = weight.shape
        n = self.out_shape[0]
        self.weight = owner.upload(np.ascontiguousarray(np.asarray(weight, np.float32).T),
                                   f"weights of {layer.name} (transposed)")
        self.bias = owner.upload(bias, f"bias of {layer.name}")
        defines = {"ACT": ACT_CODES[layer.activation], "D": d, "F": f, "BATCH": n}
        launch = Launch(self.rt, "morton_layers.cl", "dense", defines, (f, n), (64, 1))
        self.steps.append(("gemv" if n == 1 else "dense", launch, (self.src, self.weight, self.bias, self.dst)))
