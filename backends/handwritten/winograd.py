"""Winograd F(2x2,3x3) and F(4x4,3x3) for the 3x3 stride-1 convolutions of
`vectorised` and `vectorised-tiled` (kernels/winograd.cl; the algebra in
winograd_math.py, the work-groups in winograd_plan.py).

Per layer, at prepare, as `clblast-best` chooses its compositions: the
layer's direct kernel (vectorised's conv, or the tiled implicit GEMM) and
each Winograd form are built and run on one random input; a form whose
output differs from the direct kernel's by more than MAX_REL_L2 (relative
L2) is refused there, the float32 rounding of its transforms being too
coarse for that layer; the others are timed (measured.py: launches count)
and the fastest runs.  `config["winograd"]` records per layer the choice,
every form's time and error, and why a form was refused; the step is
named after the form ("winograd F(2x2,3x3)+relu").

The direct kernel's own error against the float64 oracle is of the order
of float32's rounding (about 1e-7 relative here), far below MAX_REL_L2, so
the difference between the two is the Winograd form's error.

Besides these one-kernel forms, each tile size has its GEMM forms
(winograd_gemm.py: the tile products as one batched GEMM between two
transform kernels), one per GEMM tile candidate, measured and checked
alike, named "F(2x2,3x3) GEMM 64x64 (8x8)".

Where `compare tune --scope forms` measured the layer on this device
(forms_tuned.py), only the form it kept is built, checked against the
direct kernel as above, and run; one that no longer builds or matches is
measured here as before, the record saying why (`not_recalled`).

`winograd` (the nets' argument): "measured" (the default), "never", or
"F2" / "F4" to run that one-kernel form wherever it applies, unmeasured,
with its first candidate plan ("F2:1" / "F4:1": the second, where the
device has two: a GPU's), or "F2-gemm" / "F4-gemm" the GEMM form with its
first GEMM tile (":1", ":2", ":3": the second, third, fourth); the tests and Oclgrind
check each kernel so.
"""
from __future__ import annotations

import numpy as np

from nets.errors import Unsupported

from ..opencl.launch import Launch, step_name
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import build_fitting, limits
from .forms_tuned import form_key
from .measured import HOW, fastest_ms, outputs_on_random_input, rel_l2
from .net import KernelOp
from .residual import ResidualConvOp
from .winograd_math import TILE_SIZES, applies, filter_transform, name
from .winograd_plan import plan_winograd
from . import winograd_gemm

SOURCE = "winograd.cl"
# a tile size forced, with the first (or ":1" the second) candidate plan; "-gemm": the GEMM form
FORCED = ("F2", "F4", "F2:1", "F4:1") + tuple(f"F{m}-gemm{w}" for m in (2, 4) for w in ("", ":1", ":2", ":3"))
MODES = ("measured", "never") + FORCED
MAX_REL_L2 = 1e-5   # a tenth of the float32 tolerance (compare/checking.py): layers' errors add up in a net
SEED = 39


class WinogradOp(KernelOp):
    """One 3x3 stride-1 conv layer as kernels/winograd.cl's one kernel."""

    def __init__(self, net, index, launch, plan, u, bias, what: str):
        super().__init__(net, index, launch, (u, bias), step_name(what, net.net.layers[index].activation))
        self.plan, self.what = plan, what

    def describe(self) -> dict:
        return {**super().describe(), "winograd": self.plan.describe()}


