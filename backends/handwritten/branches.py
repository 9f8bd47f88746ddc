"""A pass's branches on a second queue, where that measures faster (issue 58).

At batch 1 a GPU runs many of a net's layers with most of its compute units idle: ResNet-18's
1x1 projections (32 to 128 work-groups on an H200's 132 compute units) run as long as kernels ten
times their work.  Such a layer need not wait for the layer enqueued before it to finish when it
does not read it: NVIDIA's OpenCL runs two in-order queues' kernels side by side
(benchmarks/two_queues.py: two kernels of 16 work-groups in 0.63 of the time one after the other).

A branch is one op of the pass (its launches) that
- writes its own layer's buffer, which the op right after it does not read, and some later op does
  (the join: the first that reads it);
- shares no buffer with the ops between it and the join, but the inputs both only read (each layer's
  buffer is written by its own op alone; a buffer both touch otherwise, Winograd's shared scratch or a
  concatenation's, keeps the op on the one queue).
It goes to the runtime's second queue after the launch before it, and the join waits for it
(passlist.py).  Branches do not overlap: one at a time.  The pass is then timed with and without them
(as `compare run` times it, rounds in turn) and the faster kept; the per-layer times and checks
enqueue layer by layer on one queue, as before.
"""
from __future__ import annotations

import pyopencl as cl

from ..opencl.flushes import timed_ways
from ..opencl.passlist import Branch, LaunchList


def _buffers(args) -> set[int]:
    return {a.int_ptr for a in args if isinstance(a, cl.MemoryObjectHolder)}


def _op_launches(net, quiet) -> list[list[int]]:
    """Per op of the pass, the indices of its launches in `net.flat`; [] where the ops' launches, captured one
    op at a time, are not the flat list's (a pass that enqueues more than its ops)."""
    spans, at = [], 0
    for op in net.pass_ops():
        with net.rt.recording_into(LaunchList(net.rt)) as probe:
            op.enqueue(quiet)
        spans.append(list(range(at, at + probe.kernels)))
        at += probe.kernels
    return spans if at == net.flat.kernels else []


def plan(net, quiet) -> tuple[Branch, ...]:
    """The branches of `net`'s pass (a HandwrittenNet, flattened); see the module docstring."""
    spans = _op_launches(net, quiet)
    if not spans:
        return ()
    ops, flat = net.pass_ops(), net.flat
    touched = [set().union(*(_buffers(flat.args[i]) for i in span)) if span else set() for span in spans]

    def reads(op) -> set[int]:   # the buffers of the layers op's layer reads
        return _buffers(net.activations[s + 1] for s in net.net.sources(op.index))

    branches, p = [], 1
    while p < len(ops) - 1:
        op, span = ops[p], spans[p]
        out = net.activations[op.index + 1]
        if not span or span[0] == 0 or out is None or out.int_ptr not in touched[p]:
            p += 1
            continue
        join = next((c for c in range(p + 1, len(ops)) if spans[c] and out.int_ptr in touched[c]), None)
        window = [] if join is None else [w for w in range(p + 1, join) if spans[w]]
        ins = reads(op)
        if window and all(touched[p] & touched[w] <= ins & reads(ops[w]) for w in window):
            branches.append(Branch(span[0], span[-1], spans[join][0]))
            p = join
        else:
            p += 1
    return tuple(branches)


def choose(net, quiet) -> tuple[str, dict[str, float]]:
    """Plan `net`'s branches and keep them where the pass measures faster with them: the way chosen ("one
    queue" or "N branches on a second queue") and each way's median pass in ms ({} where there is none)."""
    flat = net.flat
    branches = plan(net, quiet)
    if not branches:
        return "one queue", {}
    two = f"{len(branches)} branch{'es' if len(branches) > 1 else ''} on a second queue"
    ways = {"one queue": (), two: branches}
    medians = timed_ways(flat, quiet, {name: (lambda b=b: setattr(flat, "branches", b)) for name, b in ways.items()})
    chosen = two if medians[two] < medians["one queue"] else "one queue"
    flat.branches = ways[chosen]
    return chosen, medians
