"""The net's first conv reading the net's input as it is given, NCHW without
a border (`vectorised-tiled`; kernels/tiled_conv.cl NCHW_IN).

Every pass of a hand-written net starts with the input's conversion to the
buffers' layout, NHWC with a zero border (net.py's InputEdge): one launch of
little work (7-8 us on an H200, in a ResNet-18 pass of 30 launches and
0.41 ms).  Where the first layer is a tiled conv of at most four input
channels (an image's three), one slice of its sum is one tap's channels, so
its kernel can read them from the input itself, three scalar loads for one
float4, and take the taps outside the image as zeros instead of the
border's: no conversion kernel.

Its output must be the converted form's on a random input (the same sum in
the same order: any difference is a fault), and it is measured against the
conversion and the conv at prepare (measured.py), the faster kept
(`read_input` "always" takes it unmeasured, "never" keeps the conversion).  Only the
pass changes: the layer-wise checks keep the conversion and the conv.
"""
from __future__ import annotations

import numpy as np

from ..opencl.launch import Launch
from ..opencl.net import Recorder
from ..opencl.workgroups import limits
from .measured import HOW, fastest_ms, rel_l2
from .net import InputEdge
from .residual import InPlaceOfConv

MODES = ("measured", "always", "never")
MAX_REL_L2 = 1e-6   # the two forms add the same products in the same order
SEED = 43
CONVERTED, DIRECT = "conversion, then the conv", "the conv reads the input"


class InputReadingConv(InPlaceOfConv):
    """The first conv's tiled kernel built to read the canonical input buffer `stage`."""

    def __init__(self, op, launch, stage):
        super().__init__(op)
        self.launch = launch
        self.args = (stage, *op.args[1:])
        self.step = f"{op.step} (reads the input NCHW)"

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


def _outputs(net, edges: dict, x: np.ndarray) -> dict:
    """Each pass-start op's (an InputEdge) output of layer 0 on the canonical input `x`, in float64; the
    staging buffer and the layer's buffers poisoned again after."""
    first = edges[CONVERTED]
    quiet = Recorder(net.rt.queue, enabled=False)
    outs = {}
    try:
        for name, edge in edges.items():
            edge.write_input(x)
            edge.enqueue(quiet)
            net.rt.finish()
            outs[name] = first.op.read_output().astype(np.float64)
    finally:   # NaN interior, zero border, as prepare left them (layout.py)
        net.rt.write(first.stage, np.full(first.shape, np.nan, np.float32))
        net.rt.write(net.activations[0], net.layouts[0].template())
        net.rt.write(net.activations[1], net.layouts[1].template())
    return outs


class ReadsInputInFirstConv:
    """A TiledNet mixin: read_input_in_first_conv() gives the pass the first conv reading the input itself,
    where it applies, checks and measures faster (module docstring)."""

    def read_input_in_first_conv(self, ops: list, conv_type: type, source: str) -> None:
        """In `ops` (a pass's), the first op as `conv_type`'s kernel (of `source`) reading the input, where
        it applies, matches and measures faster; `config` says which ran and why."""
        edge = ops[0]
        why = ("turned off (read_input='never')" if self.forms.read_input == "never"
               else self._cannot_read_input(edge, conv_type))
        if why:
            self.config["first_conv"] = {"chosen": CONVERTED, "why": why}
            return
        op, src = edge.op, self.layouts[0]
        defines = {**op.defines, "NCHW_IN": 1, "XC": src.c}
        kernel = self.rt.kernel(source, "conv_tiled", defines)
        if limits(self.rt, kernel).max_group < op.plan.tile.threads:
            self.config["first_conv"] = {"chosen": CONVERTED, "why": "its kernel built takes fewer work-items"}
            return
        launch = Launch(self.rt, source, "conv_tiled", None, op.launch.global_, op.launch.local, exact=True,
                        kernel=kernel)
        direct = InputEdge(InputReadingConv(op, launch, edge.stage), self.rt, edge.stage, edge.shape, None)
        edges = {CONVERTED: edge, DIRECT: direct}
        x = np.random.default_rng(SEED).standard_normal(edge.shape).astype(np.float32)
        outs = _outputs(self, edges, x)
        err = rel_l2(outs[DIRECT], outs[CONVERTED])
        record = {"rel_l2_against_converted": float(f"{err:.2e}")}
        self.config["first_conv"] = record
        if not err <= MAX_REL_L2:   # NaN too
            record.update(chosen=CONVERTED, why=f"its output differs by a relative L2 of {err:.1e}")
            return
        if self.forms.read_input == "always":
            record["chosen"] = DIRECT
        else:
            times = fastest_ms(self.rt, {name: [e] for name, e in edges.items()})
            self.config["measured_forms"] = HOW
            record.update(chosen=min(times, key=times.get), ms={k: round(v, 4) for k, v in times.items()})
        if record["chosen"] == DIRECT:
            ops[0] = direct
            self.config["input_conversion"] = f"none in a pass: {self.net.layers[0].name} reads the input (first_conv.py)"

    def _cannot_read_input(self, edge, conv_type: type) -> str:
        """Why the pass's first op cannot be the conv reading the input, or ''."""
        if not isinstance(edge, InputEdge) or edge is not self.ops[0] or edge.convert is None:
            return "no conversion before it, or the first layer is folded into another kernel"
        op = edge.op
        if type(op) is not conv_type or op.reduce is not None or op.last_adds:
            return "the first layer is not a tiled conv in one kernel"
        if self.layouts[0].c_stored != 4:
            return f"the input has {self.layouts[0].c} channels: a slice of more than 4 spans taps"
        return ""
