"""Work-group shapes for `vectorised`: the candidates per kind of device, the
rule that picks one per layer, and the rounded-up global size.

The seed (section 7.2.1) found (1, 4, 4) best on a Mali T-628 (output rows,
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
- 'mali' (and anything ARM): the seed's shapes, in its order.
- 'cpu' (PoCL): a work-group is a loop on one core, so the shape matters
  little; measured on a 2-core EPYC with PoCL 3.1, (1, 4, 4) ran VGG's conv
  layers as fast as (1, 8, 8), (4, 4, 4) or (1, 16, 4), so the seed's
  shapes are kept.
- 'gpu' (NVIDIA, AMD, Intel): at least 64 work-items (two NVIDIA warps or
  one AMD wavefront) so the compute units stay busy; then the seed's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED_SHAPES = ((1, 4, 4), (2, 2, 4), (1, 2, 4), (1, 1, 4))
FEW_CHANNEL_SHAPES = ((4, 4, 1), (2, 4, 2), (2, 2, 2), (2, 2, 1))   # layers with 1-3 groups of 4 channels
GPU_SHAPES = ((1, 8, 16), (2, 8, 8), (1, 8, 8), (1, 4, 16), (4, 8, 4), (2, 4, 8), (8, 8, 1), (4, 16, 1))

CONV_SHAPES = {
    "mali": SEED_SHAPES + FEW_CHANNEL_SHAPES,
    "cpu": SEED_SHAPES + FEW_CHANNEL_SHAPES,
    "gpu": GPU_SHAPES + SEED_SHAPES + FEW_CHANNEL_SHAPES,
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
MAX_WASTE = 0.125


@dataclass(frozen=True)
class Limits:
    max_group: int              # min(device MAX_WORK_GROUP_SIZE, kernel WORK_GROUP_SIZE)
    max_items: tuple            # device MAX_WORK_ITEM_SIZES


def device_class(info: dict) -> str:
    """'mali', 'gpu' or 'cpu' from a Runtime's info dict."""
    text = f"{info.get('vendor', '')} {info.get('name', '')} {info.get('platform', '')}".lower()
    if "mali" in text or text.startswith("arm"):
        return "mali"
    if "GPU" in str(info.get("type", "")).upper():
        return "gpu"
    return "cpu"


def device_limits(info: dict, kernel=None, device=None) -> Limits:
    limit = int(info["max_work_group_size"])
    if kernel is not None:
        import pyopencl as cl
        limit = min(limit, int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)))
    return Limits(limit, tuple(int(v) for v in info["max_work_item_sizes"]))


def fits(shape: tuple, limits: Limits) -> bool:
    return (int(np.prod(shape)) <= limits.max_group
            and all(d <= m for d, m in zip(shape, limits.max_items)))


def shrink(shape: tuple, limits: Limits) -> tuple:
    """Halve the largest dimension until the shape fits (ends at all ones)."""
    dims = list(shape)
    while not fits(tuple(dims), limits) and max(dims) > 1:
        i = int(np.argmax(dims))
        dims[i] = max(dims[i] // 2, 1)
    return tuple(dims)


def rounded_global(grid: tuple, local: tuple) -> tuple:
    return tuple(-(-int(g) // int(l)) * int(l) for g, l in zip(grid, local))


def waste(grid: tuple, local: tuple) -> float:
    """Idle work-items added by rounding `grid` up to `local`, as a fraction."""
    return float(np.prod(rounded_global(grid, local))) / float(np.prod(grid)) - 1.0


def choose_local(grid: tuple, candidates, limits: Limits, max_waste: float = MAX_WASTE) -> tuple:
    """The rule of the module docstring."""
    usable = [tuple(c) for c in candidates if fits(tuple(c), limits)]
    if not usable:
        return shrink(tuple(candidates[0]), limits)
    for shape in usable:
        if waste(grid, shape) <= max_waste:
            return shape
    return min(usable, key=lambda s: (waste(grid, s), usable.index(s)))


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
