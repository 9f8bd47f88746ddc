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

from ..opencl.launch import ACT_CODES, Launch
from ..opencl.net import LayerOp
from . import library, overrides, problems
from .library import pyclblast
from .tuned import COPY_KERNELS, CONVGEMM_KERNELS, GEMM_KERNELS, GEMV_KERNELS, Applied

EXTRAS = "clblast_extras.cl"
LOCAL_SIZE = 64   # work-group size wanted for the own 1-D kernels (shrunk to what the device allows)


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


def own_kernel(rt, name: str, activation: str, size: tuple, local: tuple = (LOCAL_SIZE,), **defines) -> Launch:
    """One of our kernels from kernels/clblast_extras.cl, built for one
    layer's constants (the kernels skip the work-items past `size`)."""
    return Launch(rt, EXTRAS, name, {"ACT": ACT_CODES[activation], **defines}, size, local)


def _step_name(what: str, activation: str) -> str:
    return f"{what} (own kernel)" if activation == "none" else f"{what}+{activation} (own kernel)"


class ClblastOp(LayerOp):
    """Common part: input and output buffers, canonical reads and writes, and
    the CLBlast parameters its routines run with (tuned.Applied: put in force
    before each call, or checked to be still CLBlast's defaults)."""

    kernels: tuple = ()   # the database kernels its routines compile

    def __init__(self, owner, layer, index, in_buf, out_buf, separate_activation=True, sets=None, problem=None):
        """`sets`: the (kernel, parameters) overrides its routines run with; None: the tuning's
        for `problem` (its main routine's call), the rest CLBlast's defaults."""
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
        self.queue = owner.rt.queue
        self.batch = owner.batch
        self.in_shape = (owner.batch,) + tuple(owner.net.in_shape(index))
        self.out_shape = (owner.batch,) + tuple(owner.net.out_shape(index))
        self.in_buf, self.out_buf = in_buf, out_buf
        self.out_count = int(np.prod(self.out_shape))
        self.activation = None
        if separate_activation and layer.activation != "none":
            self.activation = own_kernel(self.rt, "activate_inplace", layer.activation, (self.out_count,),
                                        COUNT=self.out_count)
        self.recipe: list[str] = []   # the step names, for prepared.config

    def kernels_used(self, batch: int) -> tuple:
        return self.kernels

    def write_input(self, x):
        self.rt.write(self.in_buf, x)

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
    xCOPY the pre-expanded bias into the output, xIM2COL, then xGEMM (batch
    1) or xGEMMBATCHED (batch > 1) with beta = 1, then the activation.

    The batched trick (study 5.1.2): the whole batch goes through one
    xIM2COL as a single image of N*C channels.  im2col's rows are
    channel-major (c, fy, fx), so image n's rows are one contiguous block of
    C*kh*kw rows starting at row n*C*kh*kw, and padding is applied per
    channel, so that block is exactly image n's own im2col matrix.  One
    GEMM per image with offsets (W @ block n -> output n) then writes NCHW
    output directly: output n is K rows of OH*OW.
    """

    kernels = COPY_KERNELS + GEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, stride, pad, col_buf):
        n, c, h, w = (owner.batch,) + tuple(owner.net.in_shape(index))
        problem = problems.conv_gemm(n, (c, h, w), owner.net.out_shape(index), weight.shape[2:])
        super().__init__(owner, layer, index, in_buf, out_buf, problem=problem)
        k, _, fh, fw = weight.shape
        _, _, oh, ow = self.out_shape
        self.geometry = dict(channels=n * c, height=h, width=w, kernel=(fh, fw), pad=tuple(pad), stride=tuple(stride))
        self.m, self.p, self.ckk = k, oh * ow, c * fh * fw       # GEMM: (K x CKK) @ (CKK x P) per image
        q = self.queue
        self.weight = as_array(q, owner.upload(weight.reshape(k, -1), f"weights of {layer.name}"), (k, self.ckk))
        # CLBlast cannot set a buffer, so the output starts as the bias, copied from one the output's size
        expanded = np.broadcast_to(np.asarray(bias, np.float32)[None, :, None], (n, k, self.p))
        self.bias = as_array(q, owner.upload(expanded, f"expanded bias of {layer.name}"), (self.out_count,))
        self.out_vec = as_array(q, out_buf, (self.out_count,))
        self.out_mat = as_array(q, out_buf, (n * k, self.p))
        self.col_buf = col_buf
        self.col = as_array(q, col_buf, (n * self.ckk, self.p))
        self.scalars = ([1.0] * n, [1.0] * n)   # alpha and beta (= 1: add to the bias) of each GEMM
        self.offsets = ([0] * n, [i * self.ckk * self.p for i in range(n)], [i * k * self.p for i in range(n)])
        self.gemm_name = "xGEMM" if n == 1 else "xGEMMBATCHED"
        self.recipe = ["xCOPY", "xIM2COL", self.gemm_name] + self._activation_step()

    def enqueue(self, rec):
        q = self.queue
        self.apply()
        with rec.library("xCOPY"):
            pyclblast.copy(q, self.out_count, self.bias, self.out_vec)
        with rec.library("xIM2COL"):
            library.im2col(q, im=self.in_buf, im_offset=0, col=self.col_buf, col_offset=0, **self.geometry)
        with rec.library(self.gemm_name):
            if self.batch == 1:
                pyclblast.gemm(q, self.m, self.p, self.ckk, self.weight, self.col, self.out_mat,
                               a_ld=self.ckk, b_ld=self.p, c_ld=self.p, alpha=1.0, beta=1.0)
            else:
                pyclblast.gemmBatched(q, self.m, self.p, self.ckk, self.weight, self.col, self.out_mat, *self.scalars,
                                      self.ckk, self.p, self.p, *self.offsets)
        self._activate(rec)


class ConvgemmOp(ClblastOp):
    """Convolution through CLBlast's fused, batched xCONVGEMM (NCHW input,
    KCHW weights, NKHW output).  It overwrites its output and takes no
    bias, so one own kernel adds the bias and applies the activation."""

    kernels = CONVGEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, stride, pad, sets=None):
        n, c, h, w = (owner.batch,) + tuple(owner.net.in_shape(index))
        problem = problems.convgemm(n, (c, h, w), weight.shape[0], weight.shape[2:], pad, stride)
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=sets,
                         problem=problem)
        k, _, fh, fw = weight.shape
        self.args = dict(channels=c, height=h, width=w, kernel=(fh, fw), pad=tuple(pad), stride=tuple(stride),
                         num_kernels=k, batch=n)
        self.weight = owner.upload(weight, f"weights of {layer.name}")
        self.bias = owner.upload(bias, f"bias of {layer.name}")
        self.bias_activate = own_kernel(self.rt, "bias_activate", layer.activation, (self.out_count,),
                                       COUNT=self.out_count, CHANNELS=k, PLANE=self.out_shape[2] * self.out_shape[3])
        self.bias_step = _step_name("bias", layer.activation)
        self.recipe = ["xCONVGEMM", self.bias_step]

    def enqueue(self, rec):
        self.apply()
        with rec.library("xCONVGEMM"):
            library.convgemm(self.queue, im=self.in_buf, im_offset=0, weight=self.weight, weight_offset=0,
                               out=self.out_buf, out_offset=0, **self.args)
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
    """CLBlast has no pooling: one own kernel (activation fused into it)."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False)
        _, _, h, w = self.in_shape
        _, _, oh, ow = self.out_shape
        n, c = self.out_shape[:2]
        self.pool = own_kernel(self.rt, "maxpool", layer.activation, (ow, oh, n * c), (8, 8, 1), H=h, W=w, OH=oh, OW=ow,
                              KH=layer.kernel[0], KW=layer.kernel[1], SH=layer.stride[0], SW=layer.stride[1])
        self.step = _step_name("maxpool", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.pool(self.in_buf, self.out_buf))
