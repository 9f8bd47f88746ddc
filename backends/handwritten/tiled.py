"""`vectorised-tiled`: `vectorised` with its convolution tiled for GPUs, a
tuned variant beside the study's method, named as such (issue: make the
custom backends work well on an NVIDIA GPU).

The convolution is still the study's iterative one (section 7.2): NHWC,
float4 over channels, the zero border kept across layers, no im2col buffer.
What changes is how the work is cut: the layer is read as an implicit GEMM,
output pixels x output channels summed over (filter row, filter column,
input channel); a work-group computes a tile of it from slices of input and
filters staged in local memory, and each work-item a block of outputs held
in registers, so every value loaded feeds several multiply-adds instead of
one (kernels/tiled_conv.cl).  Tile and split are chosen per layer and per
device (backends/handwritten/tiled_plan.py) and recorded in `config`.

Pooling, subsampling, adds, global average pools and dense layers are
`vectorised`'s, unchanged; so are grouped convolutions (depthwise: its own
kernel; other groups: its dense conv with zero blocks), which have no tile
of their own: `config`'s tile_source says so per layer.  So are the folds:
a residual add into the tiled conv before it (its epilogue, or its adding
kernel's), and a depthwise conv into the 1x1 conv after it, which then
runs as `vectorised`'s dw_pw kernel instead of a tile (fold_depthwise
"never" keeps the two, "measured" the faster per pair: dw_pw.py).  So are
the forms measured at prepare (Winograd, block kernels: docs/kernels.md);
and a split sum is kept only where it measured faster, its second launch
included, than the same tile in one kernel; the split's parts are added by
a second kernel or by each tile's last work-group to finish, whichever
measured faster (split_choice.py).  The net's first conv, of at most four
input channels, reads the NCHW input itself where that measured faster than
converting it first (first_conv.py).
"""
from __future__ import annotations

import numpy as np

from ..opencl.launch import Launch, step_name
from ..opencl.workgroups import build_fitting, limits
from .first_conv import ReadsInputInFirstConv
from .forms import TiledForms
from .net import KernelOp
from .residual import ResidualConvOp
from .split_choice import choose_split, last_adds_refused
from .tiled_plan import TILES, plan_conv
from .forms_tuned import TunedForms
from .tiles_tuned import TunedTiles, layer_key
from .vectorised import VectorisedBackend, VectorisedNet, is_depthwise, pad_to

SOURCE = "tiled_conv.cl"


def tiled_filters(weight: np.ndarray, c_stored: int, k_stored: int) -> np.ndarray:
    """(K, C, FH, FW) -> (FH, FW, c_stored, k_stored): row r = (fy, fx, c) of
    the implicit GEMM's right-hand matrix, zero where padded."""
    k, c, fh, fw = weight.shape
    out = np.zeros((fh, fw, c_stored, k_stored), np.float32)
    out[:, :, :c, :k] = np.asarray(weight, np.float32).transpose(2, 3, 1, 0)
    return out


def tile_defines(window: dict, plan, last_adds: bool = False) -> dict:
    """The -D constants of kernels/tiled_conv.cl: the layer's window ones and the plan's (`last_adds`: a split
    sum added by the tile's last work-group, not a second kernel)."""
    return {**window, "TM": plan.tile.tm, "TN": plan.tile.tn, "TK": plan.tk, "RM": plan.tile.rm,
            "RN": plan.tile.rn, "KP": plan.kp, "KSPLIT": plan.ksplit, **({"LAST_ADDS": 1} if last_adds else {})}


class TiledConvOp(KernelOp):
    """One conv layer: the tiled kernel, then (when the sum is split) the
    kernel that adds the parts, bias and activation; or, with `counts` (the
    split's count per tile), the tiled kernel alone, its last work-group per
    tile adding the parts in `scratch`."""

    def __init__(self, net, index, launch, plan, weight, bias, reduce=None, scratch=None, counts=None,
                 defines: dict | None = None):
        layer = net.net.layers[index]
        self.defines = defines or {}   # its kernel's -D constants, for a variant of it (first_conv.py)
        self.last_adds = counts is not None
        self.what = f"tiled conv ({plan.ksplit} parts, the last adds)" if self.last_adds else "tiled conv"
        super().__init__(net, index, launch, (weight, bias, scratch, counts) if self.last_adds else (weight, bias),
                         step_name(self.what, layer.activation if reduce is None else "none"))
        self.plan = plan
        self.reduce = reduce
        if reduce is not None:
            self.args = (self.in_buf, weight, bias, scratch)   # the main kernel writes the parts
            self.reduce_args = (scratch, bias, self.out_buf)
            self.reduce_step = step_name(f"add {plan.ksplit} parts", layer.activation)

    def enqueue(self, rec):
        super().enqueue(rec)
        if self.reduce is not None:
            rec.kernel(self.reduce_step, self.reduce(*self.reduce_args))

    def describe(self) -> dict:
        return {**super().describe(), **self.plan.describe()}


