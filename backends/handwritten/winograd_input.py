"""Which kernel does a Winograd GEMM form's input transform (winograd_gemm.py): wg_input, one work-item a
(tile, four channels) loading the a x a patch, or, on a GPU, wg_input_rows, a work-items a (tile, four
channels), each loading one row of the patch, the rows meeting in local memory
(kernels/winograd_transforms.cl).  At batch 1 a small layer's wg_input has 2,048-6,272 work-items, each
waiting on 16-36 loads (VGG-16's conv3-conv5: 9-11 us a kernel against 5-7 for the output transform).

Where both build, the rows form's transformed tiles are first held against wg_input's on a random input
(the same sums in another order: rounding apart, MAX_REL_L2), then both are timed with their launches
(measured.py) and the faster kept; `config["winograd_input"]` says per layer and tile size.
"""
from __future__ import annotations

import numpy as np

from ..opencl.launch import Launch
from ..opencl.net import Recorder
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import limits
from . import measured
from .layout import round_up

DEVICES = ("gpu",)   # device classes the rows form is offered on (a CPU's work-item is a loop: no gain)
GROUP_TILES = 32     # tiles a work-group of wg_input_rows takes, a + 2 work-items each
MAX_REL_L2 = 1e-6    # how far its tiles may be from wg_input's
SEED = 61            # of the random input they are compared on


class _Alone:
    """One launch with its arguments, as measured.fastest_ms times an op."""

    def __init__(self, launch: Launch, args: tuple):
        self.launch, self.args = launch, args

    def enqueue(self, rec):
        rec.kernel(self.launch.name, self.launch(*self.args))


def rows_transform(net, index: int, m: int, window: dict, tiles: int, source: str) -> Launch | None:
    """wg_input_rows for layer `index`, or None where the device class is not offered it or its kernel
    takes fewer work-items than its group."""
    if net.device not in DEVICES:
        return None
    wa, channels = m + 2, net.input_layout(index).c_stored // 4
    try:
        launch = Launch(net.rt, source, "wg_input_rows", {**window, "WM": m, "ROWS_TG": GROUP_TILES},
                        (round_up(tiles, GROUP_TILES), wa, channels), (GROUP_TILES, wa, 1), exact=True)
    except KernelBuildError:
        return None
    return launch if limits(net.rt, launch.kernel).max_group >= GROUP_TILES * wa else None


def choose(net, index: int, m: int, per_tile: Launch, rows: Launch | None, v_buf, v_floats: int) -> Launch:
    """`per_tile` or `rows` (module docstring), `v_buf` the transformed tiles' scratch (`v_floats` of them the
    layer's)."""
    if rows is None:
        return per_tile
    src = net.input_layout(index)
    in_buf = net.activations[net.net.sources(index)[0] + 1]
    forms = {"per tile": _Alone(per_tile, (in_buf, v_buf)), "per row": _Alone(rows, (in_buf, v_buf))}
    x = np.random.default_rng((SEED, index)).standard_normal(src.canonical_shape).astype(np.float32)
    net.rt.write(in_buf, src.pack(x))
    tiles = {}
    try:
        for name, op in forms.items():
            op.enqueue(Recorder(net.rt.queue, enabled=False))
            net.rt.finish()
            tiles[name] = net.rt.read(v_buf, (v_floats,))
    finally:   # zero border, NaN interior, as prepare left it (layout.py)
        net.rt.write(in_buf, src.template())
    error = measured.rel_l2(tiles["per row"], tiles["per tile"])
    record = net.config.setdefault("winograd_input", {}).setdefault(net.net.layers[index].name, {})
    if not error <= MAX_REL_L2:   # NaN too
        record[f"F({m}x{m})"] = f"per tile: the per-row form's tiles were {error:.2g} from its (not timed)"
        return per_tile
    ms = measured.fastest_ms(net.rt, {name: [op] for name, op in forms.items()})
    chosen = min(ms, key=ms.get)
    record[f"F({m}x{m})"] = f"{chosen} (" + ", ".join(f"{k} {v:.4f} ms" for k, v in ms.items()) + ")"
    return rows if chosen == "per row" else per_tile

