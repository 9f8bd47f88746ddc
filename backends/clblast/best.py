"""`clblast-best`: CLBlast at its best, so that a ratio against it is one a
reader who knows CLBlast would accept.  Per layer, every composition CLBlast
allows is built and timed at prepare, and the fastest kept (as cuDNN's
benchmark mode picks an algorithm):

  conv       im2col + xGEMM (xGEMMSTRIDEDBATCHED for a batch) with beta = 0,
             forced direct and forced indirect (the GemmRoutine override),
             then one own kernel for bias + activation; or xCONVGEMM + that kernel.
             A 1x1 stride-1 conv: the GEMM on the input itself (no im2col).
             Grouped/depthwise: the GEMMs of each image's groups as one
             xGEMMSTRIDEDBATCHED (a call per image), or all images' and groups'
             as one xGEMMBATCHED with offsets, each direct and indirect; or one
             xCONVGEMM per image and group.  Asymmetric padding: padded first
             by our own kernel (conv_plan.py)
  subsample  average pooling with the coefficient, bias and activation folded
             in (own kernel: CLBlast has no pooling); or the study's sparse
             filters through xCONVGEMM + the bias kernel
  dense      xGEMM beta = 0, direct or indirect, + the bias kernel; at batch 1
             also xGEMV with the weights stored (in, out) and transposed (the
             study's) or stored (out, in), its output first set to the bias
             (xCOPY, beta 1) or to zeros
  maxpool    own kernel (CLBlast has none), padding skipped
  add        xCOPY + xAXPY + activation kernel, or our fused add+activation
             kernel (two inputs)
  global average pool
             xGEMV with a ones vector (alpha 1/HW) + activation, or our kernel

Parameters (tuned.py): in the `tuned` mode each routine runs with the one
set per kernel `compare tune` chose for the whole net, in
`tuned-per-problem` with the set verified for its exact problem (a GEMM
routed direct with an XgemmDirect set, routed indirect with an Xgemm set),
in `database` with CLBlast's own.  Each mode is prepared in a child of its
own and the runner keeps the fastest.  A candidate is timed with the
parameter switch it causes (an override call is host time a user of
per-layer sets pays), wall clock around enqueue + finish, median of
REPEATS runs (fewer once they take TIME_CAP_S) after WARMUP.  Choices and
every candidate's time are in `config`.

It runs in a child process of its own (backends/isolated.py): the overrides
it switches hold for the whole process and cannot be undone.
"""
from __future__ import annotations

import time

import numpy as np
import pyopencl as cl

from nets import TRANSFORMER_KINDS
from nets.errors import Unsupported, UserError

from ..base import Family, layer_params
from ..isolated import IsolatedBackend
from ..opencl.net import OpenCLNet, Recorder
from . import counting, library, problems
from .conv_plan import group_weights
from .transformer_layers import attention_problem, transformer_op
from .graph_layers import FEATURES, KINDS, AxpyAddOp, FusedAddOp, GemvAvgPoolOp, KernelAvgPoolOp
from .layers import ClblastOp, ConvgemmOp, MaxPoolOp, _step_name, as_array, own_kernel, subsample_as_conv_weight
from .library import check_library, pyclblast, require_library
from .own_kernels import Padder
from .strided import StridedGemm, require_right
from .backend import ClblastInProcess, OutputBuffers, clblast_modes, conv_plan, input_buffers
from .zoo_layers import (AvgPoolKernelOp, CopyChannelsOp, GateGemmOp, GatherChannelsOp, HadMulOp, KernelMulOp,
                         PlacedConcatOp, SoftmaxOp)
from .overrides import ALWAYS_DIRECT, ALWAYS_INDIRECT
from .tuned import COPY_KERNELS, GEMM_KERNELS, GEMV_KERNELS, Tuning, frozen

# clblast-best's GEMM routes: (name, the kernel the route runs, the GemmRoutine override forcing it)
ROUTES = (("direct", "XgemmDirect", ALWAYS_DIRECT), ("indirect", "Xgemm", ALWAYS_INDIRECT))

