"""The layers of the CLBlast backends, each composed from CLBlast routines
as in the study's chapter 5, plus small own kernels for what CLBlast lacks.

Timing: every CLBlast call is bracketed by markers on the in-order
profiling queue (rec.library): the event a routine returns may cover only
its last internal kernel, so it is never used as the routine's time.  Our
own kernels are timed by their own events (rec.kernel).

Buffers are plain pyopencl Buffers from OpenCLNet.alloc/upload; pyclblast
wants pyopencl Arrays, so each buffer is also wrapped once as an Array
(the wrapper holds no memory of its own).  Offsets passed to CLBlast are
in floats.
"""
from __future__ import annotations

import numpy as np
import pyopencl.array as cla

from ..opencl.net import LayerOp
from . import library, overrides, problems
from .conv_plan import ConvPlan, group_weights
from .own_kernels import Padder, own_kernel, own_step
from .library import pyclblast
from .tuned import COPY_KERNELS, CONVGEMM_KERNELS, GEMM_KERNELS, GEMV_KERNELS, Applied


def as_array(queue, buf, shape):
    return cla.Array(queue, shape, np.float32, data=buf)


def im2col_floats(batch, in_shape, kernel, out_shape) -> tuple[int, int]:
    """(rows, columns) of the im2col matrix of a whole batch: rows are
    (image, channel, fy, fx), columns the output pixels of one image."""
    c = in_shape[0]
    return batch * c * kernel[0] * kernel[1], out_shape[1] * out_shape[2]


def subsample_as_conv_weight(coeff: np.ndarray, kernel) -> np.ndarray:
    """The study's sparse filters (section 5.1.3): a (C, C, kh, kw) filter
    bank, zero except filter c on channel c, which holds coeff[c] / (kh*kw)
    (the window mean times the coefficient)."""
    c = len(coeff)
    weight = np.zeros((c, c) + tuple(kernel), np.float32)
    scaled = np.asarray(coeff, np.float32) / np.float32(kernel[0] * kernel[1])
    weight[np.arange(c), np.arange(c)] = scaled[:, None, None]
    return weight


_step_name = own_step   # the name best.py knows it by


class ClblastOp(LayerOp):
    """Common part: input and output buffers, canonical reads and writes, and
    the CLBlast parameters its routines run with (tuned.Applied: put in force
    before each call, or checked to be still CLBlast's defaults)."""

    kernels: tuple = ()   # the database kernels its routines compile

    @property
    def queue(self):
        """The runtime's queue as it is now (a whole pass runs on one without profiling: Runtime.unprofiled)."""
        return self.rt.queue

    def __init__(self, owner, layer, index, in_buf, out_buf, separate_activation=True, sets=None, problem=None):
        """`in_buf`: the buffer it reads, or a list of them (an add reads several, in the
        layer's order).  `sets`: the (kernel, parameters) overrides its routines run with;
        None: the tuning's for `problem` (its main routine's call), the rest CLBlast's defaults."""
        super().__init__(layer, index)
        kernels = self.kernels_used(owner.batch)
        relies = kernels + (("GemmRoutine",) if "XgemmDirect" in kernels else ())
        if sets is None:
            sets = owner.tuning.sets(problem) if problem is not None else []
        route = dict(sets).get("GemmRoutine")
        if route is not None:   # a GEMM forced to one kernel never runs the other: no reliance on its defaults
            unused = "XgemmDirect" if route == overrides.ALWAYS_INDIRECT else "Xgemm"
            relies = tuple(k for k in relies if k != unused)
        self.apply = Applied(owner.rt.device, sets, relies)
        self.rt = owner.rt
        self.batch = owner.batch
        self.in_shape = (owner.batch,) + tuple(owner.net.in_shape(index))
        self.out_shape = (owner.batch,) + tuple(owner.net.out_shape(index))
        self.in_bufs = list(in_buf) if isinstance(in_buf, (list, tuple)) else [in_buf]
        self.in_buf, self.out_buf = self.in_bufs[0], out_buf
        self.out_count = int(np.prod(self.out_shape))
        self.activation = None
        if separate_activation and layer.activation != "none":
            self.activation = own_kernel(self.rt, "activate_inplace", layer.activation, (self.out_count,),
                                        COUNT=self.out_count)
        self.recipe: list[str] = []   # the step names, for prepared.config

    def kernels_used(self, batch: int) -> tuple:
        return self.kernels

    def write_input(self, x):
        """One canonical array for its (first) input, or a list of one per input."""
        for buf, array in zip(self.in_bufs, x, strict=True) if isinstance(x, list) else [(self.in_buf, x)]:
            self.rt.write(buf, array)

    def read_output(self):
        return self.rt.read(self.out_buf, self.out_shape)

    def _activation_step(self) -> list[str]:
        return [f"{self.layer.activation} (own kernel)"] if self.activation else []

    def _activate(self, rec):
        if self.activation is not None:
            rec.kernel(f"{self.layer.activation} (own kernel)", self.activation(self.out_buf))

    def describe(self) -> str:
        return " + ".join(self.recipe)


