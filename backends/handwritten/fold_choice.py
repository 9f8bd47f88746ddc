"""The choice between two layers' own kernels and the fused forms that would
replace them (layernorm_fused.py: a layernorm into the 1x1 after it;
head_fused.py: a global average pool into the dense after it): a form more
than `max_rel_l2` from float64 is refused; the rest are measured against
each other and, where the option is "measured", against the two kernels
(measured.py); "always" takes the only form unmeasured.  The buffers of
every form not chosen are released."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..opencl.net import Recorder
from .measured import HOW, fastest_ms, rel_l2
from .net import OutputEdge

OWN = "own kernels"


def pair_errors(net, first: int, i: int, forms: dict, x: np.ndarray, ref: np.ndarray) -> dict:
    """Each form's (a list of ops: the pair's work) relative L2 error against `ref`, the pair in float64 on
    `x`; the buffers are left as prepare made them."""
    return {name: rel_l2(got, ref) for name, got in pair_outputs(net, first, i, forms, x).items()}


def pair_outputs(net, first: int, i: int, forms: dict, x: np.ndarray) -> dict:
    """Each form's (a list of ops: the work of layers `first` to `i`) output of layer i on the canonical input
    `x` of layer `first`, in float64; the buffers are left as prepare made them."""
    src, dst = net.input_layout(first), net.layouts[i + 1]
    in_buf, out_buf = net.activations[net.net.sources(first)[0] + 1], net.activations[i + 1]
    quiet = Recorder(net.rt.queue, enabled=False)
    out = {}
    try:
        for name, ops in forms.items():
            net.rt.write(in_buf, src.pack(x))
            net.rt.write(out_buf, dst.template())
            for op in ops:
                op.enqueue(quiet)
            net.rt.finish()
            out[name] = dst.unpack(net.rt.read(out_buf, dst.stored_shape)).astype(np.float64)
    finally:   # zero border, NaN interior, as prepare left them (layout.py)
        net.rt.write(in_buf, src.template())
        net.rt.write(out_buf, dst.template())
        net.rt.write(net.activations[first + 1], net.layouts[first + 1].template())
    return out


@dataclass
class Fold:
    best: str                       # OWN, or the chosen form's label
    forms: dict[str, list]          # label -> the ops that replace the pair: [the first, folded; the fused]
    times: dict[str, float] | None  # each measured form's ms; None: not measured
    record: dict                    # what the results keep of the choice (the net's config)

    def kept(self, second: str) -> str:
        """Why the pair keeps its own kernels, for the config."""
        if not self.forms:
            return f"its own kernel: every fused form refused ({'; '.join(self.record.get('refused', {}).values())})"
        return (f"its own kernel, {second} another: measured faster so ({self.times[OWN]:.4f} ms against "
                f"{min(self.times[k] for k in self.forms):.4f} fused)")

    def timed(self) -> str:
        """'; measured 0.0123 ms against 0.0456 as two' where the two kernels were measured too."""
        if not self.times or OWN not in self.times:
            return ""
        return f"; measured {self.times[self.best]:.4f} ms against {self.times[OWN]:.4f} as two"


def choose(net, ops: list, i: int, own: list, candidates: dict, owned: dict[str, list], err: dict[str, float],
           refused: dict[str, str], folded_first: Callable[[], object], option: str, into: str,
           max_rel_l2: float) -> Fold:
    """`candidates` (label -> the fused op) for the pair ending at layer `i` whose own ops are `own`; `err`: each
    candidate's relative L2 against float64; `refused`: forms refused already (a build the compiler refused);
    `folded_first()`: the op left in the first layer's place; `owned`: each candidate's buffers."""
    record = {"into": into, "rel_l2_against_float64": {k: float(f"{v:.2e}") for k, v in err.items()}}
    refused.update({k: f"relative L2 {err[k]:.1e} against float64, above {max_rel_l2:.0e}"
                    for k in candidates if not err[k] <= max_rel_l2})   # NaN too
    if refused:
        record["refused"] = refused
    forms = {}
    for k, op in candidates.items():
        if k in refused:
            continue
        fused = op
        if isinstance(ops[i], OutputEdge):   # as the net's last layer, it converts the output after it
            fused = OutputEdge(op, net.rt, ops[i].stage, ops[i].shape, ops[i].convert)
        forms[k] = [folded_first(), fused]
    times = None
    if option == "measured" or len(forms) > 1:
        times = fastest_ms(net.rt, {**forms, OWN: own} if option == "measured" else forms)
        record["ms"] = {k: round(v, 4) for k, v in times.items()}
        net.config["measured_forms"] = HOW
        best = min(times, key=times.get)
    else:
        best = next(iter(forms), OWN)
    record["chosen"] = best
    for k, buffers in owned.items():
        if k != best:
            net.release(buffers)
    return Fold(best, forms, times, record)
