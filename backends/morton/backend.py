"""`morton`: convolution as im2col + the Hybrid Morton Order GEMM, the
study's second optimised system (Rovder 2018, section 7.3; the Morton 4-2
kernel from Rovder 2017, chapter 8 and appendix 12.7).

  conv       the 8 steps of plan.py over two buffers shared by the
             whole net and sized once for its largest intermediate (the
             net's input has a small buffer of its own); filters
             in R_2_4_R (converted once here), im2col written straight in
             C_4_2_C, the Morton 4-2 GEMM (2x2 outputs per work-item, 4 x 16
             work-groups, C padded to 8 x 32 blocks) with bias and activation
             fused into its store, unpad back to NCHW.  A batch is one wide
             im2col matrix (image n in columns n*OH*OW ..) and one GEMM.
  maxpool    one NCHW kernel;  subsample: one NCHW kernel (LeNet)
  dense      vectorised GEMV at batch 1, the same kernel per image at batch > 1

Steps are timed by their own events and named zero, pad, im2col,
morton-gemm, unpad, maxpool, subsample, gemv, dense, so the study's table
7.3 (GEMM vs infrastructure time) can be printed.
"""
from __future__ import annotations

import numpy as np

from nets.errors import Unsupported, UserError

from ..base import Family, layer_params
from ..opencl.backend import OpenCLBackend
from ..opencl.net import OpenCLNet
from ..opencl.workgroups import build_fitting, shrink
from ..options import RunOptions
from .ops import ConvOp, DenseOp, MaxPoolOp, SubsampleOp
from .plan import GEMM_WORK_GROUP, plan_net


class MortonNet(OpenCLNet):
    def __init__(self, runtime, net, weights, batch: int, work_group: tuple):
        super().__init__(runtime, net, batch)
        try:
            self._build(weights, work_group)
        except BaseException:
            self.close()
            raise
        self.finish_prepare()
        self.flatten()   # every kernel's arguments set here, once: a pass only enqueues

    def _gemm_work_group(self, wanted: tuple) -> tuple:
        """The GEMM's work-group: the one wanted, shrunk to the device's limits
        (the C blocks, and so the padding, follow from it)."""
        fitted, _probe = build_fitting(self.rt, "morton_gemm.cl", "morton_gemm", lambda lim: shrink(tuple(wanted), lim),
                                       lambda wg: {"L_PAD": 4, "N_PAD": 2 * wg[1], "ACT": 0}, lambda wg: wg[0] * wg[1])
        return fitted

    def _poisoned(self, floats: int, what: str):
        """A buffer full of NaN, so an element no step writes shows.  Written
        whole from the host rather than by alloc's fill: after a
        clEnqueueFillBuffer, or a host write of part of a buffer, Oclgrind
        21.10 reports values that kernels wrote there later as uninitialised."""
        buf = self.alloc(floats * 4, what, poison=False)
        self.rt.write(buf, np.full(floats, np.nan, np.float32))
        return buf

    def _build(self, weights, work_group):
        net, batch = self.net, self.batch
        wg = self._gemm_work_group(work_group)
        plan = plan_net(net, batch, wg)
        what = f"each of the two shared buffers ({plan.buffer_floats} floats, for the {plan.sized_by})"
        self.rt.check_alloc(plan.buffer_floats * 4, what)
        self.data_buffers = [self._poisoned(plan.buffer_floats, f"shared buffer {i}: {what}") for i in (0, 1)]
        self.data_buffers.append(self._poisoned(batch * int(np.prod(net.in_shape(0))), "input buffer"))
        layers = {}
        for i, (layer, lp) in enumerate(zip(net.layers, plan.layers)):
            params = layer_params(net, weights, i)
            if layer.kind == "conv":
                op = ConvOp(self, layer, i, lp, params["weight"], params["bias"], wg)
            elif layer.kind == "maxpool":
                op = MaxPoolOp(self, layer, i, lp)
            elif layer.kind == "subsample":
                op = SubsampleOp(self, layer, i, lp, params["coeff"], params["bias"])
            elif layer.kind == "dense":
                op = DenseOp(self, layer, i, lp, params["weight"], params["bias"])
            else:
                raise Unsupported(f"{layer.name}: the morton backend has no kernel for layer kind {layer.kind!r}")
            self.ops.append(op)
            layers[layer.name] = {"steps": " + ".join(name for name, _, _ in op.steps), **lp.describe()}
        self.config.update({
            "gemm_work_group": list(wg),
            "gemm_output_block": f"{2 * wg[0]} x {2 * wg[1]}",
            "layouts": {"filters": "R_2_4_R", "im2col": "C_4_2_C", "gemm_output": "row-major, padded"},
            "bias_activation": "fused into the Morton GEMM's store",
            "shared_buffer_floats": plan.buffer_floats,
            "shared_buffers_sized_by": plan.sized_by,
            "layers": layers,
            "step_timing": "every step is our own kernel, timed by its profiling event",
        })


class MortonBackend(OpenCLBackend):
    name = "morton"
    family = Family.HAND_WRITTEN
    summary = "im2col + Hybrid Morton Order GEMM (R_2_4_R x C_4_2_C, 4x16 work-groups), two shared buffers"

    def __init__(self, runtime, options: RunOptions | None = None, work_group: tuple = GEMM_WORK_GROUP):
        super().__init__(runtime, options)
        if len(work_group) != 2 or min(work_group) < 1:
            raise UserError(f"morton: the GEMM work-group must be two positive sizes, not {work_group!r}")
        self.work_group = tuple(int(v) for v in work_group)

    @classmethod
    def unsupported(cls, net):
        why = super().unsupported(net)
        if why is None:
            return None
        # the design's own limits, beyond the kinds not written yet
        limits = []
        if any(getattr(layer, "groups", 1) > 1 for layer in net.layers):
            limits.append("its Morton-ordered GEMM has no grouped form (one GEMM per group would be a "
                          "GEMV-sized Morton tile each)")
        if any(len(net.sources(i)) > 1 for i in range(len(net.layers))):
            limits.append("its two shared buffers hold no residual branch")
        return why + "".join(f"; and {text}" for text in limits)

    def prepare(self, net, weights, batch, mode=None):
        return MortonNet(self.runtime, net, weights, batch, self.work_group)
