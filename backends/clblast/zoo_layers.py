"""The layers the classification zoo adds (issue 36), in the CLBlast backends:
each as CLBlast composes it where it can, and as a kernel of ours where it
cannot (labelled "(own kernel)"); clblast-best times both where there are two.

  concat    each input written by its producer straight into its slice of the
            concatenation's buffer, where the layout lets it (batch 1: a
            slice of NCHW is then one contiguous range, a sub-buffer of the
            concatenation's whose offset meets the device's alignment), so the
            concatenation itself does nothing; else xCOPY of each input into
            its slice, once per image
  mul       elementwise: a fill of zeros and xHAD (z = x .* y); a per-channel gate: N*C GEMMs of
            k = 1 (each plane times its gate value) in one xGEMMSTRIDEDBATCHED;
            or mul_activate (own kernel), either case; then the activation
  channels  xCOPY of each run of consecutive channels, once per image; or
            gather_channels (own kernel)
  avgpool   avgpool (own kernel): CLBlast has no pooling, as for the max-pool
  softmax   softmax (own kernel)
The activations of these layers are the activate_inplace kernel, as
elsewhere in the CLBlast backends.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from . import library
from .layers import ClblastOp, as_array
from .library import pyclblast
from .own_kernels import own_kernel, own_step
from .tuned import COPY_KERNELS, GEMM_KERNELS


def concat_placement(net, batch: int, align_bytes: int) -> dict[int, tuple[int, int]]:
    """Producer layer -> (the concatenation it writes into, its byte offset there), for each
    input that its producer can write in place: batch 1, a concatenation with no activation
    of its own, an input named once there and in no earlier placement, not itself hosting
    placed inputs (a sub-buffer cannot hold another), at an offset the device can start a
    sub-buffer at."""
    placed: dict[int, tuple[int, int]] = {}
    if batch != 1:
        return placed
    hosts: set[int] = set()
    for j, layer in enumerate(net.layers):
        if layer.kind != "concat" or layer.activation != "none" or j in placed:
            continue
        sources = net.sources(j)
        offset = 0
        for s in sources:
            size = int(np.prod(net.out_shape(s))) * 4 if s >= 0 else 0
            if (s >= 0 and sources.count(s) == 1 and s not in placed and s not in hosts
                    and offset % align_bytes == 0):
                placed[s] = (j, offset)
                hosts.add(j)
            offset += size if s >= 0 else int(np.prod(net.input_shape)) * 4
    return placed


class PlacedConcatOp(ClblastOp):
    """A concatenation whose inputs are copied into its slices where their producers
    did not write them there: one xCOPY per image and input left."""

    kernels = COPY_KERNELS

    def __init__(self, owner, layer, index, in_bufs, out_buf, in_place: list[bool], sets=()):
        super().__init__(owner, layer, index, in_bufs, out_buf, sets=list(sets))
        shapes = owner.net.in_shapes(index)
        n, total = owner.batch, int(np.prod(owner.net.out_shape(index)))
        self.copies = []   # (source array, count, source offset, destination offset)
        at = 0
        self.out_vec = as_array(self.queue, out_buf, (self.out_count,))
        for buf, shape, placed in zip(self.in_bufs, shapes, in_place, strict=True):
            size = int(np.prod(shape))
            if not placed:
                src = as_array(self.queue, buf, (n * size,))
                self.copies += [(src, size, i * size, i * total + at) for i in range(n)]
            at += size
        kept = sum(in_place)
        self.recipe = ([f"xCOPY x {len(self.copies)} (each input left, once per image)"] if self.copies else []) \
            + ([f"none for {kept} input(s): written in place by their producers"] if kept else []) \
            + self._activation_step()

    def enqueue(self, rec):
        if self.copies:
            self.apply()
            with rec.library("xCOPY"):
                for src, count, x_off, y_off in self.copies:
                    pyclblast.copy(self.queue, count, src, self.out_vec, x_offset=x_off, y_offset=y_off)
        self._activate(rec)


class HadMulOp(ClblastOp):
    """z = x .* y through xHAD, after a fill of zeros (xHAD reads z even at beta 0, and
    0 times a NaN is NaN), then the activation (own kernel)."""

    kernels = COPY_KERNELS   # xHAD runs CLBlast's Xaxpy kernels' parameters

    def __init__(self, owner, layer, index, in_bufs, out_buf, sets=()):
        super().__init__(owner, layer, index, in_bufs, out_buf, sets=list(sets))
        self.recipe = ["fill 0", "xHAD"] + self._activation_step()

    def enqueue(self, rec):
        self.apply()
        rec.kernel("fill 0", cl.enqueue_fill_buffer(self.queue, self.out_buf, np.float32(0), 0, 4 * self.out_count))
        with rec.library("xHAD"):
            library.had(self.queue, self.out_count, self.in_bufs[0], self.in_bufs[1], self.out_buf)
        self._activate(rec)


class GateGemmOp(ClblastOp):
    """Each (image, channel) plane times its gate value: N*C GEMMs of m = 1, k = 1
    (1 x 1 gate times the 1 x H*W plane) in one xGEMMSTRIDEDBATCHED; then the activation."""

    kernels = GEMM_KERNELS

    def __init__(self, owner, layer, index, in_bufs, out_buf, sets=None):
        n, c, h, w = (owner.batch,) + tuple(owner.net.in_shape(index))
        from .problems import gemm
        self.planes, self.plane = n * c, h * w
        super().__init__(owner, layer, index, in_bufs, out_buf, sets=sets,
                         problem=gemm(1, self.plane, 1, self.planes))
        q = self.queue
        self.gate = as_array(q, self.in_bufs[1], (self.planes, 1))
        self.x = as_array(q, self.in_bufs[0], (self.planes, self.plane))
        self.y = as_array(q, out_buf, (self.planes, self.plane))
        self.recipe = [f"xGEMMSTRIDEDBATCHED (gate: {self.planes} GEMMs 1x{self.plane}x1)"] + self._activation_step()

    def enqueue(self, rec):
        self.apply()
        with rec.library("xGEMMSTRIDEDBATCHED"):
            pyclblast.gemmStridedBatched(self.queue, 1, self.plane, 1, self.planes, self.gate, self.x, self.y,
                                         1, self.plane, self.plane, 1, self.plane, self.plane, alpha=1.0, beta=0.0)
        self._activate(rec)


class KernelMulOp(ClblastOp):
    """y = activation(x * g), g elementwise or a per-channel gate, in one kernel of ours."""

    def __init__(self, owner, layer, index, in_bufs, out_buf):
        super().__init__(owner, layer, index, in_bufs, out_buf, separate_activation=False, sets=[])
        shapes = owner.net.in_shapes(index)
        gate_plane = int(np.prod(shapes[0][1:])) if tuple(shapes[1]) != tuple(shapes[0]) else 0
        self.launch = own_kernel(self.rt, "mul_activate", layer.activation, (self.out_count,), COUNT=self.out_count,
                                 MUL=1, GATE_PLANE=gate_plane)
        self.step = own_step("gate multiply" if gate_plane else "multiply", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_bufs[0], self.in_bufs[1], self.out_buf))


class CopyChannelsOp(ClblastOp):
    """A selection of channels as xCOPY of each run of consecutive channels, once per image."""

    kernels = COPY_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, sets=()):
        super().__init__(owner, layer, index, in_buf, out_buf, sets=list(sets))
        c_in, h, w = owner.net.in_shape(index)
        plane, c_out, n = h * w, len(layer.order), owner.batch
        self.x = as_array(self.queue, in_buf, (n * c_in * plane,))
        self.y = as_array(self.queue, out_buf, (self.out_count,))
        self.copies = [(count * plane, (i * c_in + first) * plane, (i * c_out + at) * plane)
                       for i in range(n) for first, at, count in layer.runs()]
        self.recipe = [f"xCOPY x {len(self.copies)} (each run of channels, once per image)"] + self._activation_step()

    def enqueue(self, rec):
        self.apply()
        with rec.library("xCOPY"):
            for count, x_off, y_off in self.copies:
                pyclblast.copy(self.queue, count, self.x, self.y, x_offset=x_off, y_offset=y_off)
        self._activate(rec)


class GatherChannelsOp(ClblastOp):
    """A selection of channels and the activation in one kernel of ours."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        c_in, h, w = owner.net.in_shape(index)
        self.order = owner.rt.upload(np.asarray(layer.order, np.int32), f"channel order of {layer.name}")
        owner.buffers.append(self.order)
        self.launch = own_kernel(self.rt, "gather_channels", layer.activation, (self.out_count,),
                                 COUNT=self.out_count, GATHER=1, CIN=c_in, COUT=len(layer.order), GPLANE=h * w)
        self.step = own_step("gather channels", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_buf, self.order, self.out_buf))


