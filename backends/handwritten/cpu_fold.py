"""A depthwise conv folded into the 1x1 conv that alone reads it, shaped for a CPU's
vector units (kernels/cpu_conv.cl `dw_pw_vec`): one more form `vectorised` and
`vectorised-tiled` measure at prepare for MobileNet-v2's depthwise -> project pairs.

cpu_conv.py's vector kernels run the pair as two launches: the depthwise writes its
output (up to 96 x 112 x 112 floats in MobileNet-v2) and the 1x1 reads it back; dw_pw.py's
fold keeps it in local memory but is float4, one pixel a work-item, and lost to the two
(reports/pocl-haswell/NOTES.md).  Here a work-item computes the depthwise outputs of RP
neighbouring output columns, a vector of DVW channels at a time (each input vector of a
filter row loaded once for the windows that overlap there, as cpu_conv's dw_vec), into a
private buffer of RP x the depthwise's stored channels (at most MAX_BUFFER bytes: in L1),
then the 1x1 from that buffer as cpu_conv's conv_vec does (a register tile of RP pixels x
NV vectors of VW output channels), for KB blocks of VW * NV output channels, with the 1x1's
bias and its add in the epilogue where the 1x1 folds one (residual.py).  A work-item
taking every block computes each depthwise output once but streams every weight of the 1x1
for its RP pixels; splitting the output channels so that a split's weights fit in L2
(WEIGHT_BUDGET), a work-group one split's work-items along the pixels, reuses them from
there, each split redoing the depthwise.

Offered where cpu_conv is (the device prefers float vectors of cpu_conv.MIN_WIDTH or
more, cpu_conv "measured", the 1x1's form not forced by the caller; fold_depthwise "measured"), after dw_pw.py has chosen between
its fold and the two kernels: each variant is built, checked against the pair computed in
float64 on a random input (and a random residual), refused above cpu_conv.MAX_REL_L2 or
where the compiler refuses it, and timed with its launches against the pair's ops as they
then are (measured.py); the fastest runs.  blocks.py then measures its block kernel
against whatever this left.  `config["cpu_fold"]` keeps, per depthwise layer, every
form's time and error; the step is named "vector depthwise+conv 1x1 VWxNV RP px".
cpu_conv "never" offers nothing (the code before this fold); "always" or a variant
"VW,NV,RP" folds every pair it can, unmeasured (the tests check each against the oracle).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import layer_params
from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.net import Recorder
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import choose_local
from ..reference.numpy_backend import _activate, _conv
from . import cpu_conv
from .cpu_conv import SOURCE, TILES, Variant
from .vectors import vector_width
from .layout import round_up
from .measured import HOW, fastest_ms, rel_l2
from .net import Folded, OutputEdge, bare
from .residual import InPlaceOfConv

MAX_BUFFER = 16 * 1024   # bytes of a work-item's depthwise outputs: half an L1 of 32 KiB
WEIGHT_BUDGET = 128 * 1024   # bytes of 1x1 weights a split streams: a quarter of a 512 KiB L2
# a work-group is one split's work-items along the pixels, run in turn on one core: they
# stream the same weights, from L2 after the first (channel blocks first, as conv_vec's
# SHAPES, made each work-item stream every weight of a wide layer from L3)
FOLD_SHAPES = ((1, 8), (1, 4), (1, 2), (1, 1))


@dataclass(frozen=True)
class FoldVariant:
    tile: Variant   # VW, NV and RP of the 1x1's register tile
    dvw: int        # the depthwise's vector width (divides its stored channels)
    kb: int         # blocks of VW * NV output channels per work-item
    splits: int     # work-items along the output channels

    @property
    def kp(self) -> int:
        return self.tile.kw * self.kb * self.splits

    @property
    def label(self) -> str:
        return f"{self.tile.label} fold" + (f" {self.splits} splits" if self.splits > 1 else "")


def depthwise_width(vw: int, c_stored: int) -> int:
    while c_stored % vw:
        vw //= 2
    return vw


def fold_variants(vw: int, mid_stored: int, out_stored: int, columns: int,
                  tile: Variant | None = None) -> list[FoldVariant]:
    """The variants for a depthwise of `mid_stored` channels into a 1x1 of `out_stored`, `columns`
    output columns a row: cpu_conv's tiles (or `tile` alone) whose buffer fits MAX_BUFFER, no
    wider than a row, that waste at most cpu_conv.MAX_WASTE of the output channels (else the
    least wasteful), each as one work-item along the channels and (not `tile`) as splits
    whose weights fit WEIGHT_BUDGET."""
    if tile is not None:
        tiles = [tile] if tile.rp * mid_stored * 4 <= MAX_BUFFER else []
    else:
        tiles = [Variant(vw, nv, rp) for rp, nv in TILES
                 if rp * mid_stored * 4 <= MAX_BUFFER and rp <= max(columns, TILES[0][0])]
        waste = {t: round_up(out_stored, t.kw) / out_stored - 1 for t in tiles}
        # those that waste at most MAX_WASTE of the output channels, else the least wasteful
        tiles = [t for t in tiles if waste[t] <= cpu_conv.MAX_WASTE] or \
            [t for t in tiles if waste[t] == min(waste.values())]
    found = []
    for t in tiles:
        blocks = -(-out_stored // t.kw)
        # every block in one split (the depthwise done once), and splits whose weights fit WEIGHT_BUDGET
        fit = min(blocks, max(2, -(-mid_stored * blocks * t.kw * 4 // WEIGHT_BUDGET)))
        for s in (1, fit) if tile is None and blocks > 1 else (1,):
            found.append(FoldVariant(t, depthwise_width(t.vw, mid_stored), -(-blocks // s), s))
    return found


class VectorFoldOp(InPlaceOfConv):
    """The 1x1 conv's op running dw_pw_vec: the depthwise's input, weights and bias, the 1x1's
    weights and bias, then (with a folded add) the add's other input, and the output."""

    def __init__(self, conv_op, launch, args: tuple, step: str, variant: FoldVariant):
        super().__init__(conv_op)
        self.launch, self.args, self.step, self.variant = launch, args, step, variant

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


