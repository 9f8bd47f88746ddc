"""Work-group shapes that a device and a built kernel accept: the one place
every OpenCL backend fits its launches.

A shape fits when its work-items number at most the device's
MAX_WORK_GROUP_SIZE and the kernel's own WORK_GROUP_SIZE, and each of its
dimensions at most MAX_WORK_ITEM_SIZES.  A kernel's own limit is known only
once it is built, and some kernels take their work-group size as -D
constants, so `build_fitting` builds, reads the limit and rebuilds smaller.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_WASTE = 0.125   # idle work-items that rounding a grid up to a shape may add


@dataclass(frozen=True)
class Limits:
    max_group: int              # min(device MAX_WORK_GROUP_SIZE, kernel WORK_GROUP_SIZE)
    max_items: tuple            # device MAX_WORK_ITEM_SIZES


def limits(rt, kernel=None) -> Limits:
    """The limits of runtime `rt`'s device, and of `kernel` when given."""
    limit = int(rt.info["max_work_group_size"])
    if kernel is not None:
        import pyopencl as cl
        limit = min(limit, int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, rt.device)))
    return Limits(limit, tuple(int(v) for v in rt.info["max_work_item_sizes"]))


def device_class(info: dict) -> str:
    """'mali', 'gpu' or 'cpu' from a Runtime's info dict."""
    text = f"{info.get('vendor', '')} {info.get('name', '')} {info.get('platform', '')}".lower()
    if "mali" in text or text.startswith("arm"):
        return "mali"
    if "GPU" in str(info.get("type", "")).upper():
        return "gpu"
    return "cpu"


def fits(shape: tuple, lim: Limits) -> bool:
    return (int(np.prod(shape)) <= lim.max_group
            and all(d <= m for d, m in zip(shape, lim.max_items)))


def shrink(shape: tuple, lim: Limits) -> tuple:
    """Halve the largest dimension until the shape fits (ends at all ones)."""
    dims = [max(int(d), 1) for d in shape]
    while not fits(tuple(dims), lim) and max(dims) > 1:
        i = int(np.argmax(dims))
        dims[i] = max(dims[i] // 2, 1)
    return tuple(dims)


def rounded_global(grid: tuple, local: tuple) -> tuple:
    return tuple(-(-int(g) // int(l)) * int(l) for g, l in zip(grid, local))


def waste(grid: tuple, local: tuple) -> float:
    """Idle work-items added by rounding `grid` up to `local`, as a fraction."""
    return float(np.prod(rounded_global(grid, local))) / float(np.prod(grid)) - 1.0


def choose_local(grid: tuple, candidates, lim: Limits, max_waste: float = MAX_WASTE) -> tuple:
    """Of `candidates` (in order of preference) that fit, the first whose
    rounded-up grid adds at most `max_waste` idle work-items; if none does,
    the one that adds fewest; if none fits, the first shrunk until it does."""
    usable = [tuple(c) for c in candidates if fits(tuple(c), lim)]
    if not usable:
        return shrink(tuple(candidates[0]), lim)
    for shape in usable:
        if waste(grid, shape) <= max_waste:
            return shape
    return min(usable, key=lambda s: (waste(grid, s), usable.index(s)))


def build_fitting(rt, filename: str, name: str, choose, defines_of, threads_of, build=None):
    """(choice, kernel) for a kernel whose -D constants fix its work-group
    size: `choose(limits)` picks under the limits, `defines_of(choice)` gives
    the constants, `threads_of(choice)` its work-items.  Built once under the
    device's limits; while the built kernel accepts fewer work-items, chosen
    again under the kernel's limit and rebuilt.  `build(defines)`: how to
    build it, when not kernels/`filename`."""
    build = build or (lambda defines: rt.kernel(filename, name, defines))
    lim = limits(rt)
    while True:
        choice = choose(lim)
        kernel = build(defines_of(choice))
        built = limits(rt, kernel)
        if threads_of(choice) <= built.max_group:
            return choice, kernel
        if built.max_group >= lim.max_group:   # choose() ignored the limit: stop rather than loop
            raise ValueError(f"{name}: {threads_of(choice)} work-items chosen under a limit of {lim.max_group}")
        lim = built
