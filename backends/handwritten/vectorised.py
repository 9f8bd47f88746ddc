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
- graphs (ResNet, MobileNet): each layer reads the buffers it names; a
  depthwise conv has a float4 kernel of its own, a grouped one runs as the
  dense conv with zero blocks (labelled); a residual add and its activation
  are folded into the epilogue of the conv before it where that conv only
  feeds the add (residual.py), else it is a kernel of its own;
- a net's head, a global average pool and the dense layer that alone reads
  it, as one kernel (the pooled vector in local memory) where measured
  faster at prepare (head_fused.py);
- a depthwise conv whose only reader is a 1x1 stride-1 conv (MobileNet-v2's
  depthwise -> project) is folded into it: one kernel computes a tile of
  pixels' depthwise results into local memory and the 1x1 (and its folded
  add) from there, so the depthwise output never goes through global
  memory (dw_pw.py); where the tile does not fit the device's local memory,
  with fold_depthwise="never", or with "measured" where the two kernels
  measured faster at prepare, they stay two kernels (`config` says which);
  on a device preferring float vectors of 8+ (a CPU), the pair as it then
  is is measured against cpu_fold.py's vector fold (register tiles, the
  depthwise outputs in a private buffer), and the faster kept;
- per layer, forms of the same work measured at prepare, the faster kept
  (docs/kernels.md): a 3x3 stride-1 conv as Winograd F(2x2) or F(4x4),
  one kernel or its tile products as a batched GEMM (winograd.py,
  winograd_gemm.py), against the direct kernel; a MobileNet-v2 block's
  depthwise, project and add with the next block's expand as one kernel
  (blocks.py) against the kernels it replaces; a 1x1 stride-1 conv as a
  register-blocked GEMM (pointwise.py) against the direct kernel;
- the net's input goes NCHW -> NHWC (border, padding channels), and its
  output back where it is not already canonical, in small kernels on the
  device timed with the first and last layers (net.py, kernels/layout.cl);
- two modes, measured against each other as every mode is (net.py
  ReplayingBackend): `plain`, the pass enqueued from a flat list of launches
  made at prepare (opencl/passlist.py), and `replay`, the pass recorded once
  as a cl_khr_command_buffer and replayed whole (opencl/replay.py; refused
  in one line where the device lacks the extension).
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from nets import STUDY_KINDS, TRANSFORMER_KINDS, Feature, LayerKind
from nets.errors import Unsupported

from ..base import layer_params
from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.workgroups import MAX_WASTE, build_fitting, choose_local, device_class, limits
from .blocks import FusesBlocks
from .filters import dense_rows, depthwise_filters, is_depthwise, pad_to
from .cpu_fold import FoldsVectorDepthwise, Pair
from .cpu_conv import ChoosesCpuConv, CpuConvOp, with_residual as cpu_conv_residual
from .dw_pw import TIMED, DwPwOp, fastest_ms, foldable_depthwise, plan_dw_pw
from .forms import Forms
from .forms_tuned import TunedForms
from .head_fused import FusesHeads
from .layernorm_fused import FusesLayerNorms
from .layout import round_up
from .transformer import transformer_op
from .net import Folded, HandwrittenNet, KernelOp, OutputEdge, ReplayingBackend, bare
from .residual import FoldsResidualAdds, ResidualConvOp
from .pool_fold import FoldsPools
from .transform_chain import ChainsTransforms
from .pointwise import ChoosesPointwise, PointwiseOp, with_residual as pointwise_residual
from .winograd import ChoosesWinograd, WinogradOp, with_residual
from .winograd_gemm import WinogradGemmOp, with_residual as gemm_residual
from .workgroups import CONV_SHAPES, DENSE_SHAPES, choose_gemv
from .zoo import KINDS as ZOO_KINDS, concat_views, zoo_op

SOURCE = "vectorised.cl"
MAX_ADD_INPUTS = 4   # kernels/vectorised.cl's add


