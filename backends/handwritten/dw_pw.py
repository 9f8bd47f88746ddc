"""A depthwise convolution folded into the 1x1 convolution after it (`vectorised`).

MobileNet-v2's blocks run expand 1x1 -> depthwise 3x3 -> project 1x1.  A
library call (or one kernel per layer) writes the depthwise output to
global memory and the 1x1 reads it back.  Where the 1x1 (stride 1, no
padding, not grouped) is the only reader of a depthwise layer's output,
kernels/vectorised.cl `dw_pw` does both: a work-group computes the depthwise
results of a tile of output pixels over all the channels into local
memory, then the 1x1 from there, with its bias and activation, and with
the residual add in its epilogue where the 1x1 also folds its add
(residual.py).  The depthwise layer then has nothing left to do in a
forward pass (run, run_timed: its time is 0, or its input conversion's
where it is the net's first layer; `config` says where its work went).

The tile: one of TILE_PIXELS pixels whose depthwise rows (pixels x
channels x 4 bytes) fit in the device's local memory; where not even one
pixel's fit, the two layers stay two kernels, and `config` says why.
- On a CPU (PoCL) a work-group is a loop on one core: tiles of CPU_PIXELS
  pixels and a work-item per group of four output channels, so that the
  work-items run one after another read one filter for each pixel of the
  tile in turn.  Measured on MobileNet-v2's folded blocks on a 2-core EPYC
  (PoCL 3.1; the fastest of 40 passes, other work sharing the cores):
  tiles of 2 pixels about 1% faster than 4 and 7% faster than 8; 4
  work-items a pixel, each looping over a quarter of the channel groups,
  about 12% slower than one per group on the wide 7x7 and 14x14 blocks.
- On a GPU the tile is the largest that still gives as many tiles as
  compute units, with up to GPU_ITEMS work-items, and the output channels
  are split over up to MAX_SPLITS work-groups per tile, each recomputing
  the tile's depthwise results (at most RECOMPUTE of the 1x1's work), so
  that a 7x7 layer still gives the GPU several work-groups per unit.

Whether a pair folds (fold_depthwise): "measured" (the default): per pair
the faster form at prepare, each form's ops enqueued REPEATS times back
to back then finished, so that a form with more kernels pays its
launches (a pass on a GPU is bound by them); or "always", or "never".
Measured on an H100 (reports/nvidia-h100/NOTES.md): the fold won
MobileNet-v2's first blocks in device time (wide, few channels: 1.8x) and
lost its last (7x7, 960 channels, each split redoing the depthwise:
0.3x).  Chosen by device time alone, the two kernels' extra launches made
the whole pass slower (vectorised-tiled 1.51 ms against 1.14 folding
all); chosen as now, 14 of 17 pairs fold and the pass takes 0.81x
[0.80, 0.82] of folding all (benchmarks/dw_pw.py --forms always,measured).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from nets import Net

from ..opencl.net import LayerOp, Recorder
from ..opencl.workgroups import Limits
from .residual import InPlaceOfConv

TILE_PIXELS = (8, 4, 2, 1)   # candidates, in order of preference
CPU_PIXELS = 2               # the largest tile on a CPU
GPU_ITEMS = 128              # work-items per work-group on a GPU (four warps, two AMD wavefronts)
MAX_SPLITS = 8
RECOMPUTE = 0.25             # the most depthwise work a split may redo, against the 1x1's
FOLDS = ("always", "never", "measured")   # fold_depthwise: one form everywhere, or per pair the faster
ROUNDS = 5                   # timed runs of each form when measuring, in turn; the fastest counts ...
REPEATS = 8                  # ... each its ops enqueued this many times back to back
TIMED = f"host time per enqueue of {REPEATS} back to back, the least of {ROUNDS}"   # how fastest_ms times


def foldable_depthwise(net: Net, i: int) -> int | None:
    """The index of the depthwise layer that 1x1 conv `i` can fold, or None:
    conv i is 1x1, stride 1, unpadded, not grouped, and reads one layer, a
    depthwise conv (as many groups as input and output channels) that
    nothing else reads."""
    layer = net.layers[i]
    if (layer.kind != "conv" or layer.kernel != (1, 1) or layer.stride != (1, 1) or any(layer.padding)
            or layer.groups != 1 or len(net.sources(i)) != 1):
        return None
    d = net.sources(i)[0]
    if d < 0:
        return None
    dw = net.layers[d]
    if dw.kind != "conv" or not dw.groups > 1 or dw.groups != dw.out_channels or dw.groups != net.in_shape(d)[0]:
        return None
    if dw.dilation != (1, 1):   # dw_pw's depthwise reads neighbouring taps
        return None
    readers = [k for k in range(len(net.layers)) if d in net.sources(k)]
    return d if readers == [i] else None


@dataclass(frozen=True)
class DwPwPlan:
    """tp pixels per work-group, g work-items per pixel, `splits` work-groups
    per tile along the output channels, each taking `cps` groups of four."""

    pixels: int
    tp: int
    g: int
    splits: int
    cps: int
    local_bytes: int

    @property
    def local(self) -> tuple:
        return (self.tp, self.g)

    @property
    def global_size(self) -> tuple:
        return (-(-self.pixels // self.tp) * self.tp, self.splits * self.g)

    def defines(self) -> dict:
        return {"TP": self.tp, "G": self.g, "CPS": self.cps}

    def describe(self) -> dict:
        return {"pixels_per_group": self.tp, "items_per_pixel": self.g, "channel_splits": self.splits,
                "local_bytes": self.local_bytes}


def plan_dw_pw(pixels: int, xv: int, yv: int, taps: int, gpu: bool, compute_units: int, lim: Limits,
               local_mem_bytes: int) -> DwPwPlan | None:
    """The tile of `pixels` output pixels (N * H * W), the depthwise's `xv`
    float4s per pixel and `taps` window taps, and the 1x1's `yv` output
    float4s, under the device's limits; None where one pixel's depthwise row
    does not fit in local memory."""
    fitting = [tp for tp in TILE_PIXELS if tp * xv * 16 <= local_mem_bytes and tp <= lim.max_group
               and tp <= lim.max_items[0] and (gpu or tp <= CPU_PIXELS)]
    if not fitting:
        return None
    tp = fitting[0]
    if gpu:   # as many tiles as units, where a smaller tile gives that
        tp = next((t for t in fitting if -(-pixels // t) >= compute_units), fitting[-1])
    tiles = -(-pixels // tp)
    splits = 1
    if gpu and tiles < 2 * compute_units:
        # each split past the first redoes the depthwise, `taps` multiply-adds a channel per pixel
        # against the 1x1's 4 * yv: at most RECOMPUTE of those in all
        most = max(1, min(MAX_SPLITS, yv, 1 + int(4 * yv * RECOMPUTE / taps)))
        splits = max(1, min(most, -(-2 * compute_units // tiles)))
    cps = -(-yv // splits)
    splits = -(-yv // cps)   # no split left empty
    g = max(1, min(cps, GPU_ITEMS // tp if gpu else cps, lim.max_group // tp, lim.max_items[1]))
    return DwPwPlan(pixels, tp, g, splits, cps, tp * xv * 16)


class DwPwOp(InPlaceOfConv):
    """The 1x1 conv's op running `dw_pw`: the depthwise's input, weights and
    bias, the 1x1's weights and bias, then (with a folded add) the add's other
    input, and the output (the 1x1's, or the add's).  Host reads and writes
    are the unfolded 1x1 op's (`conv_op`)."""

    def __init__(self, conv_op, launch, args: tuple, step: str, plan: DwPwPlan):
        super().__init__(conv_op)
        self.launch, self.args, self.step, self.plan = launch, args, step, plan

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


def fastest_ms(rt, forms: list[list[LayerOp]], rounds: int = ROUNDS, repeats: int = REPEATS) -> list[float]:
    """Each form's ops (the same layers' work, done two ways) timed in
    turn, `rounds` times after one untimed run each: host time of
    `repeats` back-to-back enqueues of its ops and one finish, per
    enqueue; the least of each form (other work on a shared device only
    adds).  Host time, as a pass pays a kernel's launch as well as its run, on the queue a timed pass runs
    on (no profiling: Runtime.unprofiled)."""
    best = [float("inf")] * len(forms)
    with rt.unprofiled():
        quiet = Recorder(rt.queue, enabled=False)
        for ops in forms:
            for op in ops:
                op.enqueue(quiet)
        rt.queue.finish()
        for _ in range(rounds):
            for n, ops in enumerate(forms):
                start = time.perf_counter()
                for _ in range(repeats):
                    for op in ops:
                        op.enqueue(quiet)
                rt.queue.finish()
                best[n] = min(best[n], (time.perf_counter() - start) * 1e3 / repeats)
    return best
