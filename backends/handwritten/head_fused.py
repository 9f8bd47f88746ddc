"""A net's head as one launch (`vectorised`, `vectorised-tiled`; issue 46, item 2): the
global average pool and the dense layer that alone reads it (ResNet-18's avgpool -> fc,
MobileNet-v2's avgpool -> conv2d_3, most classification zoo nets).

A work-group pools its images' maps into local memory (the pooled vector never goes
through global memory), then computes its share of the dense outputs from there, with the
dense's bias and activation (and the pool's activation before the product).  Two kernels:
kernels/vectorised.cl `head`, float4, as the GEMV (LANES work-items splitting a weight row,
ROWS rows at a time; 32 lanes on a GPU, 1 on a CPU), and, where cpu_conv's vector kernels
are offered (the device prefers vectors of cpu_conv.MIN_WIDTH or more, or cpu_conv forces
them), kernels/cpu_conv.cl `head_vec`: a work-item holds NV vectors of VW outputs, its
weights one stream, as cpu_conv's vector dense.  The outputs are split over SPLITS
work-groups an image group, each redoing the pool (H x W reads a channel against the
dense's OUT / SPLITS multiply-adds a channel): a CPU wants few groups, a GPU enough to fill
its compute units.  At batch > 1 a work-group takes up to IMAGES images, each weight loaded
serving them all.  Its local memory: the pooled vectors (images x the stored channels x 4 B)
and, for `head` with LANES > 1, the row sums; where not even one image's fit the device's
local memory, the head stays two kernels (config says why).

Where: dense layer i whose one input is a global average pool p that nothing else reads;
the pool's input not a slice of a concatenation's buffer, the dense's output not one either;
neither op already folded into another kernel.

`fuse_head` (the nets' argument): "measured" (the default): per head, each fused form
(split_options()) against the pool's kernel followed by the dense's chosen form (float4
GEMV or batched kernel, or cpu_conv's vector dense: whichever won its own measuring), timed
with their launches (measured.py), the fastest kept; "always" (the fastest fused form);
"never".  Before timing, every form runs on one random input and is compared with the head
computed in float64; a form above MAX_REL_L2 is refused, "always" included.
`config["head"]` holds each head's times, errors and choice; `config["head_fused"]` names
each pool folded (the report's folded layers), and the fused step is "global avgpool+dense
(form)" (with the activations).  The layer-wise checks keep both layers' own kernels, so
each layer's output is still checked on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyopencl as cl

from nets import LayerKind, Net

from ..base import layer_params
from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import build_fitting, limits
from ..reference.numpy_backend import _activate
from .cpu_conv import MIN_WIDTH, Variant
from .vectors import vector_width
from .filters import dense_rows, pad_to
from .layout import round_up
from .fold_choice import OWN, choose, pair_errors
from .net import Folded, bare
from .residual import InPlaceOfConv

SOURCE = "vectorised.cl"
CPU_SOURCE = "cpu_conv.cl"
MODES = ("measured", "always", "never")
MAX_REL_L2 = 1e-5   # as the other fused forms': a tenth of the float32 tolerance
SEED = 46           # of the check's input
FUSED = "fused"
# (lanes sharing a row, rows a work-group) per device class: the batch-1 GEMV's (workgroups.py), a
# GPU's narrower so that a work-group of 256 items pools 256 float4s at once
SHAPES = {"cpu": (1, 16), "gpu": (32, 8), "mali": (4, 16)}
IMAGES = 4   # images a work-group at batch > 1 (each weight loaded serves them), fewer where they do not fit


@dataclass(frozen=True)
class HeadPlan:
    kernel: str    # "head" (float4, vectorised.cl) or "head_vec" (vectors of VW, cpu_conv.cl)
    lanes: int     # head: work-items sharing a row
    rows: int      # head: rows a work-group
    splits: int    # work-groups along the outputs, an image group
    images: int    # images a work-group
    outputs: int   # the dense's outputs (OUT)
    batch: int
    xv: int        # float4s of the pooled vector
    vw: int = 4    # head_vec: floats a vector ...
    nv: int = 1    # ... and vectors of outputs a work-item

    @property
    def kw(self) -> int:   # head_vec: outputs a work-item
        return self.vw * self.nv

    @property
    def blocks(self) -> int:   # head_vec: work-items of outputs
        return -(-self.outputs // self.kw)

    @property
    def bg(self) -> int:   # head_vec: work-items a work-group
        return -(-self.blocks // self.splits)

    @property
    def jb(self) -> int:   # head: outputs a work-group
        return -(-self.outputs // self.splits)

    @property
    def threads(self) -> int:
        return self.bg if self.kernel == "head_vec" else self.lanes * self.rows

    @property
    def local(self) -> tuple:
        return (self.bg, 1) if self.kernel == "head_vec" else (self.lanes, self.rows, 1)

    @property
    def global_size(self) -> tuple:
        groups = -(-self.batch // self.images)
        if self.kernel == "head_vec":
            return (self.splits * self.bg, groups)
        return (self.splits * self.lanes, self.rows, groups)

    @property
    def local_bytes(self) -> int:
        sums = self.rows * self.lanes * 4 if self.kernel == "head" and self.lanes > 1 else 0
        return self.images * (self.xv * 16 + sums)

    @property
    def label(self) -> str:
        kind = "float4" if self.kernel == "head" else f"{self.vw}x{self.nv} vector"
        return (f"{FUSED} {kind}, {self.splits} split{'s' if self.splits > 1 else ''}"
                + (f", {self.images} images a group" if self.images > 1 else ""))

    def defines(self) -> dict:
        if self.kernel == "head_vec":
            return {"HEAD_VEC": 1, "VW": self.vw, "NV": self.nv, "KP": self.blocks * self.kw, "NI": self.images,
                    "BG": self.bg}
        return {"LANES": self.lanes, "ROWS": self.rows, "JB": self.jb, "NI": self.images}


def fusable(net: Net, i: int) -> tuple[int | None, str]:
    """(the global average pool that dense i can take in, "") or (that pool or None, why not)."""
    layer = net.layers[i]
    sources = net.sources(i)
    if layer.kind != LayerKind.DENSE or len(sources) != 1 or sources[0] < 0:
        return None, ""
    p = sources[0]
    if net.layers[p].kind != LayerKind.GLOBAL_AVGPOOL:
        return None, ""
    readers = [net.layers[k].name for k in range(len(net.layers)) if p in net.sources(k)]
    if readers != [layer.name]:
        return p, f"its output is read by {', '.join(readers)}: it must be written"
    return p, ""


def split_options(cpu: bool, most: int, image_groups: int, compute_units: int) -> list[int]:
    """The SPLITS measured: on a CPU one work-group an image group (the pool done once) and one a
    core; on a GPU enough work-groups to fill its compute units and a quarter of that (each redoes
    the pool); never more than `most` (the work-items, or rows, of outputs)."""
    fill = -(-compute_units // image_groups)
    wanted = (1, fill) if cpu else (max(1, fill // 4), fill)
    return sorted({max(1, min(s, most)) for s in wanted})


def vector_form(net) -> int:
    """The vector width of head_vec where the net offers cpu_conv's vector kernels (the device prefers
    vectors of cpu_conv.MIN_WIDTH or more, or cpu_conv forces them), else 0 (the float4 head)."""
    mode = net.forms.cpu_mode
    if isinstance(mode, Variant):
        return mode.vw
    vw = vector_width(net.rt.info)
    return vw if mode == "always" or (mode == "measured" and vw >= MIN_WIDTH) else 0


def reference(x: np.ndarray, pool_act: str, dense: dict, act: str) -> np.ndarray:
    """The head in float64: x (N, C, H, W) -> (N, OUT)."""
    pooled = _activate(np.asarray(x, np.float64).mean(axis=(2, 3)), pool_act)
    return _activate(pooled @ np.asarray(dense["weight"], np.float64) + np.asarray(dense["bias"], np.float64), act)


class HeadOp(InPlaceOfConv):
    """The dense's op doing the pool before it too: host reads and writes are the dense's own op's."""

    def __init__(self, dense_op, launch, args: tuple, step: str, plan: HeadPlan):
        super().__init__(dense_op)
        self.launch, self.args, self.step, self.plan = launch, args, step, plan

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