class AvgPoolKernelOp(ClblastOp):
    """CLBlast has no pooling: one kernel of ours, padding, ceil mode and the divisor rule in it."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        _, _, h, w = self.in_shape
        n, c, oh, ow = self.out_shape
        top, left, bottom, right = layer.padding
        self.pool = own_kernel(self.rt, "avgpool", layer.activation, (ow, oh, n * c), (8, 8, 1), H=h, W=w, OH=oh,
                               OW=ow, KH=layer.kernel[0], KW=layer.kernel[1], SH=layer.stride[0], SW=layer.stride[1],
                               PT=top, PL=left, PB=bottom, PR=right, INCLUDE_PAD=int(layer.count_include_pad))
        self.step = own_step("avgpool", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.pool(self.in_buf, self.out_buf))


class SoftmaxOp(ClblastOp):
    """CLBlast has no softmax: one kernel of ours, a work-item per image."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        features = int(np.prod(owner.net.in_shape(index)))
        self.launch = own_kernel(self.rt, "softmax", "none", (owner.batch,), ROWS=owner.batch, FEATURES=features)
        self.step = own_step("softmax", "none")
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_buf, self.out_buf))


def sub_buffer(owner, parent, offset: int, nbytes: int, what: str):
    """A region of `parent`, the output of a layer written in place into a concatenation."""
    buf = parent.get_sub_region(offset, nbytes, cl.mem_flags.READ_WRITE)
    owner.buffers.append(buf)
    return buf