@dataclass(frozen=True)
class Pair:
    d: int                 # the depthwise
    i: int                 # the 1x1 reading it alone
    j: int                 # the output: i, or the add folded into i's epilogue
    extra: dict            # the add's -D constants
    residual: object       # the add's other input (a buffer), or None


class FoldsVectorDepthwise:
    """A VectorisedNet mixin: offer_vector_fold() puts dw_pw_vec in place of a depthwise -> 1x1
    pair where cpu_conv's mode says so (and, measured, where it is faster)."""

    def offer_vector_fold(self, ops: list, pair: Pair) -> str | None:
        """ops[d], ops[i] replaced by the vector fold where chosen; what was done, for config
        (None where not offered)."""
        mode = self.forms.cpu_mode
        vw = vector_width(self.rt.info)
        if mode == "never" or self.forms.fold_depthwise != "measured":
            return None
        if mode == "measured" and (vw < cpu_conv.MIN_WIDTH or self._forced(bare(self.ops[pair.i]))):
            return None   # (as cpu_conv: where the caller forced the 1x1's form, pointwise="always", it stands)
        d, i, j = pair.d, pair.i, pair.j
        src, mid, dst = self.input_layout(d), self.layouts[d + 1], self.layouts[j + 1]
        if any(lay.is_view for lay in (src, mid, dst)):
            return None   # (its kernel takes no channel pitch)
        tile = mode if isinstance(mode, Variant) else None
        options = fold_variants(tile.vw if tile else vw, mid.c_stored, dst.c_stored, dst.w, tile)
        if not options:
            return None
        if mode != "measured":
            start = len(self.buffers)
            try:
                ops[d], ops[i] = self._fold_ops(pair, options[0])
            except KernelBuildError:
                self.release(self.buffers[start:])
                raise
            return f"into {self.net.layers[i].name}'s kernel (dw_pw_vec {options[0].label}, cpu_conv={self.forms.cpu_conv!r})"
        before = [ops[d], ops[i]]
        chosen = " + ".join(_step(op) for op in before if _step(op))
        forms, owned, refused = {chosen: before}, {}, {}
        for v in options:
            start = len(self.buffers)
            try:
                forms[v.label] = self._fold_ops(pair, v)
            except KernelBuildError as exc:   # a variant this device's compiler refuses is no choice
                self.release(self.buffers[start:])
                refused[v.label] = str(exc).splitlines()[0][:200]
                continue
            owned[v.label] = self.buffers[start:]
        errors = self._fold_errors(pair, forms, chosen)
        for f, err in errors.items():
            if not err <= cpu_conv.MAX_REL_L2:   # NaN too
                refused[f] = f"relative L2 {err:.1e} against float64, above {cpu_conv.MAX_REL_L2:.0e}"
                del forms[f]
        times = fastest_ms(self.rt, forms)
        best = min(times, key=times.get)
        for f, b in owned.items():
            if f != best:
                self.release(b)
        self.config.setdefault("cpu_fold", {})[self.net.layers[d].name] = {
            "into": self.net.layers[i].name, "chosen": best, "vector_width": vw,
            "ms": {f: round(t, 4) for f, t in times.items()},
            "rel_l2_against_float64": {f: float(f"{e:.2e}") for f, e in errors.items()},
            **({"refused": refused} if refused else {})}
        self.config["measured_forms"] = HOW
        if best == chosen:
            return None
        ops[d], ops[i] = forms[best]
        return (f"into {self.net.layers[i].name}'s kernel (dw_pw_vec {best}; measured {times[best]:.4f} ms "
                f"against {times[chosen]:.4f} as {chosen})")

    def _fold_ops(self, pair: Pair, v: FoldVariant) -> list:
        """[the depthwise's op with nothing left to do, the fold's op], with the net's edges."""
        first, last = self.ops[pair.d], self.ops[pair.i]
        built = self._vector_fold_op(pair, v)
        if isinstance(last, OutputEdge):   # as the net's last layer, the fold converts the output after it
            built = OutputEdge(built, self.rt, last.stage, last.shape, last.convert)
        return [Folded(first), built]

    def _vector_fold_op(self, pair: Pair, v: FoldVariant) -> VectorFoldOp:
        d, i, j = pair.d, pair.i, pair.j
        dw, pw = self.net.layers[d], self.net.layers[i]
        src, mid, dst = self.input_layout(d), self.layouts[d + 1], self.layouts[j + 1]
        t = v.tile
        defines = {**self.window_defines(dw, src, dst), "ACT": ACT_CODES[pw.activation],
                   "DACT": ACT_CODES[dw.activation], "MC": mid.c, **pair.extra,
                   "DW_PW_VEC": 1, "VW": t.vw, "NV": t.nv, "RP": t.rp, "DVW": v.dvw, "KB": v.kb, "KP": v.kp}
        grid = (v.splits, self.batch * dst.h * -(-dst.w // t.rp))
        launch = Launch(self.rt, SOURCE, "dw_pw_vec", defines, grid, lambda lim: choose_local(grid, FOLD_SHAPES, lim))
        params = layer_params(self.net, self._weights, i)
        k, c = params["weight"].shape[:2]
        weight = np.zeros((mid.c_stored, v.kp), np.float32)
        weight[:c, :k] = np.asarray(params["weight"], np.float32)[:, :, 0, 0].T
        # each block of KW output channels one contiguous stream, as conv_vec's
        weight = weight.reshape(mid.c_stored, v.kp // t.kw, t.kw).transpose(1, 0, 2)
        bias = np.zeros(v.kp, np.float32)
        bias[:k] = params["bias"]
        dw_op = bare(self.ops[d])   # vectorised's or cpu_conv's depthwise: its buffers serve
        args = (dw_op.in_buf, *dw_op.args[1:3],
                self.upload(weight, f"{pw.name} weights (vector fold)"), self.upload(bias, f"{pw.name} bias (vector fold)"),
                *((pair.residual,) if j != i else ()), self.activations[j + 1])
        what = f"{step_name('vector depthwise', dw.activation)}+{step_name('conv 1x1', pw.activation)}"
        if j != i:
            what = step_name(f"{what}+add", self.net.layers[j].activation)
        return VectorFoldOp(self.ops[i], launch, args, f"{what} {v.label}", v)

    def _fold_errors(self, pair: Pair, forms: dict, chosen: str) -> dict:
        """Each fold's relative L2 error against the pair (and its add) in float64 on one random input."""
        d, i, j = pair.d, pair.i, pair.j
        dw, pw = self.net.layers[d], self.net.layers[i]
        rng = np.random.default_rng(cpu_conv.SEED + d)
        src, out = self.input_layout(d), self.layouts[j + 1]
        x = rng.standard_normal(src.canonical_shape).astype(np.float32)
        p = layer_params(self.net, self._weights, d)
        mid = _activate(_conv(x.astype(np.float64), np.asarray(p["weight"], np.float64), np.asarray(p["bias"], np.float64),
                              dw.stride, dw.padding, dw.groups), dw.activation)
        p = layer_params(self.net, self._weights, i)
        ref = _activate(_conv(mid, np.asarray(p["weight"], np.float64), np.asarray(p["bias"], np.float64),
                              (1, 1), (0, 0, 0, 0)), pw.activation)
        written = [(self.activations[self.net.sources(d)[0] + 1], src, x)]
        if j != i:
            other = [s for s in self.net.sources(j) if s != i][0]
            if other == self.net.sources(d)[0]:   # the depthwise's input is the residual too
                r = x
            else:
                r = rng.standard_normal(self.layouts[other + 1].canonical_shape).astype(np.float32)
                written.append((pair.residual, self.layouts[other + 1], r))
            ref = _activate(ref + r, self.net.layers[j].activation)
        quiet = Recorder(self.rt.queue, enabled=False)
        out_buf = self.activations[j + 1]
        errors = {}
        try:
            for buf, lay, a in written:
                self.rt.write(buf, lay.pack(a))
            for form, ops in forms.items():
                if form == chosen:
                    continue
                bare(ops[1]).enqueue(quiet)   # the fold alone: the edges' conversions are layout copies
                self.rt.finish()
                got = out.unpack(self.rt.read(out_buf, out.stored_shape)).astype(np.float64)
                errors[form] = rel_l2(got, ref)
        finally:   # zero border, NaN interior, as prepare left them (layout.py)
            for buf, lay, _ in written:
                self.rt.write(buf, lay.template())
            self.rt.write(out_buf, out.template())
        return errors


def _step(op) -> str:
    """A form's step name ('' for an op with nothing to enqueue of its own)."""
    op = bare(op)
    return "" if isinstance(op, Folded) else getattr(op, "step", type(op).__name__)