WARMUP = 1        # the first run compiles
REPEATS = 5       # timed runs per candidate at most ...
TIME_CAP_S = 0.2  # ... and no more once a candidate has taken this long (slow devices, Oclgrind)


class _Epilogue:
    """The own kernel after a routine that overwrites its output (beta = 0):
    bias per channel (planes of `plane` elements) and the activation."""

    def __init__(self, op: ClblastOp, bias: np.ndarray, channels: int, plane: int):
        self.bias = op.owner_upload(bias, f"bias of {op.layer.name}")
        self.launch = own_kernel(op.rt, "bias_activate", op.layer.activation, (op.out_count,), COUNT=op.out_count,
                                 CHANNELS=channels, PLANE=plane)
        self.step = _step_name("bias", op.layer.activation)

    def __call__(self, rec, out_buf) -> None:
        rec.kernel(self.step, self.launch(out_buf, self.bias))


class BestOp(ClblastOp):
    """A candidate: one composition of one layer, with the sets it runs with."""

    def __init__(self, owner, layer, index, in_buf, out_buf, sets):
        self.owner = owner
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=sets)

    def owner_upload(self, array, what):
        return self.owner.upload(array, what)


class GemmConvOp(BestOp):
    """The conv's GEMMs (conv_plan.py: one per image and group) with beta = 0,
    then the bias kernel; after an im2col of the whole batch (the study's
    trick: N images as N*C channels), or on the input itself for a 1x1
    stride-1 conv.  The GEMMs go as one xGEMM (one image, one group), as
    xGEMMSTRIDEDBATCHED (one call over the images, or one per image over its
    groups: the weights' stride differs between the two), or (`batched`) all
    as one xGEMMBATCHED with their offsets."""

    kernels = GEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, col_buf, sets, route, batched=False):
        super().__init__(owner, layer, index, in_buf, out_buf, sets)
        self.plan = plan = conv_plan(owner.net, owner.batch, index)
        self.pad = Padder(owner, self, plan, self.in_shape)
        q = self.queue
        self.weight = as_array(q, owner.upload(group_weights(weight), f"weights of {layer.name}"),
                               (plan.out_channels, plan.ckk))
        self.col_buf = self.pad.out_buf if plan.pointwise else col_buf
        self.col = as_array(q, self.col_buf, (plan.gemms * plan.ckk, plan.out_plane))
        self.out_mat = as_array(q, out_buf, (plan.batch * plan.out_channels, plan.out_plane))
        self.epilogue = _Epilogue(self, bias, plan.out_channels, plan.out_plane)
        self.batched = batched and plan.gemms > 1
        if plan.gemms == 1:
            self.gemm_name = "xGEMM"
        elif self.batched:
            self.gemm_name = "xGEMMBATCHED"
            self.offsets = plan.offsets()
        else:
            self.gemm_name = "xGEMMSTRIDEDBATCHED"
            if plan.groups > 1 and plan.batch > 1:
                self.gemm_name += f" x {plan.batch} (one per image)"
            self.apply()   # a geometry CLBlast gets wrong is refused here (strided.py)
            for call in self._strided_calls():
                require_right(q, owner.rt.device, call)
        self.recipe = (self.pad.steps + ([] if plan.pointwise else ["xIM2COL"])
                       + [f"{self.gemm_name} ({route}, beta 0)", self.epilogue.step])

    def enqueue(self, rec):
        q, plan = self.queue, self.plan
        self.apply()
        self.pad(rec)
        if not plan.pointwise:
            with rec.library("xIM2COL"):
                library.im2col(q, im=self.pad.out_buf, im_offset=0, col=self.col_buf, col_offset=0,
                               **plan.im2col_geometry())
        m, p, k = plan.kg, plan.out_plane, plan.ckk
        with rec.library(self.gemm_name.split(" ")[0]):
            if plan.gemms == 1:
                pyclblast.gemm(q, m, p, k, self.weight, self.col, self.out_mat, a_ld=k, b_ld=p, c_ld=p,
                               alpha=1.0, beta=0.0)
            elif self.batched:
                ones, zeros = [1.0] * plan.gemms, [0.0] * plan.gemms
                pyclblast.gemmBatched(q, m, p, k, self.weight, self.col, self.out_mat, ones, zeros, k, p, p,
                                      *self.offsets)
            else:
                count = plan.batch if plan.groups == 1 else plan.groups
                for call in self._strided_calls():
                    pyclblast.gemmStridedBatched(q, m, p, k, count, self.weight, self.col, self.out_mat, k, p, p,
                                                 *call.strides, alpha=1.0, beta=0.0, a_offset=call.offsets[0],
                                                 b_offset=call.offsets[1], c_offset=call.offsets[2])
        self.epilogue(rec, self.out_buf)

    def _strided_calls(self) -> list[StridedGemm]:
        """The xGEMMSTRIDEDBATCHED calls: one over the images, the weights shared (stride 0); or, grouped, one
        per image over its groups, each group with its own weights."""
        plan = self.plan
        m, p, k = plan.kg, plan.out_plane, plan.ckk
        if plan.groups == 1:
            return [StridedGemm(m, p, k, k, p, p, (0, k * p, m * p), (0, 0, 0))]
        return [StridedGemm(m, p, k, k, p, p, (m * k, k * p, m * p), (0, first * k * p, first * m * p))
                for first in range(0, plan.batch * plan.groups, plan.groups)]


