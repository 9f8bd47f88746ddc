"""The search of our own kernels' tiles (`compare tune --scope tiles`):
every tile and split of `vectorised-tiled` on each conv layer of the nets,
each candidate's output checked by the caller's `checker_for` (the harness
checks it against the float64 oracle, which lives above this layer), the
fastest kept per layer and device (backends/handwritten/tiles_tuned.py
reads it back).  As fair to our kernels
as the tuners are to CLBlast's, and under the same kind of budget (each
layer a share of what is left): the cost model's own choice is timed
first, so a layer always has a measured answer.

A candidate's time is the device time of its convolution steps (the tiled
kernel and, for a split sum, the kernel that adds the parts), median of up
to REPEATS runs or CAP_S seconds; the host clock where the driver gives no
device times.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import time

import numpy as np

from typing import Callable

from nets import Net
from nets.errors import Unsupported, UserError
from nets.weights import init_weights, make_input

from ...handwritten.tiled import TiledNet
from ...handwritten.tiled_plan import MAX_SPLIT, TILES, slice_length
from ...handwritten.tiles_tuned import layer_key
from ...opencl.runtime import KernelBuildError
from ..budget import Budget

# (the one-layer net, its weights, its input) -> a test of a candidate's output, made once per layer
CheckerFor = Callable[[Net, dict, np.ndarray], Callable[[np.ndarray], bool]]

REPEATS = 5
CAP_S = 0.5


def conv_layers(net, batch: int) -> list[tuple[str, Net, int]]:
    """(key, the layer as a net of its own, batch) for each distinct conv layer that has
    tiles (a grouped or depthwise one runs vectorised's kernels: nothing to search)."""
    found = {}
    for i, layer in enumerate(net.layers):
        if layer.kind == "conv" and layer.groups == 1 and layer.dilation == (1, 1):   # the tiled convs
            key = layer_key(batch, net.in_shape(i), layer)
            alone = dataclasses.replace(layer, inputs=())   # in a net of its own it reads the input
            found.setdefault(key, (key, Net(f"{net.name}:{layer.name}", net.in_shape(i), (alone,)), batch))
    return list(found.values())


def _conv_ms(prepared, x) -> float:
    """One timed run of the conv steps alone (device time, else the host clock)."""
    prepared.load_input(x)
    t0 = time.perf_counter()
    (timing,) = prepared.run_timed()
    wall = (time.perf_counter() - t0) * 1e3
    conv = [s.ms for s in timing.steps if s.how == "event" and ("tiled conv" in s.name or "parts" in s.name)]
    return sum(conv) if conv else wall


def _candidates(one: Net, batch: int, model: tuple) -> list[tuple]:
    c_in = -(-one.in_shape(0)[0] // 4) * 4
    slices = one.layers[0].kernel[0] * one.layers[0].kernel[1] * c_in // slice_length(c_in)
    splits = [k for k in (1, 2, 4, 8, 16) if k <= min(MAX_SPLIT, slices)]
    every = [(t, k) for t in TILES for k in splits]
    return [model] + [c for c in every if c != model]


def _time_candidate(rt, one: Net, weights: dict, batch: int, x, is_correct, tile, k) -> float | None:
    """The candidate's time (ms), or None where it cannot run the layer or gives a wrong output."""
    try:
        prepared = TiledNet(rt, one, weights, batch, tiles=(tile,), ksplit=k, winograd="never", pointwise="never",
                            cpu_conv="never")
    except (Unsupported, KernelBuildError, ValueError):
        return None
    try:
        if not is_correct(prepared.forward(x)):   # a wrong candidate is never kept
            return None
        runs = []
        while len(runs) < REPEATS and sum(runs) < CAP_S * 1e3:
            runs.append(_conv_ms(prepared, x))
        return float(np.median(runs))
    finally:
        prepared.close()


def search(rt, one: Net, batch: int, budget: Budget, checker_for: CheckerFor, progress=lambda s: None) -> dict:
    """The candidates of one layer timed until `budget` expires (the model's always): the fastest, and the
    model's."""
    weights = init_weights(one, 0)
    x = make_input(one, batch, 0)
    is_correct = checker_for(one, weights, x)
    model = TiledNet(rt, one, weights, batch, winograd="never", pointwise="never", cpu_conv="never")
    op = model.ops[0]
    while hasattr(op, "op"):   # the first and last ops are wrapped with the layout conversions
        op = op.op
    plan = op.plan
    model.close()
    timed, refused, best = 0, 0, None
    model_ms = None
    for tile, k in _candidates(one, batch, (plan.tile, plan.ksplit)):
        if budget.expired() and model_ms is not None:
            break
        progress(f"tiles {one.name}: {timed} timed")   # the time: the progress display's
        ms = _time_candidate(rt, one, weights, batch, x, is_correct, tile, k)
        budget.worked()   # a candidate tried, timed or not, is a unit of the budget's work
        if ms is None:
            refused += 1
            continue
        timed += 1
        if (tile, k) == (plan.tile, plan.ksplit):
            model_ms = ms
        if best is None or ms < best[2]:
            best = (tile, k, ms)
    if best is None:
        raise UserError(f"no tile of vectorised-tiled ran {one.name} on {rt.info['name']}")
    tile, k, ms = best
    return {"layer": one.name, "tile": [tile.tm, tile.tn, tile.rm, tile.rn], "ksplit": k, "ms": round(ms, 5),
            "timed": timed, "refused": refused, "seconds": round(budget.spent(), 1),
            "model": {"tile": [plan.tile.tm, plan.tile.tn, plan.tile.rm, plan.tile.rn], "ksplit": plan.ksplit,
                      "ms": None if model_ms is None else round(model_ms, 5)}}


def tune_tiles(rt, nets: list[Net], batches: list[int], budget: Budget, checker_for: CheckerFor,
               progress=lambda s: None):
    """Every conv layer of `nets` (at their batches) within `budget`, each an even share of what is left:
    the tuning file's entry, and one table row per layer."""
    layers = [item for net, batch in zip(nets, batches) for item in conv_layers(net, batch)]
    found, rows = {}, []
    for i, (key, one, batch) in enumerate(layers):
        got = search(rt, one, batch, budget.share(budget.left() / (len(layers) - i)), checker_for, progress)
        found[key] = got
        model = got["model"]
        rows.append(["tiles", "vectorised-tiled", one.name, key, got["timed"] + got["refused"], got["timed"],
                     f"{_tile_text(got)} {got['ms']:.3f} ms (model's {_tile_text(model)}: "
                     f"{'-' if model['ms'] is None else format(model['ms'], '.3f')} ms)", f"{got['seconds']:.0f}"])
    entry = {"device": rt.info["name"], "tuned": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "budget_s": budget.seconds, "took_s": round(budget.spent(), 1), "layers": found}
    return entry, rows


def merged(there: dict | None, new: dict) -> dict:
    """The device's tiles after a tune: the layers it timed over those timed before (another net's stay)."""
    old = there.get("layers") if isinstance(there, dict) else None
    if not isinstance(old, dict):
        return new
    return {**new, "layers": {**old, **new["layers"]}}


def _tile_text(choice: dict) -> str:
    tm, tn, rm, rn = choice["tile"]
    return f"{tm}x{tn} ({rm}x{rn}) split {choice['ksplit']}"