def nhwc_filters(weight: np.ndarray, c_stored: int, k_stored: int) -> np.ndarray:
    """(K, C, FH, FW) -> (k_stored, FH, FW, c_stored), zero where padded."""
    k, c, fh, fw = weight.shape
    out = np.zeros((k_stored, fh, fw, c_stored), np.float32)
    out[:k, :, :, :c] = np.asarray(weight, np.float32).transpose(0, 2, 3, 1)
    return out


def ungrouped(weight: np.ndarray, groups: int) -> np.ndarray:
    """A grouped weight (K, C/groups, FH, FW) as the dense (K, C, FH, FW) it
    equals: each group's filters zero outside its own input channels."""
    k, cg, fh, fw = weight.shape
    out = np.zeros((k, cg * groups, fh, fw), np.float32)
    kg = k // groups
    for g in range(groups):
        out[g * kg:(g + 1) * kg, g * cg:(g + 1) * cg] = weight[g * kg:(g + 1) * kg]
    return out


class VectorisedNet(ChoosesCpuConv, FoldsVectorDepthwise, ChoosesWinograd, ChoosesPointwise, FusesBlocks, FusesLayerNorms,
                    FusesHeads, FoldsPools, ChainsTransforms, FoldsResidualAdds,
                    HandwrittenNet):
    order = "nhwc"
    channel_multiple = 4

    forms_class = Forms
    backend = "vectorised"   # whose choices `compare tune --scope forms` keeps for this net (forms_tuned.py)

    def __init__(self, runtime, net, weights, batch, recalled: TunedForms | None = None, **forms: str):
        """`forms`: which form of the same work each layer runs, by the names of `forms_class`'s fields
        (forms.py), each "measured" unless named; a word none of them takes is a ValueError here.
        `recalled`: the forms `compare tune` measured on this device, built instead of measuring anew."""
        self.forms = self.forms_class(**forms)
        self.recalled = recalled or TunedForms(None)
        self.device = device_class(runtime.info)
        # Mali has dot hardware (study 7.2.2); elsewhere dot is a horizontal add
        self.dot_each = int(self.device == "mali")
        self._weights = weights   # for fused_ops(), which may need a folded 1x1's weights again; not kept
        try:
            super().__init__(runtime, net, weights, batch)
        finally:
            self._weights = None
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
        top, left = layer.padding[:2] if layer.kind in ("conv", "maxpool") else (0, 0)
        kernel, stride = getattr(layer, "kernel", (1, 1)), getattr(layer, "stride", (1, 1))
        return {"N": self.batch, "XC4": src.c_stored, "XHP": src.hp, "XWP": src.wp, "XH": src.h, "XW": src.w,
                "XPT": src.pad_h, "XPL": src.pad_w, "PT": top, "PL": left,
                "YC": dst.c, "YC4": dst.c_stored, "YH": dst.h, "YW": dst.w,
                "YHP": dst.hp, "YWP": dst.wp, "YPT": dst.pad_h, "YPL": dst.pad_w,
                "FH": kernel[0], "FW": kernel[1], "SH": stride[0], "SW": stride[1],
                "ACT": ACT_CODES[layer.activation], "YS": dst.c_pitch // 4, "YO": dst.c_offset // 4,
                "DH": getattr(layer, "dilation", (1, 1))[0], "DW": getattr(layer, "dilation", (1, 1))[1]}

    def concat_views(self):
        return concat_views(self.net, self.layouts)

    def make_op(self, index, layer, params):
        if layer.kind in ZOO_KINDS:   # the classification zoo's layers: zoo.py
            return zoo_op(self, index, layer, params)
        if layer.kind in TRANSFORMER_KINDS:   # issue 45: transformer.py
            return transformer_op(self, index, layer, params)
        src, dst = self.input_layout(index), self.layouts[index + 1]
        act = ACT_CODES[layer.activation]
        if layer.kind == "dense":
            return self._dense(index, layer, params, src, dst, act)
        defines = self.window_defines(layer, src, dst)
        kernel, what = layer.kind.value, layer.kind.value
        # (image * output row, output column, group of four output channels)
        grid = (self.batch * dst.h, dst.w, dst.c_stored // 4)
        if layer.kind == "conv" and is_depthwise(layer, src.c):
            kernel, what = "depthwise", "depthwise conv"
            args = (self.upload(depthwise_filters(params["weight"], src.c_stored), f"{layer.name} weights"),
                    self.upload(pad_to(params["bias"], dst.c_stored), f"{layer.name} bias"))
        elif layer.kind == "conv":
            weight = params["weight"]
            if layer.groups > 1:   # no kernel of its own yet: the dense conv, other groups' channels zero
                weight, what = ungrouped(weight, layer.groups), f"conv ({layer.groups} groups as zero blocks)"
            args = (self.upload(nhwc_filters(weight, src.c_stored, dst.c_stored), f"{layer.name} weights"),
                    self.upload(pad_to(params["bias"], dst.c_stored), f"{layer.name} bias"))
        elif layer.kind == "subsample":
            args = (self.upload(pad_to(params["coeff"], dst.c_stored), f"{layer.name} coefficients"),
                    self.upload(pad_to(params["bias"], dst.c_stored), f"{layer.name} bias"))
        elif layer.kind == "maxpool":
            defines["POOL_PAD"] = int(any(layer.padding))
            args = ()
        elif layer.kind == "add":
            if len(layer.inputs) > MAX_ADD_INPUTS:   # the kernel has that many arguments, no more
                raise Unsupported(f"layer {layer.name} adds {len(layer.inputs)} inputs; {type(self).__name__}'s "
                                  f"add kernel takes at most {MAX_ADD_INPUTS}")
            defines["ARITY"] = len(layer.inputs)
            for i, s in enumerate(self.net.sources(index)):
                lay = self.layouts[s + 1]
                defines.update({f"X{i}HP": lay.hp, f"X{i}WP": lay.wp, f"X{i}PT": lay.pad_h, f"X{i}PL": lay.pad_w})
            args = ()
        else:   # global average pool: one work-item per image and four channels
            grid = (self.batch, 1, dst.c_stored // 4)
            what = "global avgpool"
            args = ()
        launch = Launch(self.rt, SOURCE, kernel, self._defines(kernel, defines), grid,
                        lambda lim: choose_local(grid, CONV_SHAPES[self.device], lim))
        return KernelOp(self, index, launch, args, step_name(what, layer.activation))

    def fused_ops(self):
        """The residual adds folded (residual.py), then each depthwise conv into
        the 1x1 conv after it, where dw_pw.py finds one, then each block and the
        next one's expand into one kernel, where blocks.py finds them; then each layernorm into
        the 1x1 conv that alone reads it, where layernorm_fused.py finds one; then each global average
        pool and the dense layer that alone reads it (a net's head) into one kernel (head_fused.py); then
        each 2x2 max pool into the Winograd GEMM output transform before it (pool_fold.py); then each Winograd
        GEMM output transform into the next conv's input transform (transform_chain.py)."""
        ops = super().fused_ops()
        self.fold_depthwise_convs(ops, self.residual_folds)
        self.fuse_blocks(ops)
        self.fuse_layernorms(ops)
        self.fuse_heads(ops)
        self.fold_pools(ops)
        self.chain_transforms(ops)
        return ops

    def fold_depthwise_convs(self, ops: list, adds: dict) -> None:
        """In `ops`, each depthwise conv that a 1x1 conv alone reads folded into it
        (kernels/vectorised.cl dw_pw), the 1x1's add too where `adds` (1x1 index ->
        (add index, its -D constants, its other input)) has one; `config` names the
        depthwise layers folded and those kept as kernels of their own, and why."""
        folded, kept = {}, {}
        for i, pw in enumerate(self.net.layers):
            d = foldable_depthwise(self.net, i)
            if d is None or bare(self.ops[d]).launch.name not in ("depthwise", "dw_vec"):   # their buffers serve
                continue
            dw = self.net.layers[d]
            if self.forms.fold_depthwise == "never":
                kept[dw.name] = f"its own kernel, {pw.name} another: folding turned off (fold_depthwise='never')"
                continue
            j, extra, residual = adds.get(i, (i, {}, None))
            done, why = self._fold_dw_pw(ops, d, i, j, extra, residual)
            vector = self.offer_vector_fold(ops, Pair(d, i, j, extra, residual))   # cpu_fold.py
            if vector is not None:
                folded[dw.name] = vector
            elif done:
                folded[dw.name] = why
            else:
                kept[dw.name] = f"its own kernel, {pw.name} another: {why}"
        self.config["depthwise_fused"] = folded
        if kept:
            self.config["depthwise_not_fused"] = kept

    def _fold_dw_pw(self, ops: list, d: int, i: int, j: int, extra: dict, residual) -> tuple[bool, str]:
        """ops[d], ops[i] as one dw_pw op where it builds (and, measured, is faster): whether folded, and how or why not."""
        pw = self.net.layers[i]
        built = self.dw_pw_op(d, i, j, extra, residual)
        if isinstance(built, str):
            return False, built
        first = self.ops[d]
        last = self.ops[i]   # as the net's last layer, the fold converts the output after it
        if isinstance(last, OutputEdge):
            built = OutputEdge(built, self.rt, last.stage, last.shape, last.convert)
        fold = [Folded(first), built]
        timed = ""
        if self.forms.fold_depthwise == "measured":
            one, two = fastest_ms(self.rt, [fold, [ops[d], ops[i]]])
            if two <= one:
                return False, f"measured faster so ({two:.4f} ms against {one:.4f} folded, {TIMED})"
            timed = f"; measured {one:.4f} ms against {two:.4f} as two kernels, {TIMED}"
        ops[d], ops[i] = fold
        plan = bare(built).plan
        return True, (f"into {pw.name}'s kernel (dw_pw: {plan.tp} pixels x {plan.g} work-items a group, "
                f"{plan.splits} channel split{'s' if plan.splits > 1 else ''}, "
                f"{plan.local_bytes} B of local memory"
                + (f"; {self.net.layers[j].name} in its epilogue" if j != i else "") + timed + ")")

    def dw_pw_op(self, d: int, i: int, j: int, extra: dict, residual):
        """Depthwise conv d and 1x1 conv i as one dw_pw op writing layer j's output (j != i:
        i's add, in the epilogue, `extra` its -D constants, `residual` its other input);
        or, where it cannot be built, why not."""
        dw, pw = self.net.layers[d], self.net.layers[i]
        src, mid, dst = self.input_layout(d), self.layouts[d + 1], self.layouts[j + 1]
        xv, yv = mid.c_stored // 4, dst.c_stored // 4
        local_mem = int(self.rt.info["local_mem_bytes"])

        def choose(lim):
            return plan_dw_pw(self.batch * dst.h * dst.w, xv, yv, dw.kernel[0] * dw.kernel[1], self.device != "cpu",
                              int(self.rt.info["compute_units"]), lim, local_mem)
        if choose(limits(self.rt)) is None:
            return (f"one pixel's {mid.c_stored} depthwise channels need {xv * 16} B of local memory, "
                    f"the device has {local_mem} B")
        defines = {**self.window_defines(dw, src, dst), "ACT": ACT_CODES[pw.activation],
                   "DACT": ACT_CODES[dw.activation], "MC": mid.c, **extra}
        plan, kernel = build_fitting(self.rt, SOURCE, "dw_pw", choose,
                                     lambda p: self._defines("dw_pw", {**defines, **p.defines()}),
                                     lambda p: p.tp * p.g)
        used = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, self.rt.device)
        if used > local_mem:
            return f"the built kernel takes {used} B of local memory, the device has {local_mem} B"
        launch = Launch(self.rt, SOURCE, "dw_pw", None, plan.global_size, plan.local, exact=True, kernel=kernel)
        dw_op, pw_op = bare(self.ops[d]), bare(self.ops[i])
        if isinstance(pw_op, KernelOp) and pw_op.launch.name == "conv":   # vectorised's conv: its buffers serve
            weight, bias = pw_op.args[1:3]
        else:   # another conv kernel (vectorised-tiled's), its weights in another order
            params = layer_params(self.net, self._weights, i)
            weight = self.upload(nhwc_filters(params["weight"], mid.c_stored, dst.c_stored), f"{pw.name} weights (dw_pw)")
            bias = self.upload(pad_to(params["bias"], dst.c_stored), f"{pw.name} bias (dw_pw)")
        args = (dw_op.in_buf, *dw_op.args[1:3], weight, bias) + ((residual,) if j != i else ()) \
            + (self.activations[j + 1],)
        what = f"{step_name('depthwise', dw.activation)}+{step_name('conv 1x1', pw.activation)}"
        if j != i:
            what = step_name(f"{what}+add", self.net.layers[j].activation)
        return DwPwOp(self.ops[i], launch, args, what, plan)

    def fold_residual(self, i: int, j: int, extra: dict, residual):
        """Conv i's op with add j in its epilogue (`extra`: its -D constants), writing
        add j's output; None where conv i does not run vectorised's conv kernel (the depthwise)."""
        op = self.ops[i]
        if isinstance(op, (WinogradOp, WinogradGemmOp)) and self.layouts[j + 1].is_view:
            return None   # Winograd's output kernels take no channel pitch: the add stays a kernel
        if isinstance(op, WinogradOp):
            return with_residual(self, op, j, extra, residual)
        if isinstance(op, WinogradGemmOp):
            return gemm_residual(self, op, j, extra, residual)
        if isinstance(op, PointwiseOp):
            return pointwise_residual(self, op, j, extra, residual)
        if isinstance(op, CpuConvOp):
            return cpu_conv_residual(self, op, j, extra, residual)
        if not isinstance(op, KernelOp) or op.launch.name != "conv":
            return None
        conv, src, dst = self.net.layers[i], self.input_layout(i), self.layouts[j + 1]
        defines = {**self.window_defines(conv, src, dst), **extra}
        grid = (self.batch * dst.h, dst.w, dst.c_stored // 4)
        launch = Launch(self.rt, SOURCE, "conv", self._defines("conv", defines), grid,
                        lambda lim: choose_local(grid, CONV_SHAPES[self.device], lim))
        return ResidualConvOp(op, launch, residual, self.activations[j + 1],
                              step_name(f"{op.step}+add", self.net.layers[j].activation))

    def _dense(self, index, layer, params, src, dst, act):
        in4 = src.hp * src.wp * src.c_stored
        weight = self.upload(dense_rows(params["weight"], src.c, src.h, src.w, src.c_stored, src.border),
                             f"{layer.name} weights")
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


class VectorisedBackend(ReplayingBackend):
    name = "vectorised"
    summary = ("hand-written, study 7.2/7.4: NHWC float4 conv (4 channels/work-item), tuned work-groups, float4 GEMV; "
               "graphs: depthwise conv its own float4 kernel, grouped conv as zero blocks; folds what a library call "
               "cannot: each residual add and its activation into the conv before it, and each depthwise conv into "
               "the 1x1 conv after it (one kernel, the depthwise output kept in local memory, not global) where "
               "that measured faster at prepare, else their own kernels; 3x3 stride-1 convs as Winograd F(2x2)/F(4x4) "
               "and MobileNet blocks as one kernel each, 1x1s as a blocked GEMM, where measured faster at prepare; "
               "where the device prefers float vectors of 8+ (a CPU), convs, depthwise convs, subsamplings and dense "
               "layers as register tiles of its vector width where measured faster (cpu_conv.py), a depthwise conv and the "
               "1x1 after it as one such kernel too (cpu_fold.py); a layernorm that only a 1x1 conv reads inside that 1x1's "
               "kernel where measured faster (layernorm_fused.py); a net's head, the global average pool and the dense "
               "layer that alone reads it, as one kernel where measured faster (head_fused.py); a 2x2 max pool in "
               "the Winograd GEMM's output transform before it where measured faster (pool_fold.py); on a GPU, a "
               "Winograd GEMM's output transform doing the next conv's input transform too where measured faster "
               "(transform_chain.py)")
    net_class = VectorisedNet
    supported_kinds = STUDY_KINDS | {LayerKind.ADD, LayerKind.GLOBAL_AVGPOOL} | ZOO_KINDS | TRANSFORMER_KINDS
    supported_features = frozenset(Feature)

    def make_net(self, net, weights, batch):
        return self.net_class(self.runtime, net, weights, batch, recalled=TunedForms.for_device(self.runtime.info))
