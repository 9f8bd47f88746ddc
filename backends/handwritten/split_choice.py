"""Whether a `vectorised-tiled` conv splits its sum (tiled_plan.py), decided
by measuring: the split runs the tiled kernel on KSPLIT parts of the sum,
then a second kernel that adds the parts (the "add N parts" steps); on a
GPU at batch 1 that second launch can cost more than the split gains.

Where the plan (the cost model's, or `compare tune`'s, which timed the
kernels' device time alone) splits a layer's sum, the same tile unsplit, in
one kernel, is built too, both are timed at prepare with their launches
(measured.py), and the faster runs; `config["split_sums"]` records both
times per layer.  A split the caller forced (TiledNet's `ksplit`) is kept.
"""
from __future__ import annotations

from .measured import HOW, fastest_ms


def choose_split(net, index: int, split_op, split_bufs: list, build_whole):
    """`split_op` (which allocated `split_bufs`) or the op `build_whole()` makes, the faster."""
    first = len(net.buffers)
    whole = build_whole()
    whole_bufs = net.buffers[first:]
    split = f"{split_op.plan.ksplit} parts + adding kernel"
    times = fastest_ms(net.rt, {split: [split_op], "one kernel": [whole]})
    keep_split = times[split] < times["one kernel"]
    net.release(whole_bufs if keep_split else split_bufs)
    net.config.setdefault("split_sums", {})[net.net.layers[index].name] = {
        "chosen": split if keep_split else "one kernel", "ms": {k: round(v, 4) for k, v in times.items()}}
    net.config["measured_forms"] = HOW
    return split_op if keep_split else whole
