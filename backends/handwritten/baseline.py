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

Graphs (ResNet-18, MobileNet-v2), in the same style:
- each layer reads the buffers it names; a buffer read by several layers
  carries the widest border any wants (per side, so asymmetric padding
  costs only what it uses), and a reader that wants less starts its
  windows at an offset into it;
- stride 2 and per-side padding are the same loop conv; a grouped or
  depthwise conv is that conv with its channel loop over the filter's
  group only (no zero blocks, no kernel of its own);
- max-pool with padding skips the taps outside the input (bounds checks:
  padding never wins, as if it held -inf); global average pool and the
  add (2 to 4 inputs, each through its own border) are one work-item per
  output element with the activation fused, as every other kernel;
- a residual add and its activation are folded into the epilogue of the
  conv before it where that conv only feeds the add (residual.py), else
  the add is a kernel of its own;
- a dense layer reading a buffer that also carries a conv's border reads it
  as stored: its weights get zero rows for the border.
"""
from __future__ import annotations

import numpy as np

from nets import STUDY_KINDS, Feature, LayerKind
from nets.errors import Unsupported

from ..opencl.launch import ACT_CODES, Launch, step_name
from .net import HandwrittenBackend, HandwrittenNet, KernelOp
from .residual import FoldsResidualAdds, ResidualConvOp

SOURCE = "baseline.cl"
MAX_ADD_INPUTS = 4   # kernels/baseline.cl's add


def bordered_rows(weight: np.ndarray, layout) -> np.ndarray:
    """Dense weight (C*H*W, OUT), rows in the canonical C,H,W order -> one row per
    element of the stored NCHW input (C*HP*WP, OUT), zero for its border."""
    if not any(layout.border):
        return weight
    n_out, top, left = weight.shape[1], layout.pad_h, layout.pad_w
    out = np.zeros((layout.c, layout.hp, layout.wp, n_out), np.float32)
    out[:, top:top + layout.h, left:left + layout.w] = np.asarray(weight, np.float32).reshape(
        layout.c, layout.h, layout.w, n_out)
    return out.reshape(-1, n_out)


def conv_name(layer, in_channels: int) -> str:
    """How a conv's step is named: the same kernel, its groups said."""
    if layer.groups == 1:
        return "conv"
    return "depthwise conv" if layer.groups == in_channels else f"conv ({layer.groups} groups)"


class BaselineNet(FoldsResidualAdds, HandwrittenNet):
    order = "nchw"
    channel_multiple = 1

    def window_defines(self, layer, src, dst) -> dict:
        """The -D constants of a layer reading buffer `src` and writing `dst`, windows and groups included."""
        top, left = layer.padding[:2] if layer.kind in ("conv", "maxpool") else (0, 0)
        kernel, stride = getattr(layer, "kernel", (1, 1)), getattr(layer, "stride", (1, 1))
        groups = layer.groups if layer.kind == "conv" else 1
        return {"N": self.batch, "XC": src.c, "XHP": src.hp, "XWP": src.wp, "XH": src.h, "XW": src.w,
                "XPT": src.pad_h, "XPL": src.pad_w, "PT": top, "PL": left,
                "XCG": src.c // groups, "YCG": dst.c // groups,
                "YC": dst.c, "YHP": dst.hp, "YWP": dst.wp, "YPT": dst.pad_h, "YPL": dst.pad_w,
                "FH": kernel[0], "FW": kernel[1], "SH": stride[0], "SW": stride[1],
                "ACT": ACT_CODES[layer.activation]}

    def make_op(self, index, layer, params):
        src, dst = self.input_layout(index), self.layouts[index + 1]
        defines = self.window_defines(layer, src, dst)
        # the study's mapping: global ids (output row, output column, output channel)
        grid = (dst.h, dst.w, dst.c)
        what = layer.kind.value
        if layer.kind == "conv":
            what = conv_name(layer, src.c)
            args = (self.upload(params["weight"], f"{layer.name} weights"),
                    self.upload(params["bias"], f"{layer.name} bias"))
        elif layer.kind == "subsample":
            args = (self.upload(params["coeff"], f"{layer.name} coefficients"),
                    self.upload(params["bias"], f"{layer.name} bias"))
        elif layer.kind == "maxpool":
            defines["POOL_PAD"] = int(any(layer.padding))
            args = ()
        elif layer.kind == "add":
            defines.update(self._add_defines(index, layer))
            args = ()
        elif layer.kind == "global_avgpool":
            what, args = "global avgpool", ()
        else:   # dense: the input buffer read as stored, one flat vector per image (Source 6.1)
            defines = {"IN": src.c * src.hp * src.wp, "OUT": dst.c, "ACT": ACT_CODES[layer.activation]}
            grid = (self.batch, dst.c)   # Source 6.1: (row of the result, column of the result)
            args = (self.upload(bordered_rows(params["weight"], src), f"{layer.name} weights"),
                    self.upload(params["bias"], f"{layer.name} bias"))
        defines[layer.kind.upper()] = 1   # builds only this layer's kernel
        launch = Launch(self.rt, SOURCE, layer.kind.value, defines, grid)   # like the study: the runtime picks the work-group
        return KernelOp(self, index, launch, args, step_name(what, layer.activation))

    def _add_defines(self, index, layer) -> dict:
        """ARITY and each input's border (its other readers may want a different one)."""
        if len(layer.inputs) > MAX_ADD_INPUTS:   # the kernel has that many arguments, no more
            raise Unsupported(f"layer {layer.name} adds {len(layer.inputs)} inputs; {type(self).__name__}'s "
                              f"add kernel takes at most {MAX_ADD_INPUTS}")
        defines = {"ARITY": len(layer.inputs)}
        for i, s in enumerate(self.net.sources(index)):
            lay = self.layouts[s + 1]
            defines.update({f"X{i}HP": lay.hp, f"X{i}WP": lay.wp, f"X{i}PT": lay.pad_h, f"X{i}PL": lay.pad_w})
        return defines

    def fold_residual(self, i, j, extra, residual):
        """Conv i's kernel with add j in its epilogue, writing add j's output buffer."""
        op, conv, dst = self.ops[i], self.net.layers[i], self.layouts[j + 1]
        defines = {**self.window_defines(conv, self.input_layout(i), dst), **extra, "CONV": 1}
        launch = Launch(self.rt, SOURCE, "conv", defines, (dst.h, dst.w, dst.c))
        return ResidualConvOp(op, launch, residual, self.activations[j + 1],
                              step_name(f"{op.step}+add", self.net.layers[j].activation))


class BaselineBackend(HandwrittenBackend):
    name = "baseline"
    summary = ("hand-written, study ch. 6/7.1: one fused kernel per layer, NCHW loop conv, padding kept across layers; "
               "graphs: grouped/depthwise conv as the loop over the group's channels, each residual add and its "
               "activation folded into the conv before it, else its own kernel")
    net_class = BaselineNet
    supported_kinds = STUDY_KINDS | {LayerKind.ADD, LayerKind.GLOBAL_AVGPOOL}
    supported_features = frozenset({Feature.GRAPH, Feature.GROUPS, Feature.ASYMMETRIC_PAD, Feature.POOL_PAD,
                                     Feature.RELU6, Feature.TANH})
