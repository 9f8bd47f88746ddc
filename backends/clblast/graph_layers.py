"""The layers the graph nets (ResNet-18, MobileNet-v2) add to the study's,
in the CLBlast backends: the residual add and the global average pool,
each as CLBlast composes it and as one kernel of ours (clblast-best times
both).  Convolutions with groups, 1x1 or asymmetric padding are layers.py's
(through conv_plan.py); max-pool padding is its MaxPoolOp's.

  add             xCOPY the first input into the output, xAXPY each other one
                  onto it (CLBlast: y += alpha x), then the activation (own
                  kernel); or add_activate (own kernel): the sum and the
                  activation in one pass (two inputs)
  global_avgpool  xGEMV of the (N*C x H*W) input with a ones vector, alpha
                  1/(H*W), after a fill of zeros (xGEMV reads y even at
                  beta 0), then the activation; or global_avgpool (own kernel)
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from nets import Feature, LayerKind

from . import problems
from .layers import ClblastOp, as_array
from .library import pyclblast
from .own_kernels import own_kernel, own_step
from .tuned import COPY_KERNELS, GEMV_KERNELS

# what the CLBlast backends run: every kind a loaded net holds (batch norms are folded on loading);
# the zoo's are zoo_layers.py's
KINDS = frozenset(LayerKind) - {LayerKind.BATCHNORM}
FEATURES = frozenset(Feature)


class AxpyAddOp(ClblastOp):
    """y = x0 + x1 + ...: xCOPY, then one xAXPY per further input, then the activation."""

    kernels = COPY_KERNELS   # xCOPY and xAXPY both run CLBlast's Xaxpy kernels

    def __init__(self, owner, layer, index, in_bufs, out_buf, sets=()):
        super().__init__(owner, layer, index, in_bufs, out_buf, sets=list(sets))
        q = self.queue
        self.xs = [as_array(q, buf, (self.out_count,)) for buf in self.in_bufs]
        self.y = as_array(q, out_buf, (self.out_count,))
        self.recipe = ["xCOPY"] + ["xAXPY"] * (len(self.xs) - 1) + self._activation_step()

    def enqueue(self, rec):
        q = self.queue
        self.apply()
        with rec.library("xCOPY"):
            pyclblast.copy(q, self.out_count, self.xs[0], self.y)
        for x in self.xs[1:]:
            with rec.library("xAXPY"):
                pyclblast.axpy(q, self.out_count, x, self.y, alpha=1.0)
        self._activate(rec)


class FusedAddOp(ClblastOp):
    """y = activation(x0 + x1) in one kernel of ours (two inputs only)."""

    def __init__(self, owner, layer, index, in_bufs, out_buf):
        super().__init__(owner, layer, index, in_bufs, out_buf, separate_activation=False, sets=[])
        if len(self.in_bufs) != 2:
            raise ValueError(f"{layer.name}: the fused add kernel sums two inputs, not {len(self.in_bufs)}")
        self.launch = own_kernel(self.rt, "add_activate", layer.activation, (self.out_count,),
                                 COUNT=self.out_count, ADD=1)
        self.step = own_step("add", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_bufs[0], self.in_bufs[1], self.out_buf))


class GemvAvgPoolOp(ClblastOp):
    """The mean of each (image, channel) plane as one xGEMV: (N*C x H*W) @ ones / (H*W)."""

    kernels = GEMV_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, sets=None):
        n, c, h, w = (owner.batch,) + tuple(owner.net.in_shape(index))
        super().__init__(owner, layer, index, in_buf, out_buf, sets=sets,
                         problem=problems.pooling_gemv(n, (c, h, w)))
        self.rows, self.plane = n * c, h * w
        q = self.queue
        self.a = as_array(q, in_buf, (self.rows, self.plane))
        self.ones = as_array(q, owner.upload(np.ones(self.plane, np.float32), f"ones vector of {layer.name}"),
                             (self.plane,))
        self.y = as_array(q, out_buf, (self.rows,))
        self.recipe = ["fill 0", "xGEMV (ones, alpha 1/HW)"] + self._activation_step()

    def enqueue(self, rec):
        q = self.queue
        self.apply()
        rec.kernel("fill 0", cl.enqueue_fill_buffer(q, self.out_buf, np.float32(0), 0, 4 * self.rows))
        with rec.library("xGEMV"):
            pyclblast.gemv(q, self.rows, self.plane, self.a, self.ones, self.y, a_ld=self.plane,
                           alpha=1.0 / self.plane, beta=0.0)
        self._activate(rec)


class KernelAvgPoolOp(ClblastOp):
    """The mean of each plane and the activation in one kernel of ours."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        n, c, h, w = self.in_shape
        self.launch = own_kernel(self.rt, "global_avgpool", layer.activation, (n * c,), PLANES=n * c, PLANE=h * w)
        self.step = own_step("global_avgpool", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_buf, self.out_buf))