def plans(net, p: int, i: int) -> tuple[list[HeadPlan], str]:
    """The fused forms of head (p, i) whose local memory fits the device, or ([], why not)."""
    src, dst = net.input_layout(p), net.layouts[i + 1]
    vw = vector_form(net)
    lanes, rows = SHAPES[net.device]
    xv = src.c_stored // 4
    local_mem = int(net.rt.info["local_mem_bytes"])
    units = int(net.rt.info["compute_units"])

    def plan(splits: int, images: int) -> HeadPlan:
        if not vw:
            return HeadPlan("head", lanes, rows, splits, images, dst.c, net.batch, xv)
        nv = 4 if images == 1 else 2   # at most 8 accumulators (AVX2 has 16 registers)
        while nv > 1 and vw * nv > round_up(dst.c, vw):
            nv //= 2
        return HeadPlan("head_vec", 1, 1, splits, images, dst.c, net.batch, xv, vw, nv)
    for images in sorted({min(IMAGES, net.batch), 1}, reverse=True):
        one = plan(1, images)
        if one.local_bytes > local_mem:
            continue
        most = one.blocks if vw else -(-dst.c // rows)
        return [plan(s, images) for s in split_options(net.device == "cpu", most, -(-net.batch // images), units)], ""
    return [], (f"one image's pooled vector of {src.c_stored} channels needs {plan(1, 1).local_bytes} B of local "
                f"memory, the device has {local_mem} B")


def build(net, p: int, i: int, plan: HeadPlan, dense_params: dict) -> HeadOp | str:
    """Pool p and dense i as one launch of `plan` reading p's input and writing i's output;
    or, where the built kernel does not fit the device, why not."""
    pool, dense = net.net.layers[p], net.net.layers[i]
    src, dst = net.input_layout(p), net.layouts[i + 1]
    defines = {"N": net.batch, "XC4": src.c_stored, "XC": src.c, "XHP": src.hp, "XWP": src.wp, "XH": src.h,
               "XW": src.w, "XPT": src.pad_h, "XPL": src.pad_w, "YC4": dst.c_stored, "OUT": dst.c,
               "ACT": ACT_CODES[dense.activation], "PACT": ACT_CODES[pool.activation]}
    rows = dense_rows(dense_params["weight"], src.c, 1, 1, src.c_stored)   # (OUT, XC4)
    if plan.kernel == "head_vec":
        source, kp = CPU_SOURCE, plan.blocks * plan.kw
        weight = np.zeros((src.c_stored, kp), np.float32)
        weight[:, :dst.c] = rows.T
        weight = weight.reshape(src.c_stored, plan.blocks, plan.kw).transpose(1, 0, 2)   # a work-item's stream
        bias = pad_to(dense_params["bias"], kp)

        def choose(lim):   # a group's work-items are fixed by the splits: fewer groups refuse, not shrink
            return plan
        defines_of = (lambda q: {**defines, **q.defines()})
    else:
        source, weight, bias = SOURCE, rows, pad_to(dense_params["bias"], dst.c_stored)

        def choose(lim):   # the rows shrink to the device's and the built kernel's limits
            r = plan.rows
            while plan.lanes * r > lim.max_group and r > 1:
                r //= 2
            return replace(plan, rows=r)
        defines_of = (lambda q: net._defines("head", {**defines, **q.defines()}))
    if plan.kernel == "head_vec" and plan.threads > limits(net.rt).max_group:
        return f"{plan.threads} work-items a group, the device takes {limits(net.rt).max_group}"
    try:
        built, kernel = build_fitting(net.rt, source, plan.kernel, choose, defines_of, lambda q: q.threads)
    except ValueError as exc:   # head_vec's group does not fit the built kernel
        return str(exc)
    local_mem = int(net.rt.info["local_mem_bytes"])
    used = kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, net.rt.device)
    if used > local_mem:
        return f"the built kernel takes {used} B of local memory, the device has {local_mem} B"
    launch = Launch(net.rt, source, plan.kernel, None, built.global_size, built.local, exact=True, kernel=kernel)
    weight = net.upload(weight, f"{dense.name} weights (head)")
    bias = net.upload(bias, f"{dense.name} bias (head)")
    args = (net.activations[net.net.sources(p)[0] + 1], weight, bias, net.activations[i + 1])
    what = f"{step_name('global avgpool', pool.activation)}+{step_name('dense', dense.activation)}"
    return HeadOp(bare(net.ops[i]), launch, args, f"{what} ({plan.label[len(FUSED) + 1:]})", built)


def errors(net, p: int, i: int, forms: dict, dense_params: dict) -> dict:
    """Each form's (a list of ops: the head's work) relative L2 error against the head in float64
    on one random input; the buffers are left as prepare made them."""
    pool, dense = net.net.layers[p], net.net.layers[i]
    src = net.input_layout(p)
    x = np.random.default_rng(SEED + i).standard_normal(src.canonical_shape).astype(np.float32)
    ref = reference(x, pool.activation, dense_params, dense.activation)
    return pair_errors(net, p, i, forms, x, ref)


class FusesHeads:
    """A VectorisedNet mixin: fuse_heads() runs each global average pool and the dense layer that
    alone reads it as one kernel where `fuse_head` says so (module docstring)."""

    fuse_head = "measured"

    def fuse_heads(self, ops: list) -> None:
        fused, kept, records = {}, {}, {}
        for i, dense in enumerate(self.net.layers):
            p, why = fusable(self.net, i)
            if p is None:
                continue
            pool = self.net.layers[p]
            if self.forms.fuse_head == "never":
                kept[pool.name] = "its own kernel: fusing turned off (fuse_head='never')"
                continue
            if not why and (self.input_layout(p).is_view or self.layouts[i + 1].is_view):
                why = "it reads, or its dense writes, a slice of a concatenation's buffer"
            if not why and (ops[p] is not self.ops[p] or ops[i] is not self.ops[i]):
                why = "it or its dense is already folded into another kernel"
            if not why:
                options, why = plans(self, p, i)
            if why:
                kept[pool.name] = f"its own kernel: {why}"
                continue
            dense_params = layer_params(self.net, self._weights, i)
            candidates, owned, refused = {}, {}, {}
            for plan in options:
                first = len(self.buffers)
                try:
                    built = build(self, p, i, plan, dense_params)
                except KernelBuildError as exc:   # a form this device's compiler refuses is no choice
                    built = str(exc).splitlines()[0][:200]
                if isinstance(built, str):
                    self.release(self.buffers[first:])
                    refused[plan.label] = built
                    continue
                candidates[plan.label] = built
                owned[plan.label] = self.buffers[first:]
            own = [ops[p], ops[i]]
            err = errors(self, p, i, {OWN: [bare(o) for o in own], **{k: [op] for k, op in candidates.items()}},
                         dense_params)
            fold = choose(self, ops, i, own, candidates, owned, err, refused,
                          lambda: Folded(ops[p]), self.forms.fuse_head, dense.name, MAX_REL_L2)
            records[pool.name] = fold.record
            if fold.best == OWN:
                kept[pool.name] = fold.kept(dense.name)
                continue
            ops[p], ops[i] = fold.forms[fold.best]
            plan = bare(fold.forms[fold.best][1]).plan
            fused[pool.name] = (f"into {dense.name}'s head kernel ({fold.best}: {plan.threads} work-items a group, "
                                f"{plan.local_bytes} B of local memory{fold.timed()})")
        self.config["head_fused"] = fused
        if kept:
            self.config["head_not_fused"] = kept
        if records:
            self.config["head"] = records