class GemmDenseOp(BestOp):
    """Y = X W, beta = 0, then the bias kernel (batch > 1)."""

    kernels = GEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, sets, route):
        super().__init__(owner, layer, index, in_buf, out_buf, sets)
        self.d, self.f = weight.shape
        q = self.queue
        self.weight = as_array(q, owner.upload(weight, f"weights of {layer.name}"), (self.d, self.f))
        self.x = as_array(q, in_buf, (self.batch, self.d))
        self.y = as_array(q, out_buf, (self.batch, self.f))
        self.epilogue = _Epilogue(self, bias, self.f, 1)
        self.recipe = [f"xGEMM ({route}, beta 0)", self.epilogue.step]

    def enqueue(self, rec):
        self.apply()
        with rec.library("xGEMM"):
            pyclblast.gemm(self.queue, self.batch, self.f, self.d, self.x, self.weight, self.y,
                           a_ld=self.d, b_ld=self.f, c_ld=self.f, alpha=1.0, beta=0.0)
        self.epilogue(rec, self.out_buf)


class GemvDenseOp(BestOp):
    """y = W x + b at batch 1, W stored (in, out) and transposed (the study's
    layout) or stored (out, in): CLBlast runs them with different kernels
    (on an H100 the first was twice as fast on VGG-16's fc1, the second on
    others), so both are candidates.

    CLBlast's xGEMV reads y even at beta = 0 (a NaN there stays NaN), so y
    must hold numbers first: either the bias, copied by xCOPY, with beta = 1
    and an activation kernel after (`bias_first`), or zeros from a buffer
    fill, beta = 0 and the bias kernel after."""

    def kernels_used(self, batch):
        return GEMV_KERNELS + (COPY_KERNELS if self.bias_first else ())

    def __init__(self, owner, layer, index, in_buf, out_buf, weight, bias, sets, bias_first: bool,
                 transposed: bool):
        self.bias_first = bias_first
        self.transposed = transposed
        super().__init__(owner, layer, index, in_buf, out_buf, sets)
        self.d, self.f = weight.shape
        q = self.queue
        if transposed:
            self.weight = as_array(q, owner.upload(weight, f"weights of {layer.name} (in, out)"), (self.d, self.f))
            stored = "weights in x out, transposed"
        else:
            rows = np.ascontiguousarray(np.asarray(weight, np.float32).T)
            self.weight = as_array(q, owner.upload(rows, f"weights of {layer.name} (out, in)"), (self.f, self.d))
            stored = "weights out x in"
        self.x = as_array(q, in_buf, (self.d,))
        self.y = as_array(q, out_buf, (self.f,))
        if bias_first:
            self.bias = as_array(q, owner.upload(bias, f"bias of {layer.name}"), (self.f,))
            self.activation = (own_kernel(self.rt, "activate_inplace", layer.activation, (self.f,), COUNT=self.f)
                               if layer.activation != "none" else None)
            self.recipe = ["xCOPY (bias)", f"xGEMV ({stored}, beta 1)"] + self._activation_step()
        else:
            self.epilogue = _Epilogue(self, bias, self.f, 1)
            self.recipe = ["fill 0", f"xGEMV ({stored}, beta 0)", self.epilogue.step]

    def enqueue(self, rec):
        q = self.queue
        self.apply()
        if self.bias_first:
            with rec.library("xCOPY"):
                pyclblast.copy(q, self.f, self.bias, self.y)
        else:
            rec.kernel("fill 0", cl.enqueue_fill_buffer(q, self.out_buf, np.float32(0), 0, 4 * self.f))
        beta = 1.0 if self.bias_first else 0.0
        with rec.library("xGEMV"):
            if self.transposed:
                pyclblast.gemv(q, self.d, self.f, self.weight, self.x, self.y, a_ld=self.f, alpha=1.0, beta=beta,
                               a_transp=True)
            else:
                pyclblast.gemv(q, self.f, self.d, self.weight, self.x, self.y, a_ld=self.d, alpha=1.0, beta=beta)
        if self.bias_first:
            self._activate(rec)
        else:
            self.epilogue(rec, self.out_buf)


