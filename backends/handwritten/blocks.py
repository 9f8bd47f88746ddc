"""MobileNet-v2's inverted residuals as one kernel a block (`vectorised`,
`vectorised-tiled`; kernels/blocks.cl).

A block runs expand 1x1 -> depthwise 3x3 -> project 1x1 (-> add).  dw_pw.py
already folds the depthwise into the project; here the chain goes one step
further: the kernel that does block i's depthwise and project (and add)
also does block i+1's expand (or the net's last 1x1, conv2d_2), from the
block's output held in local memory.  The expand is a 1x1: each pixel needs
only its own block output, so a work-group never needs a neighbour's; the
depthwise after it does (a 3x3 window), which is why the chain is cut there
and the expand's output goes to global memory.  So a block is one launch
instead of three or four, and MobileNet-v2 about 20 instead of about 40.

Where: a depthwise conv d that its 1x1 project i alone reads
(dw_pw.foldable_depthwise), the block's output j (i, or the add folded into
i's epilogue, residual.py), and a 1x1 stride-1 unpadded ungrouped conv e
that reads j alone; not at the net's edges (their ops convert layouts).
The work-group computes every output channel of its pixels (the expand
needs them all), TP pixels x G work-items, its local memory TP x (the
depthwise's + the block's channels) x 4 bytes; where not even one pixel's
fit, the block stays as it was (`config` says why).

`fuse_blocks` (the nets' argument): "measured" (the default): per block the
faster at prepare of the block kernel and the ops it replaces (whatever
they are: dw_pw or two kernels, and the expand's), timed with their
launches (measured.py); "always"; or "never" (so too where fold_depthwise
is "never": a block kernel folds the depthwise).  `config["blocks_fused"]`
names each expand folded (and why others were not); `depthwise_fused`
says where each depthwise went.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from nets import Net

from ..base import layer_params
from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.net import LayerOp
from ..opencl.workgroups import Limits, build_fitting, limits
from .dw_pw import foldable_depthwise
from .measured import HOW, fastest_ms
from .net import Folded, KernelOp, bare
from .residual import InPlaceOfConv

SOURCE = "blocks.cl"
MODES = ("measured", "always", "never")
TILE_PIXELS = (8, 4, 2, 1)   # candidates, in order of preference
CPU_PIXELS = 2               # the largest tile on a CPU (a work-group is a loop on one core)
GPU_ITEMS = 128              # work-items per work-group on a GPU


def _pointwise(layer) -> bool:
    return (layer.kind == "conv" and tuple(layer.kernel) == (1, 1) and tuple(layer.stride) == (1, 1)
            and not any(layer.padding) and layer.groups == 1)


@dataclass(frozen=True)
class Chain:
    d: int   # the depthwise
    i: int   # the project 1x1
    j: int   # the block's output: i, or the add folded into i
    e: int   # the 1x1 that alone reads j's output... and only j's


def chains(net: Net, adds: dict) -> list[Chain]:
    """The blocks of `net` that chain: `adds` maps a conv to the add folded into it (residual.py)."""
    found, last = [], len(net.layers) - 1
    for i in range(len(net.layers)):
        d = foldable_depthwise(net, i)
        if d is None or d == 0:
            continue
        j = adds.get(i, i)
        readers = [k for k in range(len(net.layers)) if j in net.sources(k)]
        expands = [k for k in readers if _pointwise(net.layers[k]) and tuple(net.sources(k)) == (j,) and k != last]
        if expands and j != last:
            found.append(Chain(d, i, j, expands[0]))
    return found


@dataclass(frozen=True)
class BlockPlan:
    tp: int           # pixels per work-group
    g: int            # work-items per pixel
    pixels: int
    local_bytes: int

    @property
    def local(self) -> tuple:
        return (self.tp, self.g)

    @property
    def global_size(self) -> tuple:
        return (-(-self.pixels // self.tp) * self.tp, self.g)

    def defines(self) -> dict:
        return {"TP": self.tp, "G": self.g}


def plan_block(pixels: int, xv: int, yv: int, zv: int, gpu: bool, compute_units: int, lim: Limits,
               local_mem: int) -> BlockPlan | None:
    """The tile of a block kernel: the largest of TILE_PIXELS whose local rows fit (on a GPU the
    largest that still gives a work-group per compute unit, on a CPU at most CPU_PIXELS); None
    where one pixel's do not fit."""
    row = (xv + yv) * 16
    fitting = [tp for tp in TILE_PIXELS if tp * row <= local_mem and tp <= lim.max_group
               and tp <= lim.max_items[0] and (gpu or tp <= CPU_PIXELS)]
    if not fitting:
        return None
    tp = fitting[0]
    if gpu:
        tp = next((t for t in fitting if -(-pixels // t) >= compute_units), fitting[-1])
    widest = max(yv, zv)
    g = max(1, min(widest, GPU_ITEMS // tp if gpu else widest, lim.max_group // tp, lim.max_items[1]))
    return BlockPlan(tp, g, pixels, tp * row)


class BlockOp(InPlaceOfConv):
    """The project's op running the block kernel: host reads and writes are the project's own op's."""

    def __init__(self, conv_op, launch, args: tuple, step: str, plan: BlockPlan):
        super().__init__(conv_op)
        self.launch, self.args, self.step, self.plan = launch, args, step, plan

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


class FoldedExpand(LayerOp):
    """The expand, whose work the previous block's kernel did: nothing to enqueue."""

    def __init__(self, op):
        super().__init__(op.layer, op.index)
        self.op = op

    def enqueue(self, rec):
        pass

    def write_input(self, x):
        self.op.write_input(x)

    def read_output(self):
        return self.op.read_output()


class FusesBlocks:
    """A VectorisedNet mixin: fuse_blocks() chains each block into one kernel where `fuse_blocks` says so."""

    def fuse_blocks(self, ops: list) -> None:
        fused, kept = {}, {}
        if self.forms.fuse_blocks == "never":
            return
        adds = {i: j for i, (j, _, _) in self.residual_folds.items()}
        for ch in chains(self.net, adds):
            e_name = self.net.layers[ch.e].name
            if self.forms.fold_depthwise == "never":   # a block kernel folds the depthwise too
                kept[e_name] = "its own kernel: folding turned off (fold_depthwise='never')"
                continue
            start = len(self.buffers)
            built = self._block_op(ch)
            if isinstance(built, str):
                kept[e_name] = f"its own kernel: {built}"
                continue
            first = self.ops[ch.d]
            fold = [Folded(first), built]
            timed = ""
            if self.forms.fuse_blocks == "measured":
                now = [ops[ch.d], ops[ch.i], ops[ch.e]]
                ms = fastest_ms(self.rt, {"block": fold, "as it was": now})
                if ms["as it was"] <= ms["block"]:
                    self.release(self.buffers[start:])
                    kept[e_name] = (f"its own kernel: measured faster so ({ms['as it was']:.4f} ms against "
                                    f"{ms['block']:.4f} as one block kernel)")
                    continue
                timed = f"; measured {ms['block']:.4f} ms against {ms['as it was']:.4f} as it was"
                self.config["measured_forms"] = HOW
            ops[ch.d], ops[ch.i], ops[ch.e] = fold[0], built, FoldedExpand(self.ops[ch.e])
            names = [self.net.layers[k].name for k in (ch.d, ch.i) + ((ch.j,) if ch.j != ch.i else ()) + (ch.e,)]
            plan = built.plan
            fused[e_name] = (f"into {self.net.layers[ch.i].name}'s block kernel ({' + '.join(names)}: "
                             f"{plan.tp} pixels x {plan.g} work-items a group, {plan.local_bytes} B of local "
                             f"memory{timed})")
            dw = self.net.layers[ch.d].name
            self.config.setdefault("depthwise_fused", {})[dw] = f"into {self.net.layers[ch.i].name}'s block kernel"
            self.config.get("depthwise_not_fused", {}).pop(dw, None)
        self.config["blocks_fused"] = fused
        if kept:
            self.config["blocks_not_fused"] = kept

    def _block_op(self, ch: Chain):
        """The block kernel's op for chain `ch`, or why it cannot be built."""
        net = self.net
        dw, pw, ex = net.layers[ch.d], net.layers[ch.i], net.layers[ch.e]
        src, mid, dst, out = self.input_layout(ch.d), self.layouts[ch.d + 1], self.layouts[ch.j + 1], \
            self.layouts[ch.e + 1]
        if any(lay.is_view for lay in (src, mid, dst, out)):
            return "a view of a concatenation's buffer, and the block kernel takes no channel pitch"
        xv, yv, zv = mid.c_stored // 4, dst.c_stored // 4, out.c_stored // 4
        local_mem = int(self.rt.info["local_mem_bytes"])

        def choose(lim):
            return plan_block(self.batch * dst.h * dst.w, xv, yv, zv, self.device != "cpu",
                              int(self.rt.info["compute_units"]), lim, local_mem)
        if choose(limits(self.rt)) is None:
            return (f"one pixel's {mid.c_stored} depthwise and {dst.c_stored} block channels need "
                    f"{(xv + yv) * 16} B of local memory, the device has {local_mem} B")
        _, extra, residual = self.residual_folds.get(ch.i, (ch.i, {}, None))
        defines = {**self.window_defines(dw, src, dst), "ACT": ACT_CODES[pw.activation],
                   "DACT": ACT_CODES[dw.activation], "MC": mid.c, **extra,
                   "ZC": out.c, "ZC4": out.c_stored, "ZHP": out.hp, "ZWP": out.wp, "ZPT": out.pad_h,
                   "ZPL": out.pad_w, "ZACT": ACT_CODES[ex.activation]}
        plan, kernel = build_fitting(self.rt, SOURCE, "block", choose,
                                     lambda p: {**defines, **p.defines()}, lambda p: p.tp * p.g)
        used = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, self.rt.device)
        if used > local_mem:
            return f"the built kernel takes {used} B of local memory, the device has {local_mem} B"
        launch = Launch(self.rt, SOURCE, "block", None, plan.global_size, plan.local, exact=True, kernel=kernel)
        residual_arg = (residual,) if residual is not None else ()
        args = (bare(self.ops[ch.d]).in_buf, *bare(self.ops[ch.d]).args[1:3],   # the depthwise kernel's own
                *self._pointwise_buffers(ch.i, mid.c_stored, dst.c_stored), *residual_arg,
                *self._pointwise_buffers(ch.e, dst.c_stored, out.c_stored),
                self.activations[ch.j + 1], self.activations[ch.e + 1])
        what = step_name("depthwise", dw.activation) + "+" + step_name("conv 1x1", pw.activation)
        if ch.j != ch.i:
            what = step_name(f"{what}+add", net.layers[ch.j].activation)
        what = f"block {what}+" + step_name("conv 1x1", ex.activation)
        return BlockOp(bare(self.ops[ch.i]), launch, args, what, plan)

    def _pointwise_buffers(self, k: int, c_stored: int, k_stored: int) -> tuple:
        """1x1 conv k's weights as rows (k_stored, c_stored) and its bias (k_stored): the buffers of
        vectorised's conv kernel, which hold them so, else uploaded so (a tiled conv's are columns)."""
        op = bare(self.ops[k])
        if isinstance(op, KernelOp) and op.launch.name == "conv":
            return op.args[1:3]
        params = layer_params(self.net, self._weights, k)
        weight = np.zeros((k_stored, c_stored), np.float32)
        weight[:params["weight"].shape[0], :params["weight"].shape[1]] = params["weight"][:, :, 0, 0]
        bias = np.zeros(k_stored, np.float32)
        bias[:len(params["bias"])] = params["bias"]
        name = self.net.layers[k].name
        return self.upload(weight, f"{name} weights (block)"), self.upload(bias, f"{name} bias (block)")