class Im2colConvOp(ClblastOp):
    """Convolution (and subsampling as sparse convolution), the study's way:
    xCOPY the pre-expanded bias into the output, xIM2COL of the whole batch,
    then xGEMM (one image, one group) or xGEMMBATCHED (one GEMM per image and
    group, conv_plan.py) with beta = 1, then the activation.  A 1x1 stride-1
    convolution skips xIM2COL (its input is its own im2col); an asymmetric
    padding is padded first by our own kernel.
    """

    kernels = COPY_KERNELS + GEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, stride, pad, col_buf, groups=1):
        n = owner.batch
        plan = ConvPlan.of(n, owner.net.in_shape(index), owner.net.out_shape(index), weight.shape[2:], stride,
                           pad, groups, getattr(layer, "dilation", (1, 1)))
        super().__init__(owner, layer, index, in_buf, out_buf, problem=problems.plan_gemm(plan))
        self.plan = plan
        self.pad = Padder(owner, self, plan, self.in_shape)
        q = self.queue
        self.weight = as_array(q, owner.upload(group_weights(weight), f"weights of {layer.name}"),
                               (plan.out_channels, plan.ckk))
        # CLBlast cannot set a buffer, so the output starts as the bias, copied from one the output's size
        expanded = np.broadcast_to(np.asarray(bias, np.float32)[None, :, None], (n, plan.out_channels, plan.out_plane))
        self.bias = as_array(q, owner.upload(expanded, f"expanded bias of {layer.name}"), (self.out_count,))
        self.out_vec = as_array(q, out_buf, (self.out_count,))
        self.out_mat = as_array(q, out_buf, (n * plan.out_channels, plan.out_plane))
        self.col_buf = self.pad.out_buf if plan.pointwise else col_buf
        self.col = as_array(q, self.col_buf, (plan.gemms * plan.ckk, plan.out_plane))
        self.scalars = ([1.0] * plan.gemms, [1.0] * plan.gemms)   # alpha and beta (= 1: add to the bias)
        self.offsets = plan.offsets()
        self.gemm_name = "xGEMM" if plan.gemms == 1 else "xGEMMBATCHED"
        self.recipe = (["xCOPY"] + self.pad.steps + ([] if plan.pointwise else ["xIM2COL"]) + [self.gemm_name]
                       + self._activation_step())

    def enqueue(self, rec):
        q, plan = self.queue, self.plan
        self.apply()
        with rec.library("xCOPY"):
            pyclblast.copy(q, self.out_count, self.bias, self.out_vec)
        self.pad(rec)
        if not plan.pointwise:
            with rec.library("xIM2COL"):
                library.im2col(q, im=self.pad.out_buf, im_offset=0, col=self.col_buf, col_offset=0,
                               **plan.im2col_geometry())
        m, p, k = plan.kg, plan.out_plane, plan.ckk
        with rec.library(self.gemm_name):
            if plan.gemms == 1:
                pyclblast.gemm(q, m, p, k, self.weight, self.col, self.out_mat, a_ld=k, b_ld=p, c_ld=p,
                               alpha=1.0, beta=1.0)
            else:
                pyclblast.gemmBatched(q, m, p, k, self.weight, self.col, self.out_mat, *self.scalars, k, p, p,
                                      *self.offsets)
        self._activate(rec)