class AvgPoolOp(BestOp):
    """Subsampling in one own kernel: window mean x coefficient + bias, activation."""

    def __init__(self, owner, layer, index, in_buf, out_buf, coeff, bias):
        super().__init__(owner, layer, index, in_buf, out_buf, [])
        _, c, h, w = self.in_shape
        _, _, oh, ow = self.out_shape
        self.coeff = owner.upload(coeff, f"coefficients of {layer.name}")
        self.bias = owner.upload(bias, f"bias of {layer.name}")
        self.pool = own_kernel(self.rt, "subsample", layer.activation, (ow, oh, self.batch * c), (8, 8, 1), H=h, W=w,
                               OH=oh, OW=ow, KH=layer.kernel[0], KW=layer.kernel[1], SH=layer.stride[0],
                               SW=layer.stride[1], CHANNELS=c)
        self.step = _step_name("subsample", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.pool(self.in_buf, self.out_buf, self.coeff, self.bias))


class ClblastBestNet(OpenCLNet):
    """Buffer i+1 is layer i's output (NCHW, as `clblast`'s); per layer the
    fastest candidate, measured here."""

    counting_routines = staticmethod(counting.routine_calls)   # launches(): its CLBlast calls apart

    def __init__(self, runtime, net, weights, batch: int, tuning: Tuning, repeats: int = REPEATS):
        super().__init__(runtime, net, batch)
        self.tuning = tuning
        self.repeats = repeats
        self.activations = []
        self.choices: dict[str, dict] = {}
        try:
            self._build(weights)
        except BaseException:
            self.close()
            raise
        self.config.update({
            "composition": "per layer the fastest candidate, timed at prepare (wall clock, median of up to "
                           f"{REPEATS} runs or {TIME_CAP_S} s after {WARMUP} warm-up, parameter switches included)",
            "layers": {name: c["chosen"] for name, c in self.choices.items()},
            "candidates_ms": {name: c["candidates"] for name, c in self.choices.items()},
            "clblast_parameters": tuning.source,
            "clblast_tuning_depth": str(tuning.depth()) if tuning.records else None,
            "clblast_tuning_progress": tuning.progress() if tuning.records else None,
            "step_timing": "CLBlast routines: routine span between markers on the in-order queue (includes host "
                           "gaps between its kernels); own kernels: their own profiling events",
        })
        self.finish_prepare()

    # -- parameter sets
    def _sets(self, problem, kernel: str | None = None, route: dict | None = None):
        """The tuning's overrides for `problem` (none in the database mode), and the GEMM route."""
        sets = list(self.tuning.sets(problem, kernel))
        if route is not None:
            sets = [(k, p) for k, p in sets if k != "GemmRoutine"] + [("GemmRoutine", route)]
        return sets

    # -- building and choosing
    def _col_buffer(self):
        needs = [conv_plan(self.net, self.batch, i).col_floats()
                 for i, layer in enumerate(self.net.layers) if layer.kind == "conv"]
        needs = [floats for floats in needs if floats]   # a 1x1 stride-1 conv needs none
        if not needs:
            return None
        try:
            return self.alloc(max(needs) * 4, "im2col buffer")
        except UserError:   # past MAX_MEM_ALLOC_SIZE: the im2col compositions are out, xCONVGEMM stays
            return None

    def _candidates(self, i, layer, params, srcs, dst, col):
        """name -> a function that builds the candidate op."""
        n, src = self.batch, srcs[0]
        out = {}
        if layer.kind == "conv":
            w, b, stride, pad = params["weight"], params["bias"], layer.stride, layer.padding
            plan = conv_plan(self.net, n, i)
            gemm, cg = problems.plan_gemm(plan), problems.plan_convgemm(plan)
            if col is not None or plan.pointwise:
                prefix = "gemm" if plan.pointwise else "im2col+gemm"
                ways = [("", False)] + ([("batched-", True)] if plan.groups > 1 and n > 1 else [])
                for route, kernel, force in ROUTES:
                    sets = self._sets(gemm, kernel, force)
                    for way, batched in ways:
                        out[f"{prefix}-{way}{route}"] = (lambda s=sets, r=route, bt=batched: GemmConvOp(
                            self, layer, i, src, dst, w, b, col, s, r, bt))
            sets = self._sets(cg) if layer.dilation == (1, 1) else []   # a dilated one: the database's
            out["convgemm"] = lambda: ConvgemmOp(self, layer, i, src, dst, w, b, stride, pad, sets=sets,
                                                 groups=layer.groups)
        if layer.kind == "subsample":
            out["avgpool"] = lambda: AvgPoolOp(self, layer, i, src, dst, params["coeff"], params["bias"])
            sparse = subsample_as_conv_weight(params["coeff"], layer.kernel)
            c = self.net.in_shape(i)[0]
            sets = self._sets(problems.convgemm(n, self.net.in_shape(i), c, layer.kernel, (0, 0), layer.stride))
            out["sparse-convgemm"] = lambda: ConvgemmOp(self, layer, i, src, dst, sparse, params["bias"],
                                                        layer.stride, (0, 0), sets=sets)
        elif layer.kind == "dense" and n == 1:
            d, f = int(np.prod(self.net.in_shape(i))), self.net.out_shape(i)[0]
            for name, first in (("copy-bias+gemv", True), ("zero+gemv", False)):
                for suffix, transposed in (("", False), ("-transposed", True)):
                    sets = self._sets(problems.gemv(f, d, transposed))
                    out[name + suffix] = (lambda s=sets, f=first, t=transposed: GemvDenseOp(
                        self, layer, i, src, dst, params["weight"], params["bias"], s, f, t))
        if layer.kind == "dense":
            gemm = problems.dense_gemm(n, int(np.prod(self.net.in_shape(i))), self.net.out_shape(i)[0])
            for route, kernel, force in ROUTES:
                sets = self._sets(gemm, kernel, force)
                out[f"gemm-{route}"] = (lambda s=sets, r=route: GemmDenseOp(
                    self, layer, i, src, dst, params["weight"], params["bias"], s, r))
        if layer.kind == "maxpool":
            out["maxpool"] = lambda: MaxPoolOp(self, layer, i, src, dst)
        if layer.kind == "add":
            out["copy+axpy"] = lambda: AxpyAddOp(self, layer, i, srcs, dst)
            if len(srcs) == 2:   # our kernel sums two
                out["fused-add"] = lambda: FusedAddOp(self, layer, i, srcs, dst)
        if layer.kind == "global_avgpool":
            sets = self._sets(problems.pooling_gemv(n, self.net.in_shape(i)))
            out["gemv-ones"] = lambda: GemvAvgPoolOp(self, layer, i, src, dst, sets)
            out["avgpool-kernel"] = lambda: KernelAvgPoolOp(self, layer, i, src, dst)
        out.update(self._zoo_candidates(i, layer, srcs, dst, params))
        if not out:
            raise Unsupported(f"{layer.name}: clblast-best has no composition for layer kind {layer.kind!r}")
        return out

    def _zoo_candidates(self, i, layer, srcs, dst, params) -> dict:
        """The classification zoo's layers (zoo_layers.py): CLBlast's composition and ours, where both exist."""
        src, out = srcs[0], {}
        if layer.kind == "concat":
            out["in-place+xcopy"] = lambda: PlacedConcatOp(self, layer, i, srcs, dst, self.outputs.in_place(i))
        elif layer.kind == "mul":
            gate = tuple(self.net.in_shapes(i)[1]) != tuple(self.net.in_shape(i))
            if gate:
                n, (c, h, w) = self.batch, self.net.in_shape(i)
                sets = self._sets(problems.gemm(1, h * w, 1, n * c))
                out["gate-gemm-batched"] = lambda: GateGemmOp(self, layer, i, srcs, dst, sets)
            else:
                out["had"] = lambda: HadMulOp(self, layer, i, srcs, dst)
            out["mul-kernel"] = lambda: KernelMulOp(self, layer, i, srcs, dst)
        elif layer.kind == "channels":
            out["copy-runs"] = lambda: CopyChannelsOp(self, layer, i, src, dst)
            out["gather-kernel"] = lambda: GatherChannelsOp(self, layer, i, src, dst)
        elif layer.kind == "avgpool":
            out["avgpool-kernel"] = lambda: AvgPoolKernelOp(self, layer, i, src, dst)
        elif layer.kind == "softmax":
            out["softmax-kernel"] = lambda: SoftmaxOp(self, layer, i, src, dst)
        elif layer.kind == "attention":   # issue 45: the batched GEMMs pointer-batched or strided, measured
            problem = attention_problem(self.net, self.batch, i)
            for route, kernel, force in ROUTES:
                sets = self._sets(problem, kernel, force)
                for batching in ("pointer", "strided"):
                    out[f"{batching}-batched-{route}"] = (lambda b=batching, s=sets: transformer_op(
                        self, layer, i, srcs, dst, params, b, s))
        elif layer.kind in TRANSFORMER_KINDS:
            out[str(layer.kind)] = lambda: transformer_op(self, layer, i, srcs, dst, params)
        return out

    def _median_ms(self, run, before=None) -> float:
        """Median wall time of `run` (enqueue) + finish after WARMUP untimed
        runs: at most `repeats` runs, fewer once they took TIME_CAP_S; each
        after `before` (when given); 0 when none was timed."""
        for _ in range(WARMUP):
            run()
        self.rt.finish()
        times = []
        while len(times) < self.repeats and sum(times) < TIME_CAP_S * 1e3:
            if before is not None:
                before()
            t0 = time.perf_counter()
            run()
            self.rt.finish()
            times.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(times)) if times else 0.0

    def _time(self, op, before) -> float:
        """`op`'s time, each run after `before` (the previous layer's choice)
        has put its parameters back in force."""
        quiet = Recorder(self.rt.queue, enabled=False)
        return self._median_ms(lambda: op.enqueue(quiet), before.apply if before is not None else None)

    def _build(self, weights):
        net, batch = self.net, self.batch
        col = self._col_buffer()
        src = self.alloc(batch * int(np.prod(net.in_shape(0))) * 4, "input buffer")
        self.activations.append(src)
        self.rt.write(src, np.zeros((batch,) + tuple(net.in_shape(0)), np.float32))   # real data, not NaN
        before = None
        self.outputs = OutputBuffers(self)
        for i, layer in enumerate(net.layers):
            dst = self.outputs.of(i)
            srcs = input_buffers(net, i, self.activations)
            self.activations.append(dst)
            timed, best, best_ms, best_bufs = {}, None, None, []
            for name, build in self._candidates(i, layer, layer_params(net, weights, i), srcs, dst, col).items():
                first = len(self.buffers)
                try:
                    op = build()
                    ms = self._time(op, before)
                except (library.ClblastError, cl.Error, UserError) as exc:   # a composition this device refuses
                    timed[name] = f"refused: {str(exc).splitlines()[0]}"
                    self._release(self.buffers[first:])
                    continue
                timed[name] = round(ms, 4)
                bufs = self.buffers[first:]
                if best_ms is None or ms < best_ms:   # what a losing candidate uploaded is freed at once
                    self._release(best_bufs)
                    best, best_ms, best_name, best_bufs = op, ms, name, bufs
                else:
                    self._release(bufs)
            if best is None:
                raise Unsupported(f"{layer.name}: no CLBlast composition ran here ({timed})")
            best.enqueue(Recorder(self.rt.queue, enabled=False))   # its output feeds the next layer's timing
            self.ops.append(best)
            self.choices[layer.name] = {"chosen": f"{best_name}: {best.describe()}", "candidates": timed}
            before = best
        self.rt.finish()
        for buf in self.activations[1:]:   # poisoned again: a run must write every element
            cl.enqueue_fill_buffer(self.rt.queue, buf, np.float32(np.nan), 0, buf.size)

    def _release(self, bufs: list) -> None:
        """Free the buffers of a candidate not kept."""
        gone = {id(b) for b in bufs}
        for b in bufs:
            b.release()
        self.buffers = [b for b in self.buffers if id(b) not in gone]