class TiledNet(ReadsInputInFirstConv, VectorisedNet):
    forms_class = TiledForms
    backend = "vectorised-tiled"

    def __init__(self, runtime, net, weights, batch, tiles=TILES, ksplit=None, tuned: TunedTiles | None = None,
                 **forms: str):
        # `tiles` and `ksplit` narrow the plan's choice (benchmarks/tiles.py, compare tune sweep them);
        # `tuned`: the measured choices, used for the layers they name; `forms`: as vectorised's, and
        # split_sums (forms.TiledForms)
        self.tiles, self.ksplit = tiles, ksplit
        self.tuned = tuned or TunedTiles(None)
        self.tile_sources: dict[str, str] = {}
        super().__init__(runtime, net, weights, batch, **forms)
        self.config["tile_source"] = self.tile_sources
        self.config["conv"] = ("implicit GEMM tiles in local memory, register blocks per work-item "
                               "(kernels/tiled_conv.cl); tile and split per layer: backends/handwritten/tiled_plan.py")

    def make_op(self, index, layer, params):
        if layer.kind != "conv":
            return super().make_op(index, layer, params)
        if layer.groups > 1 or layer.dilation != (1, 1):
            kind = ("dilated" if layer.dilation != (1, 1) else
                    "depthwise" if is_depthwise(layer, self.input_layout(index).c) else "grouped")
            self.tile_sources[layer.name] = f"no tile for {kind} convolutions: vectorised's kernel"
            return super().make_op(index, layer, params)
        key = layer_key(self.batch, self.net.in_shape(index), layer)
        measured = self.tuned.choice(key)
        tiles, ksplit = ((measured[0],), measured[1]) if measured else (self.tiles, self.ksplit)
        self.tile_sources[layer.name] = self.tuned.source(key)
        first = len(self.buffers)
        op = self.tiled_op(index, layer, params, tiles, ksplit)
        if op.reduce is None or self.ksplit is not None or self.forms.split_sums == "planned":
            return op
        others = {"one kernel": lambda: self.tiled_op(index, layer, params, (op.plan.tile,), 1)}
        refused = last_adds_refused(self.rt.info)
        if refused is None:
            others[f"{op.plan.ksplit} parts, the last work-group adds"] = lambda: self.tiled_op(
                index, layer, params, (op.plan.tile,), op.plan.ksplit, last_adds=True)
        else:
            self.config["split_sums_last_adds"] = refused
        return choose_split(self, index, op, self.buffers[first:], others)

    def _forced(self, op) -> bool:
        """As vectorised's, and a tile or split the caller narrowed (`tiles`, `ksplit`) stands too."""
        return super()._forced(op) or (isinstance(op, TiledConvOp) and (self.tiles != TILES or self.ksplit is not None))

    def tiled_op(self, index, layer, params, tiles, ksplit, last_adds: bool = False) -> TiledConvOp:
        """Conv layer `index` as the tiled kernel, planned among `tiles` (and a split, where `ksplit` is None);
        `last_adds`: a split sum added by each tile's last work-group (no adding kernel)."""
        src, dst = self.input_layout(index), self.layouts[index + 1]
        pixels = self.batch * dst.h * dst.w   # the implicit GEMM's rows
        window = self.window_defines(layer, src, dst)

        def defines_of(plan):
            return tile_defines(window, plan, last_adds and plan.ksplit > 1)

        def choose(lim):
            return plan_conv(pixels, dst.c_stored, src.c_stored, layer.kernel[0] * layer.kernel[1],
                             self.rt.info["compute_units"], self.device != "cpu", lim.max_group, lim.max_items,
                             tiles, ksplit, self.rt.info["local_mem_bytes"])
        # the tile's work-items are -D constants: a kernel's own limit is known only once it is built
        plan, kernel = build_fitting(self.rt, SOURCE, "conv_tiled", choose, defines_of, lambda p: p.tile.threads)
        launch = Launch(self.rt, SOURCE, "conv_tiled", None, plan.global_size, plan.tile.local + (1,),
                        exact=True, kernel=kernel)
        weight = self.upload(tiled_filters(params["weight"], src.c_stored, plan.kp), f"{layer.name} weights")
        bias = self.upload(pad_to(params["bias"], plan.kp), f"{layer.name} bias")
        if plan.ksplit == 1:
            return TiledConvOp(self, index, launch, plan, weight, bias, defines=defines_of(plan))
        parts = plan.ksplit * pixels * plan.kp
        scratch = self.alloc(parts * 4, f"{layer.name} partial sums", poison=False)
        # NaN from the host rather than a fill: Oclgrind took the filled buffer's parts, written
        # by the tiled kernel before the adding kernel reads them, for uninitialised values
        self.rt.write(scratch, np.full(parts, np.nan, np.float32))
        if last_adds:
            tiles_of = (plan.global_size[0] // plan.tile.local[0]) * (plan.global_size[1] // plan.tile.local[1])
            counts = self.alloc(4 * tiles_of, f"{layer.name} split counts", poison=False)
            self.rt.write(counts, np.zeros(counts.size // 4, np.int32))   # each pass leaves them 0 again
            return TiledConvOp(self, index, launch, plan, weight, bias, scratch=scratch, counts=counts)
        # a small kernel over (channel groups, pixels): the runtime picks its work-groups
        reduce = Launch(self.rt, SOURCE, "conv_tiled_reduce", defines_of(plan), (dst.c_stored // 4, pixels))
        return TiledConvOp(self, index, launch, plan, weight, bias, reduce, scratch)


    def fused_ops(self):
        """As vectorised's, then the first conv reading the net's input itself where that measured faster
        than converting it first (first_conv.py)."""
        ops = super().fused_ops()
        self.read_input_in_first_conv(ops, TiledConvOp, SOURCE)
        return ops

    def fold_residual(self, i, j, extra, residual):
        """As vectorised's, for a tiled conv: the same plan, its epilogue (or, with a
        split sum, the adding kernel's) given the residual."""
        op = self.ops[i]
        if not isinstance(op, TiledConvOp):
            return super().fold_residual(i, j, extra, residual)
        conv, dst = self.net.layers[i], self.layouts[j + 1]
        defines = {**tile_defines(self.window_defines(conv, self.input_layout(i), dst), op.plan, op.last_adds),
                   **extra}
        add_act = self.net.layers[j].activation
        if op.reduce is None:
            kernel = self.rt.kernel(SOURCE, "conv_tiled", defines)
            if limits(self.rt, kernel).max_group < op.plan.tile.threads:   # the plan no longer fits: keep the add
                return None
            launch = Launch(self.rt, SOURCE, "conv_tiled", None, op.launch.global_, op.launch.local,
                            exact=True, kernel=kernel)
            return ResidualConvOp(op, launch, residual, self.activations[j + 1], step_name(f"{op.what}+add", add_act))
        reduce = Launch(self.rt, SOURCE, "conv_tiled_reduce", defines, op.reduce.global_)
        return ResidualConvOp(op, op.launch, residual, self.activations[j + 1], op.step, reduce,
                              step_name(f"add {op.plan.ksplit} parts+add", add_act))


class TiledBackend(VectorisedBackend):
    name = "vectorised-tiled"
    summary = ("hand-written, tuned variant of vectorised for GPUs: NHWC float4 conv as implicit-GEMM tiles "
               "in local memory with register blocks; tiles measured by `compare tune` where it ran, else a cost model; "
               "grouped/depthwise convs, pools as vectorised; folds as vectorised (a library call cannot): each residual "
               "add and its activation into the conv before it, each depthwise conv and the 1x1 conv after it into "
               "vectorised's one kernel through local memory (that 1x1 then untiled) where that measured faster at "
               "prepare; Winograd and block kernels as vectorised; a split sum (added by a second kernel or by "
               "each tile's last work-group) only where measured faster; on a device preferring float vectors of "
               "8+ (a CPU), "
               "the vector-width kernels as vectorised where measured faster; layernorms in the 1x1 after them and "
               "the head (global average pool + dense) as one kernel, as vectorised; the first conv reading the "
               "net's NCHW input itself, no conversion kernel, where measured faster; a branch of the pass (an op "
               "the next does not read) on a second queue beside it where the pass measured faster)")
    net_class = TiledNet

    def make_net(self, net, weights, batch):
        return TiledNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info),
                        recalled=TunedForms.for_device(self.runtime.info))