class ConvgemmOp(ClblastOp):
    """Convolution through CLBlast's fused, batched xCONVGEMM (NCHW input,
    KCHW weights, NKHW output).  It overwrites its output and takes no
    bias, so one own kernel adds the bias and applies the activation.
    xCONVGEMM has no groups: a grouped convolution is one call per image
    and group, on that group's channels at their offsets.  An asymmetric
    padding is padded first by our own kernel."""

    kernels = CONVGEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, stride, pad, sets=None, groups=1):
        plan = ConvPlan.of(owner.batch, owner.net.in_shape(index), owner.net.out_shape(index), weight.shape[2:],
                           stride, pad, groups, getattr(layer, "dilation", (1, 1)))
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=sets,
                         # a dilated one has no problem of its own (the key has no dilation): the database's
                         problem=problems.plan_convgemm(plan) if plan.dilation == (1, 1) else None)
        self.plan = plan
        self.pad = Padder(owner, self, plan, self.in_shape)
        one_call = plan.groups == 1
        self.args = dict(channels=plan.cg, height=plan.height, width=plan.width, kernel=tuple(plan.kernel),
                         pad=plan.pad, stride=tuple(plan.stride), dilation=plan.dilation, num_kernels=plan.kg,
                         batch=plan.batch if one_call else 1)
        image, plane = plan.cg * plan.height * plan.width, plan.kg * plan.out_plane
        # (input, weight, output) offsets of each call
        self.calls = [(0, 0, 0)] if one_call else [
            ((i * plan.groups + g) * image, g * plan.kg * plan.ckk, (i * plan.groups + g) * plane)
            for i in range(plan.batch) for g in range(plan.groups)]
        self.weight = owner.upload(weight, f"weights of {layer.name}")
        self.bias = owner.upload(bias, f"bias of {layer.name}")
        self.bias_activate = own_kernel(self.rt, "bias_activate", layer.activation, (self.out_count,),
                                       COUNT=self.out_count, CHANNELS=plan.out_channels, PLANE=plan.out_plane)
        self.bias_step = _step_name("bias", layer.activation)
        calls = "" if one_call else f" x {len(self.calls)} (one per image and group)"
        self.recipe = self.pad.steps + [f"xCONVGEMM{calls}", self.bias_step]

    def enqueue(self, rec):
        self.apply()
        self.pad(rec)
        with rec.library("xCONVGEMM"):
            for im, w, out in self.calls:
                library.convgemm(self.queue, im=self.pad.out_buf, im_offset=im, weight=self.weight, weight_offset=w,
                                 out=self.out_buf, out_offset=out, **self.args)
        rec.kernel(self.bias_step, self.bias_activate(self.out_buf, self.bias))


class DenseOp(ClblastOp):
    """y = x @ W + b: xCOPY the pre-expanded bias into the output, then
    xGEMM with beta = 1, or xGEMV (y = W^T x) at batch 1; then the activation."""

    def kernels_used(self, batch):
        return COPY_KERNELS + (GEMV_KERNELS if batch == 1 else GEMM_KERNELS)

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias):
        d, f = weight.shape
        problem = (problems.gemv(f, d, True) if owner.batch == 1 else problems.dense_gemm(owner.batch, d, f))
        super().__init__(owner, layer, index, in_buf, out_buf, problem=problem)
        n = self.batch
        self.d, self.f = weight.shape
        q = self.queue
        self.weight = as_array(q, owner.upload(weight, f"weights of {layer.name}"), (self.d, self.f))
        expanded = np.broadcast_to(np.asarray(bias, np.float32), (n, self.f))
        self.bias = as_array(q, owner.upload(expanded, f"expanded bias of {layer.name}"), (n * self.f,))
        self.out_vec = as_array(q, out_buf, (n * self.f,))
        if n == 1:
            self.x = as_array(q, in_buf, (self.d,))
            self.gemm_name = "xGEMV"
        else:
            self.x = as_array(q, in_buf, (n, self.d))
            self.out_mat = as_array(q, out_buf, (n, self.f))
            self.gemm_name = "xGEMM"
        self.recipe = ["xCOPY", self.gemm_name] + self._activation_step()

    def enqueue(self, rec):
        q = self.queue
        self.apply()
        with rec.library("xCOPY"):
            pyclblast.copy(q, self.batch * self.f, self.bias, self.out_vec)
        with rec.library(self.gemm_name):
            if self.batch == 1:
                # row-major W is (D x F); transposed, it maps the D inputs to the F outputs
                pyclblast.gemv(q, self.d, self.f, self.weight, self.x, self.out_vec, a_ld=self.f,
                               alpha=1.0, beta=1.0, a_transp=True)
            else:
                pyclblast.gemm(q, self.batch, self.f, self.d, self.x, self.weight, self.out_mat,
                               a_ld=self.d, b_ld=self.f, c_ld=self.f, alpha=1.0, beta=1.0)
        self._activate(rec)


class MaxPoolOp(ClblastOp):
    """CLBlast has no pooling: one own kernel (activation fused into it);
    taps in the padding are skipped, so the padding never wins."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False)
        _, _, h, w = self.in_shape
        _, _, oh, ow = self.out_shape
        n, c = self.out_shape[:2]
        self.pool = own_kernel(self.rt, "maxpool", layer.activation, (ow, oh, n * c), (8, 8, 1), H=h, W=w, OH=oh, OW=ow,
                              KH=layer.kernel[0], KW=layer.kernel[1], SH=layer.stride[0], SW=layer.stride[1],
                              PT=layer.padding[0], PL=layer.padding[1])
        self.step = _step_name("maxpool", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.pool(self.in_buf, self.out_buf))
