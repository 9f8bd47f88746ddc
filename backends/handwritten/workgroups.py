"""Work-group shapes for `vectorised`: the candidates per kind of device
(the rule that picks one per layer is backends/opencl/workgroups.choose_local).

The study (section 7.2.1) found (1, 4, 4) best on a Mali T-628 (output rows,
columns, channels) and named (2, 2, 4), (1, 2, 4) and (1, 1, 4) as
variants.  Our conv work-item computes four output channels, so a shape's
third number counts groups of four channels.

The rule, per layer: take the device's candidate list in order of
preference, drop the shapes the device or the compiled kernel cannot run
(MAX_WORK_GROUP_SIZE, MAX_WORK_ITEM_SIZES, the kernel's WORK_GROUP_SIZE),
and use the first one whose rounded-up NDRange adds at most 1/8 idle
work-items; if none does, the one that adds fewest.  So VGG's 14x14 conv5
layers get (2, 2, 4) instead of (1, 4, 4), which would round 14 columns
up to 16, and LeNet's 6-channel C1 gets a shape with one channel group.

Why these lists:
- 'mali' (and anything ARM): the study's shapes, in its order.
- 'cpu' (PoCL): a work-group is a loop on one core, so the shape matters
  little; measured on a 2-core EPYC with PoCL 3.1, (1, 4, 4) ran VGG's conv
  layers as fast as (1, 8, 8), (4, 4, 4) or (1, 16, 4), so the study's
  shapes are kept.
- 'gpu' (NVIDIA, AMD, Intel): at least 64 work-items (two NVIDIA warps or
  one AMD wavefront) so the compute units stay busy; then the study's.
"""
from __future__ import annotations

from ..opencl.workgroups import Limits

STUDY_SHAPES = ((1, 4, 4), (2, 2, 4), (1, 2, 4), (1, 1, 4))
FEW_CHANNEL_SHAPES = ((4, 4, 1), (2, 4, 2), (2, 2, 2), (2, 2, 1))   # layers with 1-3 groups of 4 channels
GPU_SHAPES = ((1, 8, 16), (2, 8, 8), (1, 8, 8), (1, 4, 16), (4, 8, 4), (2, 4, 8), (8, 8, 1), (4, 16, 1))

CONV_SHAPES = {
    "mali": STUDY_SHAPES + FEW_CHANNEL_SHAPES,
    "cpu": STUDY_SHAPES + FEW_CHANNEL_SHAPES,
    "gpu": GPU_SHAPES + STUDY_SHAPES + FEW_CHANNEL_SHAPES,
}
# dense at batch > 1: (outputs, images)
DENSE_SHAPES = {
    "mali": ((4, 4), (16, 1), (4, 1)),
    "cpu": ((16, 4), (16, 1), (4, 4), (4, 1)),
    "gpu": ((64, 2), (64, 1), (32, 4), (32, 1), (16, 4)),
}
# GEMV at batch 1: (lanes sharing one output row, rows per work-group)
GEMV_SHAPES = {
    "mali": (4, 16),     # not measured here: no Mali at hand
    "cpu": (1, 16),      # one work-item streams one row; no local-memory reduction
    "gpu": (64, 1),      # 64 lanes read one row side by side, then reduce
}


def choose_gemv(device: str, limits: Limits) -> tuple:
    """(lanes, rows) of the batch-1 GEMV, shrunk to the limits; lanes stay a
    power of two (the local-memory reduction halves them)."""
    lanes, rows = GEMV_SHAPES[device]
    while lanes * rows > limits.max_group or rows > limits.max_items[1] or lanes > limits.max_items[0]:
        if rows > 1:
            rows //= 2
        else:
            lanes //= 2
    return max(lanes, 1), max(rows, 1)
