"""Whether a `vectorised-tiled` conv splits its sum (tiled_plan.py), decided
by measuring: the split runs the tiled kernel on KSPLIT parts of the sum,
then a second kernel that adds the parts (the "add N parts" steps); on a
GPU at batch 1 that second launch can cost more than the split gains.

Where the plan (the cost model's, or `compare tune`'s, which timed the
kernels' device time alone) splits a layer's sum, the same tile unsplit, in
one kernel, is built too, and the same split whose last work-group per tile
adds the parts (no second launch: kernels/tiled_conv.cl LAST_ADDS); all
three are timed at prepare with their launches (measured.py), and the
fastest runs; `config["split_sums"]` records the times per layer.  A split
the caller forced (TiledNet's `ksplit`) is kept.
"""
from __future__ import annotations

import numpy as np

from .measured import HOW, fastest_ms, outputs_on_random_input

SEED = 41   # of the last-adds form's check inputs


def last_adds_refused(info: dict) -> str | None:
    """Why a tile's last work-group may not add its split sum on this device, or None.  The form has one
    work-group read the parts others wrote, after their fence and an atomic count: OpenCL C 1.2 does not
    promise that those writes are then visible across work-groups (Oclgrind reports a race).  Two platforms
    are known to make them so: NVIDIA's, whose global fence is the GPU-wide one (PTX membar.gl), and PoCL on
    a CPU, whose work-groups are threads of one coherent memory; elsewhere the form is not offered."""
    platform, kind = str(info.get("platform", "")), str(info.get("type", "")).upper()
    if platform.startswith("NVIDIA") or (platform.startswith("Portable Computing Language") and "CPU" in kind):
        return None
    return (f"not offered on {platform or 'this platform'}: OpenCL C 1.2 does not promise one work-group sees "
            f"another's writes after a fence and an atomic")


def choose_split(net, index: int, split_op, split_bufs: list, others: dict):
    """`split_op` (which allocated `split_bufs`) or one of the ops `others` makes (name -> a function that
    builds it), the fastest; the rest released."""
    split = f"{split_op.plan.ksplit} parts + adding kernel"
    ops, bufs = {split: split_op}, {split: split_bufs}
    for name, build in others.items():
        first = len(net.buffers)
        ops[name] = build()
        bufs[name] = net.buffers[first:]
    times = fastest_ms(net.rt, {name: [op] for name, op in ops.items()})
    refused = {}
    for name in sorted(times, key=times.get):
        why = _differs(net, index, split_op, ops[name]) if getattr(ops[name], "last_adds", False) else None
        if why is None:
            chosen = name
            break
        refused[name] = why
    for name in ops:
        if name != chosen:
            net.release(bufs[name])
    net.config.setdefault("split_sums", {})[net.net.layers[index].name] = {
        "chosen": chosen, "ms": {k: round(v, 4) for k, v in times.items()}, **({"refused": refused} if refused else {})}
    net.config["measured_forms"] = HOW
    return ops[chosen]


def _differs(net, index: int, split_op, last_adds_op, passes: int = 3) -> str | None:
    """Why the last-adds form may not run (its output not the adding kernel's on a fresh random input each pass:
    the same sum in the same order, so a difference past rounding is a part read before it was written, or a
    part of the pass before), or None."""
    for draw in range(passes):
        outs = outputs_on_random_input(net, index, {"adding kernel": split_op, "last adds": last_adds_op},
                                       (SEED + index, draw))
        want, got = outs["adding kernel"], outs["last adds"]
        if not np.abs(got - want).max() <= 1e-5 * max(np.abs(want).max(), 1e-30):   # NaN too
            return f"its output on random input {draw + 1} was not the adding kernel's"
    return None