def _pad(values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    out[:len(values)] = values
    return out


def plans(net, index: int, m: int, lim) -> list:
    """The candidate plans of layer `index` of `net` (a VectorisedNet) as F(m x m, 3 x 3) under limits `lim`."""
    src, dst = net.input_layout(index), net.layouts[index + 1]
    info = net.rt.info
    return plan_winograd(m, net.batch, dst.h, dst.w, src.c_stored, dst.c_stored, net.device != "cpu",
                         int(info["compute_units"]), lim.max_group, lim.max_items, int(info["local_mem_bytes"]))


def build(net, index: int, params: dict, m: int, which: int = 0) -> WinogradOp:
    """Layer `index` of `net` as F(m x m, 3 x 3), with the `which`-th candidate plan."""
    layer = net.net.layers[index]
    src, dst = net.input_layout(index), net.layouts[index + 1]
    window = net.window_defines(layer, src, dst)

    def choose(lim):
        found = plans(net, index, m, lim)
        return found[min(which, len(found) - 1)]
    plan, kernel = build_fitting(net.rt, SOURCE, "winograd", choose, lambda p: {**window, **p.defines()},
                                 lambda p: p.threads)
    launch = Launch(net.rt, SOURCE, "winograd", None, plan.global_size, plan.local, exact=True, kernel=kernel)
    u = net.upload(filter_transform(params["weight"], m, src.c_stored, plan.kp).ravel(),
                   f"{layer.name} weights, Winograd-transformed {name(m)}")
    bias = net.upload(_pad(params["bias"], plan.kp), f"{layer.name} bias ({name(m)})")
    return WinogradOp(net, index, launch, plan, u, bias, f"winograd {name(m)}")


def with_residual(net, op: WinogradOp, j: int, extra: dict, residual) -> ResidualConvOp | None:
    """`op` with add j in its epilogue (`extra`: its -D constants), writing the add's output; None
    where the rebuilt kernel no longer takes the plan's work-group."""
    i = op.index
    window = net.window_defines(net.net.layers[i], net.input_layout(i), net.layouts[j + 1])
    kernel = net.rt.kernel(SOURCE, "winograd", {**window, **op.plan.defines(), **extra})
    if limits(net.rt, kernel).max_group < op.plan.threads:
        return None
    launch = Launch(net.rt, SOURCE, "winograd", None, op.launch.global_, op.launch.local, exact=True, kernel=kernel)
    return ResidualConvOp(op, launch, residual, net.activations[j + 1],
                          step_name(f"{op.what}+add", net.net.layers[j].activation))


def _form_name(m: int, count: int, plan) -> str:
    """How a one-kernel form is named in the records: by its tile size, and its plan where there are several."""
    return name(m) if count == 1 else f"{name(m)} {plan.label}"


def _recall(net, index: int, params: dict, op, bufs: list, form: str):
    """Layer `index` as the form `compare tune --scope forms` recorded (forms_tuned.py), built alone and checked
    against the direct kernel `op` on a random input: (that op, None), or (None, why not) where the form no
    longer builds or matches, and the layer is measured as before."""
    layer = net.net.layers[index]
    record = net.config.setdefault("winograd", {})
    if form == "direct":
        record[layer.name] = {"chosen": "direct", "how": net.recalled.how()}
        return op, None
    built = None
    for m in TILE_SIZES:
        if not form.startswith(name(m) + " ") and form != name(m):
            continue
        gemm = " GEMM " in form
        if gemm:
            winograd_gemm.scratch(net)   # shared by the layers: allocated before this layer's own buffers
        first = len(net.buffers)
        try:
            if gemm:
                which = [i for i, p in enumerate(winograd_gemm.plans(net, index, m)) if p.form == form]
                built = winograd_gemm.build(net, index, params, m, which[:1])[0] if which else None
                made = built.plan.form if built is not None else None
            else:
                found = plans(net, index, m, limits(net.rt))
                which = [i for i, p in enumerate(found) if _form_name(m, len(found), p) == form]
                built = build(net, index, params, m, which[0]) if which else None
                made = _form_name(m, len(found), built.plan) if built is not None else None
        except (Unsupported, KernelBuildError, ValueError) as exc:
            net.release(net.buffers[first:])
            return None, f"{form}: {str(exc).splitlines()[0]}"
        if made != form:   # the device's limits now give another plan (or none) under that name
            net.release(net.buffers[first:])
            return None, f"{form}: no longer among the layer's forms here"
        outs = outputs_on_random_input(net, index, {"direct": op, form: built}, SEED + index)
        err = rel_l2(outs[form], outs["direct"])
        if not err <= MAX_REL_L2:   # NaN too
            net.release(net.buffers[first:])
            return None, f"{form}: relative L2 {err:.1e} against the direct kernel, above {MAX_REL_L2:.0e}"
        net.release(bufs)
        record[layer.name] = {"chosen": form, "how": net.recalled.how(),
                              "rel_l2_against_direct": {form: float(f"{err:.2e}")}}
        return built, None
    return None, f"{form}: not a Winograd form's name"


def _forms_added(net, index: int, offered: list[str] | None) -> list[str]:
    """The forms this code offers layer `index` that a record chosen from `offered` did not have (none where
    the record does not say what it was chosen from)."""
    if offered is None:
        return []
    now = []
    for m in TILE_SIZES:
        try:
            found = plans(net, index, m, limits(net.rt))
            now += [_form_name(m, len(found), p) for p in found]
            now += [p.form for p in winograd_gemm.plans(net, index, m)]
        except Unsupported:
            continue
    return [f for f in now if f not in offered]


class ChoosesWinograd:
    """A VectorisedNet mixin: choose_form() puts a Winograd op in place of a
    3x3 stride-1 conv's direct one where the `winograd` mode says so."""

    def fused_ops(self):
        winograd_gemm.release_unused_scratch(self, self.ops)
        return super().fused_ops()

    def choose_form(self, index: int, layer, params: dict, op, bufs: list):
        forced = self.forms.winograd
        if (forced == "never" or not applies(layer, self.input_layout(index).c)
                or self.reads_or_writes_a_view(index)):   # its kernels take no channel pitch
            return super().choose_form(index, layer, params, op, bufs)
        record = self.config.setdefault("winograd", {})
        if forced in FORCED:
            m, which = int(forced[1]), int(forced.partition(":")[2] or 0)
            if "-gemm" in forced:
                winograd_gemm.scratch(self)   # shared by the layers: allocated before this layer's own buffers
                first = len(self.buffers)
                try:
                    (chosen,) = winograd_gemm.build(self, index, params, m, [which])
                except Unsupported as exc:   # the layer keeps its direct kernel, and says why
                    self.release(self.buffers[first:])
                    record[layer.name] = {"chosen": "direct", "refused": {f"{name(m)} GEMM": str(exc)}}
                    return op
                form = chosen.plan.form
            else:
                chosen = build(self, index, params, m, which)
                form = name(m)
            self.release(bufs)
            record[layer.name] = {"chosen": form, "how": f"forced (winograd={forced!r})"}
            return chosen
        key = form_key(self.backend, self.batch, self.net.in_shape(index), layer)
        recalled, not_recalled = self.recalled.chosen("winograd", key), None
        new = _forms_added(self, index, self.recalled.offered(key)) if recalled is not None else []
        if new:
            recalled, not_recalled = None, f"{recalled}: chosen before {', '.join(new)} existed"
        if recalled is not None:
            chosen, not_recalled = _recall(self, index, params, op, bufs, recalled)
            if chosen is not None:
                return chosen
        forms, refused, owned = {"direct": op}, {}, {"direct": bufs}
        winograd_gemm.scratch(self)   # shared by the layers: allocated before this layer's own buffers
        for m in TILE_SIZES:
            try:
                count = len(plans(self, index, m, limits(self.rt)))
            except Unsupported as exc:   # the device's work-groups or local memory hold no plan
                refused[name(m)] = str(exc)
                continue
            for which in range(count):
                first = len(self.buffers)
                built = build(self, index, params, m, which)
                form = _form_name(m, count, built.plan)
                forms[form], owned[form] = built, self.buffers[first:]
            first = len(self.buffers)
            try:
                gemms = winograd_gemm.build(self, index, params, m)
            except Unsupported as exc:
                self.release(self.buffers[first:])
                refused[f"{name(m)} GEMM"] = str(exc)
                continue
            for built in gemms:   # one transformed filter and bias for all of them
                forms[built.plan.form], owned[built.plan.form] = built, self.buffers[first:]
        if len(forms) == 1:
            record[layer.name] = {"chosen": "direct", "refused": refused,
                                  **({"not_recalled": not_recalled} if not_recalled else {})}
            return op
        outs = outputs_on_random_input(self, index, forms, SEED + index)
        ref = outs["direct"]
        errors = {f: rel_l2(o, ref) for f, o in outs.items() if f != "direct"}
        for f, err in errors.items():
            if not err <= MAX_REL_L2:   # NaN too
                refused[f] = f"relative L2 {err:.1e} against the direct kernel, above {MAX_REL_L2:.0e}"
                del forms[f]
        times = fastest_ms(self.rt, {f: [o] for f, o in forms.items()})
        best = min(times, key=times.get)
        kept = {id(b) for b in owned[best]}
        self.release(list({id(b): b for f, bs in owned.items() for b in bs if id(b) not in kept}.values()))
        record[layer.name] = {"chosen": best, "ms": {f: round(t, 4) for f, t in times.items()},
                              "rel_l2_against_direct": {f: float(f"{e:.2e}") for f, e in errors.items()},
                              **({"refused": refused} if refused else {}),
                              **({"not_recalled": not_recalled} if not_recalled else {})}
        self.config["measured_forms"] = HOW
        return forms[best]
