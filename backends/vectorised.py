"""`vectorised`: the seed's iterative convolution optimised (Rovder 2018,
sections 7.2 and 7.4).

- NHWC activations with channels padded to a multiple of 4 (zeros), read as
  float4; filters reordered once at prepare to (K, FH, FW, C) to match;
- a conv work-item computes one output pixel for four output channels (each
  float4 of input feeds four filters; one float4 store); the channel sum is
  a `dot` (per float4 on Mali, once at the end elsewhere: see
  kernels/vectorised.cl);
- explicit work-group shapes, the seed's (1, 4, 4) and variants, chosen per
  layer and per device within the device's limits
  (handwritten_workgroups.py) and recorded in `config`;
- max-pool and subsampling in NHWC with float4 too; dense layers as a float4
  GEMV at batch 1 and a float4 kernel at batch > 1, their weights reordered
  to the input buffer's (H, W, C) order;
- as in `baseline`, every buffer carries the zero border its consumer needs,
  and every kernel is built once at prepare with -D constants.
"""
from __future__ import annotations

import numpy as np

from .handwritten_layout import round_up
from .handwritten_net import ACT_CODES, HandwrittenBackend, HandwrittenNet, KernelOp, step_name
from .handwritten_workgroups import (CONV_SHAPES, DENSE_SHAPES, MAX_WASTE, choose_gemv, choose_local,
                                     device_class, device_limits, rounded_global)

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
    hwc = np.asarray(weight, np.float32).reshape(c, h, w, n_out).transpose(1, 2, 0, 3)
    padded = np.zeros((h, w, c_stored, n_out), np.float32)
    padded[:, :, :c, :] = hwc
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
        # Mali has dot hardware (seed 7.2.2); elsewhere dot is a horizontal add
        self.dot_each = int(self.device == "mali")
        super().__init__(runtime, net, weights, batch)
        self.config.update({
            "device_class": self.device,
            "dot": "dot() per float4" if self.dot_each else "float4 multiply-adds, one dot() per output",
            "work_group_rule": f"first of the {self.device} candidates that fits the device and kernel limits "
                               f"and adds at most {MAX_WASTE:.1%} idle work-items (else the least idle)",
        })

    def _kernel(self, name: str, defines: dict):
        defines = {**defines, "DOT_EACH": self.dot_each, name.upper(): 1}
        return self.rt.kernel(SOURCE, name, defines)

    def _limits(self, kernel=None):
        return device_limits(self.rt.info, kernel, self.rt.device)

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
        kernel = self._kernel(layer.kind, defines)
        # (image * output row, output column, group of four output channels)
        grid = (self.batch * dst.h, dst.w, dst.c_stored // 4)
        local = choose_local(grid, CONV_SHAPES[self.device], self._limits(kernel))
        return KernelOp(self, index, kernel, rounded_global(grid, local), local, args,
                        step_name(layer.kind, layer.activation))

    def _dense(self, index, layer, params, src, dst, act):
        in4 = src.h * src.w * src.c_stored
        weight = self.upload(dense_rows(params["weight"], src.c, src.h, src.w, src.c_stored), f"{layer.name} weights")
        bias = self.upload(params["bias"], f"{layer.name} bias")
        defines = {"N": self.batch, "IN4": in4, "OUT": dst.c, "YC4": dst.c_stored, "ACT": act}
        if self.batch == 1:
            lanes, rows = choose_gemv(self.device, self._limits())
            while True:   # the kernel's own limit is known only once it is built with LANES and ROWS
                kernel = self._kernel("dense_gemv", {**defines, "LANES": lanes, "ROWS": rows})
                limit = self._limits(kernel).max_group
                if lanes * rows <= limit:
                    break
                lanes, rows = (lanes, rows // 2) if rows > 1 else (lanes // 2, rows)
            local = (lanes, rows)
            global_size = (lanes, round_up(dst.c, rows))
            what = "dense GEMV"
        else:
            kernel = self._kernel("dense_batched", defines)
            grid = (dst.c, self.batch)
            local = choose_local(grid, DENSE_SHAPES[self.device], self._limits(kernel))
            global_size = rounded_global(grid, local)
            what = "dense"
        return KernelOp(self, index, kernel, global_size, local, (weight, bias), step_name(what, layer.activation))


class VectorisedBackend(HandwrittenBackend):
    name = "vectorised"
    summary = "hand-written, seed 7.2/7.4: NHWC float4 conv (4 channels/work-item), tuned work-groups, float4 GEMV"
    net_class = VectorisedNet
