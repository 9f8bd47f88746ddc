"""`vectorised`: the study's iterative convolution optimised (Rovder 2018,
sections 7.2 and 7.4).

- NHWC activations with channels padded to a multiple of 4 (zeros), read as
  float4; filters reordered once at prepare to (K, FH, FW, C) to match;
- a conv work-item computes one output pixel for four output channels (each
  float4 of input feeds four filters; one float4 store); the channel sum is
  a `dot` (per float4 on Mali, once at the end elsewhere: see
  kernels/vectorised.cl);
- explicit work-group shapes, the study's (1, 4, 4) and variants, chosen per
  layer and per device within the device's limits
  (workgroups.py) and recorded in `config`;
- max-pool and subsampling in NHWC with float4 too; dense layers as a float4
  GEMV at batch 1 and a float4 kernel at batch > 1, their weights reordered
  to the input buffer's (H, W, C) order;
- as in `baseline`, every buffer carries the zero border its consumer needs,
  and every kernel is built once at prepare with -D constants;
- the net's input goes NCHW -> NHWC (border, padding channels), and its
  output back where it is not already canonical, in small kernels on the
  device timed with the first and last layers (net.py, kernels/layout.cl).
"""
from __future__ import annotations

import numpy as np

from nets.layouts import chw_rows_to_hwc

from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.workgroups import MAX_WASTE, build_fitting, choose_local, device_class
from .layout import round_up
from .net import HandwrittenBackend, HandwrittenNet, KernelOp
from .workgroups import CONV_SHAPES, DENSE_SHAPES, choose_gemv

SOURCE = "vectorised.cl"


def nhwc_filters(weight: np.ndarray, c_stored: int, k_stored: int) -> np.ndarray:
    """(K, C, FH, FW) -> (k_stored, FH, FW, c_stored), zero where padded."""
    k, c, fh, fw = weight.shape
    out = np.zeros((k_stored, fh, fw, c_stored), np.float32)
    out[:k, :, :, :c] = np.asarray(weight, np.float32).transpose(0, 2, 3, 1)
    return out


def dense_rows(weight: np.ndarray, c: int, h: int, w: int, c_stored: int) -> np.ndarray:
    """Dense weight (C*H*W, OUT), rows in the canonical C,H,W flatten order ->
    (OUT, H*W*c_stored): row j lists output j's weights in the order the NHWC
    input buffer holds its features, zero for the padding channels."""
    n_out = weight.shape[1]
    padded = np.zeros((h, w, c_stored, n_out), np.float32)
    padded[:, :, :c, :] = chw_rows_to_hwc(weight, (c, h, w)).reshape(h, w, c, n_out)
    return np.ascontiguousarray(padded.reshape(h * w * c_stored, n_out).T)


def pad_to(values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    out[:len(values)] = values
    return out


class VectorisedNet(HandwrittenNet):
    order = "nhwc"
    channel_multiple = 4

    def __init__(self, runtime, net, weights, batch):
        self.device = device_class(runtime.info)
        # Mali has dot hardware (study 7.2.2); elsewhere dot is a horizontal add
        self.dot_each = int(self.device == "mali")
        super().__init__(runtime, net, weights, batch)
        self.config.update({
            "device_class": self.device,
            "dot": "dot() per float4" if self.dot_each else "float4 multiply-adds, one dot() per output",
            "work_group_rule": f"first of the {self.device} candidates that fits the device and kernel limits "
                               f"and adds at most {MAX_WASTE:.1%} idle work-items (else the least idle)",
        })

    def _defines(self, name: str, defines: dict) -> dict:
        return {**defines, "DOT_EACH": self.dot_each, name.upper(): 1}

    def window_defines(self, layer, src, dst) -> dict:
        """The -D constants of a windowed layer (conv, pooling) between buffers `src` and `dst`."""
        return {"N": self.batch, "XC4": src.c_stored, "XHP": src.hp, "XWP": src.wp,
                "YC": dst.c, "YC4": dst.c_stored, "YH": dst.h, "YW": dst.w,
                "YHP": dst.hp, "YWP": dst.wp, "YPT": dst.pad_h, "YPL": dst.pad_w,
                "FH": layer.kernel[0], "FW": layer.kernel[1], "SH": layer.stride[0], "SW": layer.stride[1],
                "ACT": ACT_CODES[layer.activation]}

    def make_op(self, index, layer, params):
        src, dst = self.layouts[index], self.layouts[index + 1]
        act = ACT_CODES[layer.activation]
        if layer.kind == "dense":
            return self._dense(index, layer, params, src, dst, act)
        defines = self.window_defines(layer, src, dst)
        if layer.kind == "conv":
            args = (self.upload(nhwc_filters(params["weight"], src.c_stored, dst.c_stored), f"{layer.name} weights"),
                    self.upload(pad_to(params["bias"], dst.c_stored), f"{layer.name} bias"))
        elif layer.kind == "subsample":
            args = (self.upload(pad_to(params["coeff"], dst.c_stored), f"{layer.name} coefficients"),
                    self.upload(pad_to(params["bias"], dst.c_stored), f"{layer.name} bias"))
        else:
            args = ()
        # (image * output row, output column, group of four output channels)
        grid = (self.batch * dst.h, dst.w, dst.c_stored // 4)
        launch = Launch(self.rt, SOURCE, layer.kind, self._defines(layer.kind, defines), grid,
                        lambda lim: choose_local(grid, CONV_SHAPES[self.device], lim))
        return KernelOp(self, index, launch, args, step_name(layer.kind, layer.activation))

    def _dense(self, index, layer, params, src, dst, act):
        in4 = src.h * src.w * src.c_stored
        weight = self.upload(dense_rows(params["weight"], src.c, src.h, src.w, src.c_stored), f"{layer.name} weights")
        bias = self.upload(params["bias"], f"{layer.name} bias")
        defines = {"N": self.batch, "IN4": in4, "OUT": dst.c, "YC4": dst.c_stored, "ACT": act}
        if self.batch == 1:   # LANES and ROWS are -D constants: the work-group is fixed at build
            (lanes, rows), kernel = build_fitting(
                self.rt, SOURCE, "dense_gemv", lambda lim: choose_gemv(self.device, lim),
                lambda lr: self._defines("dense_gemv", {**defines, "LANES": lr[0], "ROWS": lr[1]}),
                lambda lr: lr[0] * lr[1])
            launch = Launch(self.rt, SOURCE, "dense_gemv", None, (lanes, round_up(dst.c, rows)), (lanes, rows),
                            exact=True, kernel=kernel)
            what = "dense GEMV"
        else:
            grid = (dst.c, self.batch)
            launch = Launch(self.rt, SOURCE, "dense_batched", self._defines("dense_batched", defines), grid,
                            lambda lim: choose_local(grid, DENSE_SHAPES[self.device], lim))
            what = "dense"
        return KernelOp(self, index, launch, (weight, bias), step_name(what, layer.activation))


class VectorisedBackend(HandwrittenBackend):
    name = "vectorised"
    summary = "hand-written, study 7.2/7.4: NHWC float4 conv (4 channels/work-item), tuned work-groups, float4 GEMV"
    net_class = VectorisedNet
