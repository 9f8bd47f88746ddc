"""Winograd F(2x2,3x3) and F(4x4,3x3) whose tile products run as one
batched GEMM (issue 46), a form that winograd.py measures at prepare beside
the direct kernel and the one-kernel Winograd (whose products are summed
in local memory by few work-items per tile).

Three launches per layer:
1. the input transform (kernels/winograd_transforms.cl wg_input): every
   tile's patch, V = B^T d B, into a scratch buffer V (a^2, C/4, tiles)
   of float4s;
2. for each of the a^2 positions e, M[e] = V[e]^T U[e], (tiles x C) times
   (C x K): one launch batched over e (kernels/winograd_gemm.cl), register
   blocks per work-item, local-memory tiles over the input channels; U =
   G g G^T transformed once at prepare (winograd_math.filter_transform);
3. the output transform (wg_output), Y = A^T M A, with the bias, the
   residual add and the activation (kw_store.h's epilogue, as the
   one-kernel form's).

On a GPU the GEMM stages slices of V and U in local memory (wg_gemm), and
up to GPU_CANDIDATES of GPU_TILES are built and measured per layer (each a
form of its own, named "F(2x2,3x3) GEMM 64x64 (8x8)"): those that fit the
device, in the list's order (larger register blocks first), that pad the
layer's tiles and channels by at most MAX_WASTE and give every compute unit
a work-group (where none does, the least padded).  On a CPU (PoCL) a
work-group is a loop over its work-items on one core, cut at each barrier,
so the accumulators of a staged GEMM would live in memory: there the GEMM
reads global memory straight (wg_gemm_global, the caches serving the
reuse), with the first of CPU_TILES that pads by at most MAX_WASTE (else
the least padded); beside it, where the device prefers float vectors of 8
or more (AVX2, AVX-512), the vector form (wg_gemm_vec: a work-item holds
RP rows x NV vectors of the device's width, as cpu_conv.py's direct
kernels, its filters reordered in blocks of columns), where the output
channels are whole blocks.  Two candidates: each is a slow compile there.
The vector form ran 5-9x faster than the float4 one on VGG-16's shapes
(2-core AVX-512 EPYC, F(4x4) products of 64 to 512 channels: 193-301
against 34-39 GFLOP/s).  Measured
on VGG-16's conv3_2 at a 56 input (PoCL 3.1, 2-core EPYC, other work
sharing it): the staged GEMM 24-45 ms, the unstaged 17-26 ms over the
register blocks and work-groups tried (4x4 blocks: 32x32, 16x16, 4x32 tiles
within the noise of each other; 8x8 blocks slower).

Where a plan leaves the GPU few work-groups (fewer than SPLIT_BELOW a compute
unit: VGG-16's conv3 to conv5 at batch 1, 16-196 tiles of 256-512
channels), the first SPLIT_TILES plans are offered again with the sum over
input channels cut in 2 and 4 parts (each part at least MIN_PART_DEPTH
channels), each part's products a work-group of its own written to M's
part, which the output transform adds up: more work-groups to hide the
loads' latency, for the traffic of the parts.  Measured like the others.

V and M are scratch shared by all the layers of a net (an in-order queue
runs them one after another), sized for the largest layer whose own fit the
device's MAX_MEM_ALLOC_SIZE; a layer whose would not has no GEMM form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nets.errors import Unsupported

from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.workgroups import choose_local, limits
from .layout import round_up
from .net import KernelOp, bare
from .residual import InPlaceOfConv
from .vectors import vector_width
from .tiled_plan import Tile, local_bytes, slice_length
from .winograd_math import TILE_SIZES, applies, filter_transform, name

TRANSFORMS = "winograd_transforms.cl"
GEMM = "winograd_gemm.cl"
GPU_TILES = (Tile(64, 64, 8, 8), Tile(128, 64, 8, 8), Tile(32, 64, 4, 8), Tile(64, 32, 8, 4),
             Tile(32, 32, 4, 4), Tile(16, 64, 4, 4), Tile(8, 64, 4, 4), Tile(4, 64, 4, 4))
GPU_CANDIDATES = 4
CPU_TILES = (Tile(32, 32, 4, 4), Tile(16, 32, 4, 4), Tile(8, 32, 4, 4), Tile(4, 32, 4, 4))
MAX_WASTE = 0.5
# a GPU plan with fewer work-groups than SPLIT_BELOW a compute unit is offered with its sum cut in parts too
SPLIT_BELOW = 8
SPLIT_TILES = 2
SPLIT_PARTS = (2, 4)
MIN_PART_DEPTH = 64
# a CPU's vector form: where the device prefers vectors of MIN_VEC_WIDTH floats or more, (NV vectors, RP rows)
# a work-item, as cpu_conv.py's direct kernels' first tile (on AVX-512, 16x2 4 px measured fastest on VGG-16)
MIN_VEC_WIDTH = 8
VEC_TILE = (2, 4)
VEC_ROWS_A_GROUP = 4
# a transform's work-groups, in order of preference: (tiles, channel float4s) in, (channel float4s, tiles) out
INPUT_GROUPS = ((64, 1), (32, 2), (16, 4))
OUTPUT_GROUPS = ((16, 4), (8, 8), (4, 16), (2, 32), (1, 64))


@dataclass(frozen=True)
class GemmPlan:
    m: int       # output tile side: 2 or 4
    tile: Tile   # the GEMM's: TM tiles x TN channels a work-group, RM x RN a work-item
    tk: int      # input channels per local-memory slice
    rows: int    # the GEMM's rows: the layer's output tiles (all images)
    cols: int    # its columns: output channels as stored
    depth: int   # its sum: input channels as stored
    staged: bool = True   # through local memory (wg_gemm), else straight from global memory (wg_gemm_global)
    vec: tuple | None = None   # (VW, NV, RP): a CPU's vector form (wg_gemm_vec), which has no use for `tile`
    parts: int = 1   # the sum over input channels cut in this many parts, added up by the output transform

    @property
    def e(self) -> int:
        return (self.m + 2) ** 2

    @property
    def groups(self) -> int:
        return int(np.prod([g // n for g, n in zip(self.global_size, self.local)]))

    @property
    def local(self) -> tuple[int, int, int]:
        if self.vec:   # a work-group is a loop on one core: its items along id 0 read the same rows of V
            blocks = self.cols // (self.vec[0] * self.vec[1])
            return (next(n for n in (4, 2, 1) if blocks % n == 0), VEC_ROWS_A_GROUP, 1)
        return self.tile.local + (1,)

    @property
    def global_size(self) -> tuple[int, int, int]:
        if self.vec:
            vw, nv, rp = self.vec
            return (self.cols // (vw * nv), round_up(-(-self.rows // rp), VEC_ROWS_A_GROUP), self.e)
        tx, ty = self.tile.local
        return (-(-self.cols // self.tile.tn) * tx, -(-self.rows // self.tile.tm) * ty, self.e * self.parts)

    @property
    def kernel(self) -> str:
        return "wg_gemm_vec" if self.vec else "wg_gemm" if self.staged else "wg_gemm_global"

    @property
    def label(self) -> str:
        if self.vec:
            vw, nv, rp = self.vec
            return f"GEMM {vw}x{nv} {rp} rows"
        t = self.tile
        split = f" in {self.parts} parts" if self.parts > 1 else ""
        return f"GEMM {t.tm}x{t.tn} ({t.rm}x{t.rn}{'' if self.staged else ', no local memory'}){split}"

    @property
    def m_bytes(self) -> int:
        """Bytes of M, the products (each part's)."""
        return self.e * self.parts * self.rows * self.cols * 4

    @property
    def form(self) -> str:
        """How results name this form, e.g. 'F(2x2,3x3) GEMM 64x64 (8x8)'."""
        return f"{name(self.m)} {self.label}"

    def defines(self) -> dict:
        t = self.tile
        vec = dict(zip(("VW", "NV", "RP"), self.vec)) if self.vec else {}
        return {"E": self.e, "GM": self.rows, "GN": self.cols, "GC": self.depth, "TM": t.tm, "TN": t.tn,
                "TK": self.tk, "RM": t.rm, "RN": t.rn, "STAGED": int(self.staged), "VEC": int(bool(self.vec)),
                "PARTS": self.parts, **vec}

    def describe(self) -> dict:
        return {"tile": f"{self.m}x{self.m}", "gemm": f"{self.e} x ({self.rows} x {self.cols}, sum over {self.depth})",
                "gemm_tile": self.label if self.vec else str(self.tile), "slice": self.tk, "work_groups": self.groups,
                "sum_parts": self.parts}


def waste(tile: Tile, rows: int, cols: int) -> float:
    """Padding work the tile adds to a rows x cols GEMM, as a fraction."""
    return round_up(rows, tile.tm) * round_up(cols, tile.tn) / (rows * cols) - 1


def plan_gemm(m: int, batch: int, out_h: int, out_w: int, c_in_stored: int, c_out_stored: int, gpu: bool,
              compute_units: int, max_group: int, max_items: tuple, local_mem: int, vw: int = 4) -> list[GemmPlan]:
    """The module docstring's candidates for one layer; Unsupported where no tile fits the device."""
    rows = batch * -(-out_h // m) * -(-out_w // m)
    tk = slice_length(c_in_stored)
    items = tuple(max_items) + (1,) * (3 - len(max_items))

    def fits(t: Tile) -> bool:
        tx, ty = t.local
        return (t.threads <= max_group and tx <= items[0] and ty <= items[1]
                and (not gpu or local_bytes(t, tk) <= local_mem))
    usable = [t for t in (GPU_TILES if gpu else CPU_TILES) if fits(t)]
    if not usable:
        raise Unsupported(f"no GEMM tile of Winograd {m}x{m} fits this device ({max_group} work-items, "
                          f"{local_mem} bytes of local memory)")

    def plan(t: Tile) -> GemmPlan:
        return GemmPlan(m, t, tk, rows, c_out_stored, c_in_stored, staged=gpu)
    lean = [t for t in usable if waste(t, rows, c_out_stored) <= MAX_WASTE]
    least = [min(usable, key=lambda t: waste(t, rows, c_out_stored))]
    if not gpu:
        found = [plan((lean or least)[0])]
        if vw >= MIN_VEC_WIDTH and c_out_stored % (vw * VEC_TILE[0]) == 0 and VEC_ROWS_A_GROUP <= items[1]:
            found.append(GemmPlan(m, found[0].tile, tk, rows, c_out_stored, c_in_stored, staged=False,
                                  vec=(vw, *VEC_TILE)))
        return found
    busy = [t for t in lean if plan(t).groups >= compute_units]
    found = [plan(t) for t in ((busy or lean)[:GPU_CANDIDATES] or least)]
    return found + [GemmPlan(m, p.tile, tk, rows, c_out_stored, c_in_stored, parts=n) for p in found[:SPLIT_TILES]
                    for n in SPLIT_PARTS if p.groups < SPLIT_BELOW * compute_units
                    and c_in_stored % (n * tk) == 0 and c_in_stored // n >= MIN_PART_DEPTH]


def scratch_bytes(net, index: int, m: int) -> tuple[int, int]:
    """Bytes of V and of M for layer `index` of `net` as F(m x m, 3 x 3), M for the most parts its plans
    cut the sum in."""
    src, dst = net.input_layout(index), net.layouts[index + 1]
    tiles = net.batch * -(-dst.h // m) * -(-dst.w // m)
    try:
        parts = max(p.parts for p in plans(net, index, m))
    except Unsupported:
        parts = 1
    return (m + 2) ** 2 * src.c_stored * tiles * 4, (m + 2) ** 2 * dst.c_stored * tiles * 4 * parts


def fits_scratch(net, index: int, m: int) -> bool:
    """Whether the layer's scratch fits the device's largest buffer (plans() has left out the split plans
    whose M would not)."""
    return max(scratch_bytes(net, index, m)) <= int(net.rt.info["max_alloc_bytes"])


def scratch(net):
    """(V, M): the net's shared scratch, allocated at the first call for the largest layer that
    may run a GEMM form; None where no layer can."""
    if not hasattr(net, "_winograd_scratch"):
        sizes = [scratch_bytes(net, i, m) for i, layer in enumerate(net.net.layers) for m in TILE_SIZES
                 if applies(layer, net.input_layout(i).c) and not net.reads_or_writes_a_view(i)
                 and fits_scratch(net, i, m)]
        net._winograd_scratch = None if not sizes else (
            _poisoned(net, max(v for v, _ in sizes), "Winograd GEMM: transformed input tiles (shared by the layers)"),
            _poisoned(net, max(mm for _, mm in sizes), "Winograd GEMM: tile products (shared by the layers)"))
    return net._winograd_scratch


def _poisoned(net, nbytes: int, what: str):
    """A buffer of NaN written from the host rather than filled: Oclgrind takes what a kernel reads
    of a filled buffer, even after another kernel wrote it, for uninitialised (as tiled.py's parts)."""
    buf = net.share(net.alloc(nbytes, what, poison=False))   # not the buffer of the form that first asked for it
    net.rt.write(buf, np.full(nbytes // 4, np.nan, np.float32))
    return buf


def release_unused_scratch(net, ops) -> None:
    """Free the shared scratch where no layer kept a GEMM form."""
    found = getattr(net, "_winograd_scratch", None)
    if found is not None and not any(isinstance(bare(op), WinogradGemmOp) for op in ops):
        net.unshare(list(found))
        net.release(list(found))
        net._winograd_scratch = None


def enqueue_form(rec, conv: "WinogradGemmOp", fed: bool, step: str, launch, args) -> None:
    """A GEMM form's launches: `conv`'s input transform (unless `fed`: the conv before it wrote V) and GEMM, then
    the output transform `launch` (its own, or one doing an add, a pool or the next input transform too)."""
    if not fed:
        rec.kernel(conv.steps[0], conv.input_launch(*conv.input_args))
    rec.kernel(conv.steps[1], conv.gemm_launch(*conv.gemm_args))
    rec.kernel(step, launch(*args))


class WinogradGemmOp(KernelOp):
    """One 3x3 stride-1 conv layer as the three launches of the module docstring."""

    fed = False   # its input transform done by the conv before it (transform_chain.py): V holds its tiles

    def __init__(self, net, index, plan: GemmPlan, launches: tuple, u, bias, v_buf, m_buf):
        act = net.net.layers[index].activation
        super().__init__(net, index, launches[2], (bias,), step_name(f"winograd {plan.form}", act))
        self.plan = plan
        self.input_launch, self.gemm_launch = launches[:2]
        self.input_args = (self.in_buf, v_buf)
        self.gemm_args = (v_buf, u, m_buf)
        self.output_args = (m_buf, bias, self.out_buf)
        what = f"winograd {name(plan.m)}"
        self.steps = (f"{what} input transform", f"{what} batched GEMM", step_name(f"{what} output transform", act))

    def enqueue(self, rec):
        enqueue_form(rec, self, self.fed, self.steps[2], self.launch, self.output_args)

    def describe(self) -> dict:
        found = {"kernel": self.step, "launches": {s: l.describe() for s, l in
                                                   zip(self.steps, (self.input_launch, self.gemm_launch, self.launch))},
                 "output": self.out_layout.describe(), "winograd": self.plan.describe()}
        if self.fed:
            found["input_transform"] = "by the conv before it"
        return found


class OwnOutputTransform(InPlaceOfConv):
    """A GEMM form whose output transform (`launch`, its arguments `output_args`, its step `output_step`) does
    the layer after it too, writing that layer's output; its input transform and GEMM are the conv's."""

    launch = output_args = output_step = None
    fed = False   # as WinogradGemmOp's

    def enqueue(self, rec):
        enqueue_form(rec, self.conv_op, self.fed, self.output_step, self.launch, self.output_args)


class ResidualGemmOp(OwnOutputTransform):
    """A GEMM form with the residual add in its output transform, writing the add's output."""

    def __init__(self, op: WinogradGemmOp, launch, residual, out, act: str):
        super().__init__(op)
        self.launch = launch
        self.output_args = (*op.output_args[:2], residual, out)
        self.output_step = step_name(f"winograd {name(op.plan.m)} output transform+add", act)
        self.step = step_name(f"winograd {op.plan.form}+add", act)


class PooledGemmOp(OwnOutputTransform):
    """A GEMM form whose output transform does the 2x2 max pool after it too (pool_fold.py), writing the
    pool's output; the pool's op is left with nothing to enqueue."""

    def __init__(self, op: WinogradGemmOp, launch, out, step: str):
        super().__init__(op)
        self.launch = launch
        self.output_args = (*op.output_args[:2], out)
        self.output_step = step
        self.step = f"winograd {op.plan.form}, {step[len('winograd '):]}"

    def describe(self) -> dict:
        return {**self.conv_op.describe(), "kernel": self.step, "pool": self.output_step}


def plans(net, index: int, m: int) -> list[GemmPlan]:
    """plan_gemm's for layer `index`, without the split plans whose M would pass the device's largest buffer;
    Unsupported where no tile fits the device."""
    src, dst = net.input_layout(index), net.layouts[index + 1]
    lim, info = limits(net.rt), net.rt.info
    found = plan_gemm(m, net.batch, dst.h, dst.w, src.c_stored, dst.c_stored, net.device != "cpu",
                      int(info["compute_units"]), lim.max_group, lim.max_items, int(info["local_mem_bytes"]),
                      vector_width(info))
    return [p for p in found if p.parts == 1 or p.m_bytes <= int(info["max_alloc_bytes"])]


def _input_transform(net, index: int, m: int, window: dict) -> Launch:
    src = net.input_layout(index)
    grid = (_tiles(net, index, m), src.c_stored // 4)
    return Launch(net.rt, TRANSFORMS, "wg_input", {**window, "WM": m}, grid,
                  lambda lim: choose_local(grid, INPUT_GROUPS, lim))


def output_transform(net, index: int, m: int, window: dict, parts: int) -> Launch:
    """wg_output for layer `index` (`window`: its -D constants, an add's or a pool's among them), adding up
    the GEMM's `parts`."""
    grid = (net.layouts[index + 1].c_stored // 4, _tiles(net, index, m))
    return Launch(net.rt, TRANSFORMS, "wg_output", {**window, "WM": m, "PARTS": parts}, grid,
                  lambda lim: choose_local(grid, OUTPUT_GROUPS, lim))


def _tiles(net, index: int, m: int) -> int:
    dst = net.layouts[index + 1]
    return net.batch * -(-dst.h // m) * -(-dst.w // m)


def build(net, index: int, params: dict, m: int, which: list[int] | None = None) -> list[WinogradGemmOp]:
    """Layer `index` of `net` as F(m x m, 3 x 3) with the GEMM's candidate plans (those numbered in
    `which`: all where None), sharing the transformed filters and the transform kernels (an output transform
    per number of parts the sum is cut in)."""
    if not fits_scratch(net, index, m):
        v, mm = scratch_bytes(net, index, m)
        raise Unsupported(f"its transformed tiles need {max(v, mm) / 2**20:.1f} MiB in one buffer, more than "
                          f"the device's MAX_MEM_ALLOC_SIZE")
    found = scratch(net)
    layer = net.net.layers[index]
    src, dst = net.input_layout(index), net.layouts[index + 1]
    candidates = plans(net, index, m)
    chosen = [candidates[min(i, len(candidates) - 1)] for i in which] if which is not None else candidates
    window = net.window_defines(layer, src, dst)
    first, lasts = _input_transform(net, index, m, window), {}
    transformed = filter_transform(params["weight"], m, src.c_stored, dst.c_stored)
    uploaded = {}

    def u_of(plan: GemmPlan):
        """U as the plan's kernel reads it: (E, GC, GN); the vector form's (E, GN / KW, GC, KW), each
        work-item's filters one contiguous stream.  Uploaded once per layout."""
        kw = plan.vec[0] * plan.vec[1] if plan.vec else 0
        if kw not in uploaded:
            u = transformed.reshape(plan.e, plan.depth, plan.cols)
            if kw:
                u = u.reshape(plan.e, plan.depth, plan.cols // kw, kw).transpose(0, 2, 1, 3)
            uploaded[kw] = net.upload(np.ascontiguousarray(u).ravel(), f"{layer.name} weights, Winograd-transformed "
                                      f"{name(m)} (GEMM{f', blocks of {kw} columns' if kw else ''})")
        return uploaded[kw]
    bias = np.zeros(dst.c_stored, np.float32)
    bias[:len(params["bias"])] = params["bias"]
    bias_buf = net.upload(bias, f"{layer.name} bias ({name(m)} GEMM)")
    ops = []
    for plan in chosen:
        gemm = Launch(net.rt, GEMM, plan.kernel, plan.defines(), plan.global_size, plan.local, exact=True)
        if limits(net.rt, gemm.kernel).max_group < int(np.prod(plan.local)):
            continue   # the built kernel takes fewer work-items than the tile has
        if plan.parts not in lasts:
            lasts[plan.parts] = output_transform(net, index, m, window, plan.parts)
        ops.append(WinogradGemmOp(net, index, plan, (first, gemm, lasts[plan.parts]), u_of(plan), bias_buf, *found))
    if not ops:
        raise Unsupported(f"no GEMM tile of Winograd {m}x{m} builds within this device's work-group limit")
    return ops


def with_residual(net, op: WinogradGemmOp, j: int, extra: dict, residual) -> ResidualGemmOp:
    """`op` with add j in its output transform (`extra`: its -D constants), writing the add's output."""
    i = op.index
    window = net.window_defines(net.net.layers[i], net.input_layout(i), net.layouts[j + 1])
    last = output_transform(net, i, op.plan.m, {**window, **extra}, op.plan.parts)
    return ResidualGemmOp(op, last, residual, net.activations[j + 1], net.net.layers[j].activation)


def with_pool(net, op: WinogradGemmOp, j: int) -> PooledGemmOp:
    """`op` with max pool j (2x2, stride 2, unpadded, reading only it) in its output transform, writing the
    pool's output: the conv's activation before the max, the pool's after."""
    i, conv, pool = op.index, net.net.layers[op.index], net.net.layers[j]
    out = net.layouts[j + 1]
    window = {**net.window_defines(conv, net.input_layout(i), net.layouts[i + 1]), "POOL": 1,
              "CONV_ACT": ACT_CODES[conv.activation], "ACT": ACT_CODES[pool.activation],
              "PHP": out.hp, "PWP": out.wp, "PPT": out.pad_h, "PPL": out.pad_w}
    last = output_transform(net, i, op.plan.m, window, op.plan.parts)
    step = step_name(step_name(f"winograd {name(op.plan.m)} output transform", conv.activation) + "+maxpool",
                     pool.activation)
    return PooledGemmOp(op, last, net.activations[j + 1], step)
