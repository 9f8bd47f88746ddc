"""`baseline`: the study's first hand-written system (Rovder 2018, chapter 6
and section 7.1, appendices B and C).

- one kernel per layer, bias and activation fused (no im2col, no chain of
  small kernels, a real subsampling kernel);
- NCHW; loop-based convolution with one work-item per output (row, column,
  channel), the batch looped inside the kernel;
- every buffer carries the zero border its consumer needs, so a conv reads
  with no bounds checks and its producer writes straight into the padded
  buffer (table 7.1); max-pool keeps or strips the padding the same way;
- every layer's kernel is built once at prepare with its shape as -D
  constants (kernels/baseline.cl) and reused on every forward pass;
- like the study, the work-group shape is left to the OpenCL runtime;
- the net's input is copied to the device as given; when the first conv
  pads, a small kernel moves it into its padded buffer, timed with the
  first layer (net.py, kernels/layout.cl).
"""
from __future__ import annotations

from ..opencl.launch import ACT_CODES, Launch, step_name
from .net import HandwrittenBackend, HandwrittenNet, KernelOp

SOURCE = "baseline.cl"


class BaselineNet(HandwrittenNet):
    order = "nchw"
    channel_multiple = 1

    def make_op(self, index, layer, params):
        src, dst = self.input_layout(index), self.layouts[index + 1]
        defines = {"N": self.batch, "XC": src.c, "XHP": src.hp, "XWP": src.wp,
                   "YC": dst.c, "YHP": dst.hp, "YWP": dst.wp, "YPT": dst.pad_h, "YPL": dst.pad_w,
                   "ACT": ACT_CODES[layer.activation]}
        # the study's mapping: global ids (output row, output column, output channel)
        grid = (dst.h, dst.w, dst.c)
        if layer.kind == "conv":
            defines.update(FH=layer.kernel[0], FW=layer.kernel[1], SH=layer.stride[0], SW=layer.stride[1])
            args = (self.upload(params["weight"], f"{layer.name} weights"),
                    self.upload(params["bias"], f"{layer.name} bias"))
        elif layer.kind in ("subsample", "maxpool"):
            defines.update(FH=layer.kernel[0], FW=layer.kernel[1], SH=layer.stride[0], SW=layer.stride[1])
            args = ((self.upload(params["coeff"], f"{layer.name} coefficients"),
                     self.upload(params["bias"], f"{layer.name} bias")) if layer.kind == "subsample" else ())
        else:   # dense: the previous buffer is unpadded NCHW, i.e. already flattened in C,H,W order
            defines = {"IN": src.c * src.h * src.w, "OUT": dst.c, "ACT": ACT_CODES[layer.activation]}
            grid = (self.batch, dst.c)   # Source 6.1: (row of the result, column of the result)
            args = (self.upload(params["weight"], f"{layer.name} weights"),
                    self.upload(params["bias"], f"{layer.name} bias"))
        defines[layer.kind.upper()] = 1   # builds only this layer's kernel
        launch = Launch(self.rt, SOURCE, layer.kind, defines, grid)   # like the study: the runtime picks the work-group
        return KernelOp(self, index, launch, args, step_name(layer.kind, layer.activation))


class BaselineBackend(HandwrittenBackend):
    name = "baseline"
    summary = "hand-written, study ch. 6/7.1: one fused kernel per layer, NCHW loop conv, padding kept across layers"
    net_class = BaselineNet

