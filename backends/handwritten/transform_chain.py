"""A Winograd GEMM conv's output transform that also does the input transform
of the 3x3 conv after it (`vectorised`, `vectorised-tiled`;
kernels/winograd_chain.cl), one launch in place of two, where the second conv
alone reads the first.

At batch 1 on an H200, VGG-16's pass is bound by its kernels' device time, and
a Winograd transform takes 6-10 us whatever its work (NOTES.md, step 60): a
launch's fixed cost.  Seven of its convs feed the next with no pool between.
Chained, the first conv's output is never written: a work-group computes it
for a block of tiles and a ring of tiles around it (a next tile's window
reaches one pixel into each neighbour) in local memory, and from there the
next conv's transformed tiles, V, which its GEMM reads as before.

A pair chains where conv i's op is the plain GEMM form, conv j = i + 1 is a
GEMM form of the same tile (its output transform may do an add or a pool)
padded by one on every side, j alone reads i, and neither is at the net's
edge.  Each pair is decided alone, its first conv doing its own input
transform, so a conv both fed and feeding (VGG-16's conv3_2) is two decisions;
V is the net's shared scratch, and nothing runs between i and j.

Each block shape (BLOCKS: tiles a side, channel float4s a work-group) that
fits the device must give the two kernels' output on a random input (the same
float32 arithmetic: a difference is a fault), then the shapes and the two
kernels are timed at prepare (measured.py), the fastest kept; `chain_transforms`
"always" takes the first shape unmeasured, "never" keeps the two kernels.
Offered on a GPU (a CPU's launches are not its cost) unless forced.  The
layer-wise checks keep the unfused ops.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from nets import Net

from ..opencl.launch import Launch, step_name
from ..opencl.workgroups import limits
from .fold_choice import OWN, pair_outputs
from .measured import HOW, fastest_ms, rel_l2
from .winograd_gemm import OwnOutputTransform, WinogradGemmOp
from .winograd_math import applies, name

MODES = ("measured", "always", "never")
SOURCE = "winograd_chain.cl"
BLOCKS = ((7, 2), (7, 1), (4, 4), (4, 2))   # (tiles a side, channel float4s): 1.65x and 2.25x the tiles at most
CANDIDATES = 3   # block shapes timed per pair on a GPU
WARP = 32        # a work-group's items rounded up to this
MAX_REL_L2 = 1e-6
SEED = 43


@dataclass(frozen=True)
class Block:
    bt: int   # tiles a side
    kc: int   # channel float4s a work-group

    def items(self, max_group: int) -> int:
        """A work-group's work-items: one a (ring tile, channel float4), as far as the device allows."""
        return min(-(-self.kc * (self.bt + 2) ** 2 // WARP) * WARP, max_group)

    def local_bytes(self, m: int) -> int:
        return self.kc * (m * self.bt + 2) ** 2 * 16

    @property
    def label(self) -> str:
        return f"blocks of {self.bt}x{self.bt} tiles, {4 * self.kc} channels"


def chainable(net: Net, i: int) -> int | None:
    """The index of the conv whose input transform conv i's output transform can do, or None (module
    docstring: the ops' forms are checked by the caller)."""
    j = i + 1
    if i <= 0 or j >= len(net.layers) - 1 or net.layers[i].kind != "conv":
        return None
    nxt = net.layers[j]
    if not applies(nxt, 1) or tuple(nxt.padding) != (1, 1, 1, 1) or tuple(net.sources(j)) != (i,):
        return None
    readers = [k for k in range(len(net.layers)) if i in net.sources(k)]
    return j if readers == [j] else None


def blocks(net, i: int, m: int) -> list[Block]:
    """The block shapes that fit the device for conv i's output (a side clipped to the image's tiles)."""
    dst = net.layouts[i + 1]
    side = max(-(-dst.h // m), -(-dst.w // m))
    lim, local_mem = limits(net.rt), int(net.rt.info["local_mem_bytes"])
    found = []
    for bt, kc in BLOCKS:
        b = Block(min(bt, side), kc)
        if b not in found and (dst.c_stored // 4) % kc == 0 and b.local_bytes(m) <= local_mem \
                and b.items(lim.max_group) <= lim.max_items[0]:
            found.append(b)
    return found


class ChainedGemmOp(OwnOutputTransform):
    """Conv i's GEMM form whose output transform writes conv j's transformed input tiles instead of its output."""

    def __init__(self, op: WinogradGemmOp, launch: Launch, block: Block):
        super().__init__(op)
        self.launch, self.block = launch, block
        v_buf, _, m_buf = op.gemm_args   # the net's shared scratch: j's GEMM reads V next
        self.output_args = (m_buf, op.output_args[1], v_buf)
        act = op.layer.activation
        self.output_step = step_name(f"winograd {name(op.plan.m)} output transform", act) + "+next input transform"
        self.step = f"winograd {op.plan.form}, output transform+next input transform"

    def describe(self) -> dict:
        return {**self.conv_op.describe(), "kernel": self.step, "chained": self.block.label}


def conv_of(op) -> WinogradGemmOp:
    """The conv's own GEMM form inside `op` (itself, or the op whose output transform does more)."""
    return op.conv_op if isinstance(op, OwnOutputTransform) else op


def fed(op):
    """`op` (a GEMM form, its output transform its own or doing more) with its input transform left out: the
    conv before it wrote its transformed tiles."""
    done = copy.copy(op)
    done.fed = True
    return done


def chain_launch(net, op: WinogradGemmOp, block: Block) -> Launch:
    i, m = op.index, op.plan.m
    dst = net.layouts[i + 1]
    window = net.window_defines(net.net.layers[i], net.input_layout(i), dst)
    side_h, side_w = -(-dst.h // m), -(-dst.w // m)
    groups = net.batch * -(-side_h // block.bt) * -(-side_w // block.bt)
    g = block.items(limits(net.rt).max_group)
    defines = {**window, "WM": m, "PARTS": op.plan.parts, "BT": block.bt, "KC": block.kc, "G": g}
    return Launch(net.rt, SOURCE, "wg_output_input", defines, (groups * g, dst.c_stored // 4 // block.kc), (g, 1),
                  exact=True)


class ChainsTransforms:
    """A VectorisedNet mixin: chain_transforms() runs each chainable pair's two transforms as one kernel, where
    `chain_transforms` says so (module docstring)."""

    def chain_transforms(self, ops: list) -> None:
        mode = self.forms.chain_transforms
        if mode == "never" or (mode == "measured" and self.device == "cpu"):
            return
        links, kept, records = {}, {}, {}
        for i in range(len(ops)):
            j = chainable(self.net, i)
            if j is None or not self._chain_forms(ops, i, j):
                continue
            first = self.net.layers[i].name
            records[first] = {}
            chosen, why = self._chain_pair(ops[i], ops[j], mode, records[first])
            if chosen is None:
                kept[first] = why
                continue
            links[i] = chosen
            self.config.setdefault("transforms_chained", {})[first] = \
                f"into {self.net.layers[j].name}'s input transform, {why}"
        for i, sender in links.items():   # a conv fed by the one before and feeding the one after: both
            ops[i] = fed(sender) if i - 1 in links else sender
            if i + 1 not in links:
                ops[i + 1] = fed(ops[i + 1])
        if kept:
            self.config["transforms_not_chained"] = kept
        if records:
            self.config["transform_chains"] = records

    def _chain_forms(self, ops: list, i: int, j: int) -> bool:
        """Conv i's op the plain GEMM form, conv j's a GEMM form of the same tile."""
        sender, conv_j = ops[i], conv_of(ops[j])
        return (type(sender) is WinogradGemmOp and sender is self.ops[i] and isinstance(conv_j, WinogradGemmOp)
                and conv_j.plan.m == sender.plan.m)

    def _chain_pair(self, sender: WinogradGemmOp, receiver, mode: str, record: dict):
        """(the chained op kept for `sender`, or None; the block shape and its times, or why not), `record`
        filled with each shape's error against the two kernels and, measured, every form's time."""
        i, j, conv_j = sender.index, receiver.index, conv_of(receiver)
        chained = {b.label: ChainedGemmOp(sender, chain_launch(self, sender, b), b)
                   for b in blocks(self, i, sender.plan.m)[:1 if mode == "always" else CANDIDATES]}
        # held against the two kernels on conv j's own output (an add or a pool in its output transform writes
        # another layer's buffer); that output transform is the same either way
        x = np.random.default_rng(SEED + i).standard_normal(self.input_layout(i).canonical_shape)
        outs = pair_outputs(self, i, j, {OWN: [sender, conv_j], **{k: [op, fed(conv_j)] for k, op in chained.items()}},
                            x.astype(np.float32))
        err = {k: rel_l2(outs[k], outs[OWN]) for k in chained}
        record["rel_l2_against_own_kernels"] = {k: float(f"{v:.2e}") for k, v in err.items()}
        forms = {k: [op, fed(receiver)] for k, op in chained.items() if err[k] <= MAX_REL_L2}   # NaN refused
        if not forms:
            return None, "its own output transform: every chained form differed from the two kernels"
        if mode != "measured":
            record["chosen"] = best = next(iter(forms))
            return forms[best][0], best
        times = fastest_ms(self.rt, {**forms, OWN: [sender, receiver]})
        record["ms"] = {k: round(v, 4) for k, v in times.items()}
        self.config["measured_forms"] = HOW
        best = min(forms, key=times.get)
        if times[OWN] < times[best]:
            return None, f"its own output transform: measured faster so ({times[OWN]:.4f} ms against " \
                         f"{times[best]:.4f} chained)"
        record["chosen"] = best
        return forms[best][0], f"{best}; measured {times[best]:.4f} ms against {times[OWN]:.4f} as two"