class ClblastBestInProcess(ClblastInProcess):
    """The backend itself; it runs inside the child process of ClblastBestBackend.
    Its modes and tuning are `clblast`'s."""

    name = "clblast-best"
    # timed runs per candidate; 0: build and run each once and keep the first (for a
    # simulator such as Oclgrind, where the kernels matter and the times do not)
    repeats = REPEATS

    way_words = "in the composition each layer's verified times favour"

    def ways(self, net, batch, i, tuning):
        """Layer i's compositions, a GEMM routed to the direct or the indirect kernel: where every one was
        verified, the one whose verified calls take least (what the choice at prepare measures, switches
        aside); else all of them (tuned.switches_per_pass then bounds their switches from below)."""
        options = []
        for way in problems.layer_compositions(net, batch, i):
            routes = ("XgemmDirect", "Xgemm") if any(p.routine == problems.GEMM for p in way) else (None,)
            for kernel in routes:
                route = [(p, kernel if p.routine == problems.GEMM else None, n) for p, n in way.items()]
                times = [tuning.verified_ms(p, k) for p, k, _ in route]
                ms = None if None in times else sum(t * n for t, (_, _, n) in zip(times, route))
                options.append((ms, [frozen(tuning.sets(p, k)) for p, k, _ in route]))
        if options and all(ms is not None for ms, _ in options):
            return [min(options, key=lambda o: o[0])[1]]
        return [sets for _, sets in options]

    def prepare(self, net, weights, batch, mode=None):
        require_library()
        return ClblastBestNet(self.runtime, net, weights, batch, self.tuning(net, batch, mode), self.repeats)


class ClblastBestBackend(IsolatedBackend):
    family = Family.CLBLAST
    name = "clblast-best"
    summary = ("CLBlast at its best: per layer the fastest composition it allows (im2col + GEMM direct/indirect "
               "with beta 0 + fused bias kernel, xCONVGEMM, GEMV fast path, strided batch), with the tuned parameters "
               "or CLBlast's database, whichever is faster")
    uses_opencl = True
    supported_kinds = KINDS
    supported_features = FEATURES
    inner = "backends.clblast.best:ClblastBestInProcess"
    child_per_mode = True

    @classmethod
    def unavailable_reason(cls):
        return check_library()

    def modes(self):   # told here: no child is started to ask
        return clblast_modes(self.runtime, self.options)
