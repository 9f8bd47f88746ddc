"""The roofline of a device and where each layer of each backend sits under
it: the arithmetic the report's roofline table and plot both read.

A layer's arithmetic intensity is its FLOPs over the bytes it must at least
move: its input activations, its parameters and its output activations, in
float32, each once (a backend that moves more, im2col say, pays for it in
time, which is the point of the plot).  The roof at an intensity is
min(peak, intensity x bandwidth), with the peak and bandwidth `compare peak`
measured on the device (the bandwidth counts bytes read + written, as the
layer's bytes do).  A backend's point is the layer's FLOPs over its median
wall time; its fraction of the roof is that over the roof at its intensity.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import analysis as an
from ..results import LayerInfo, RunResult

FLOAT32 = 4   # bytes


def layer_bytes(layer: LayerInfo, batch: int) -> int | None:
    """The bytes `layer` must at least move at `batch`; None where the file
    does not record its shapes (version-1 files)."""
    if layer.in_shape is None or layer.out_shape is None or layer.params is None:
        return None
    return FLOAT32 * (batch * math.prod(layer.in_shape) + layer.params + batch * math.prod(layer.out_shape))


def intensity(layer: LayerInfo, batch: int) -> float | None:
    """FLOPs per byte moved (layer.flops is already for the whole batch)."""
    nbytes = layer_bytes(layer, batch)
    return layer.flops / nbytes if nbytes else None


def roof(peak_gflops: float, bandwidth_gbs: float, ai: float) -> float:
    """The most GFLOP/s a layer of intensity `ai` (FLOP/byte) can reach."""
    return min(peak_gflops, ai * bandwidth_gbs)


@dataclass
class LayerRoof:
    """One layer at one batch: its intensity, the roof there, and what each backend reached."""

    name: str
    batch: int
    intensity: float
    roof_gflops: float
    achieved: dict[str, float] = field(default_factory=dict)   # backend -> GFLOP/s

    def percent(self, backend: str) -> float | None:
        g = self.achieved.get(backend)
        return None if g is None else 100 * g / self.roof_gflops


@dataclass
class Roofline:
    """A results file's layers under its device's roof."""

    net: str
    device: str
    batch: int
    peak_gflops: float
    bandwidth_gbs: float
    backends: list[str]
    layers: list[LayerRoof]
    unshaped: list[str]        # layers left out: the file records no shapes for them


def missing(res: RunResult) -> str | None:
    """Why `res` has no roofline, or None when it has one."""
    if res.peak is None:
        return "the file holds no peak (a correctness-only run, or no OpenCL backend ran)"
    if not res.peak.bandwidth_gbs:
        return (f"its peak ({res.peak.source}) has no memory bandwidth; `compare peak` measures both, "
                f"--peak-gflops gives only the compute peak")
    if not any(an.on_device(res, b) for b in an.trusted(res)):
        return "no backend that runs on the device was timed with an output that passed the check"
    return None


def of(res: RunResult) -> Roofline | None:
    """The roofline of one results file: only backends on the device whose
    peak the file holds, only layers with FLOPs and recorded shapes."""
    if missing(res):
        return None
    peak, bw, batch = res.peak.gflops, res.peak.bandwidth_gbs, res.net.batch
    on = [b for b in an.trusted(res) if an.on_device(res, b)]
    layers, unshaped = [], []
    for i, layer in enumerate(res.net.layers):
        ai = intensity(layer, batch)
        if ai is None:
            unshaped.append(layer.name)
            continue
        if not ai > 0:
            continue   # no arithmetic: no place on a log-log roofline
        row = LayerRoof(layer.name, batch, ai, roof(peak, bw, ai))
        for b in on:
            g = an.gflops(layer.flops, an.layer_ms(b, i))
            if g is not None and layer.name not in an.folded(b):   # a folded layer's work is in another's time
                row.achieved[b.name] = g
        layers.append(row)
    return Roofline(net=res.net.name, device=res.device.name, batch=batch, peak_gflops=peak, bandwidth_gbs=bw,
                    backends=[b.name for b in on], layers=layers, unshaped=unshaped)
