"""Choosing between forms of the same work by measuring them at prepare, as
`clblast-best` chooses its compositions and cuDNN's benchmark mode its
algorithms: a layer's direct kernel against its Winograd ones (winograd.py),
a split sum against one kernel (split_choice.py), a block of layers fused
against its layers' own kernels (blocks.py).

Each form is a list of ops enqueued back to back, so a form with more
launches pays them, as a forward pass does where it is bound by launches
(a GPU at batch 1).  Host time from the first enqueue to the finish, per
run of the form; the least of the rounds (other work on a shared device
only adds).  A form that takes long is run less: the rounds stop once each
form has had MIN_ROUNDS and CAP_S seconds have passed in all, so a slow
device (PoCL on big layers, Oclgrind) spends little time here.

Where a form must first be shown to compute what another does (Winograd's
against the direct kernel, a split sum's last-adds form against its adding
kernel), outputs_on_random_input runs each on the same random input, and
rel_l2 says how far apart two outputs are (the one place that figure is made).
"""
from __future__ import annotations

import time

import numpy as np

from ..opencl.net import Recorder

ROUNDS = 5          # rounds at most, each form in turn in each
MIN_ROUNDS = 1      # ... and at least
REPEATS = 8         # runs of a form back to back in one round, while one run takes under ...
SHORT_MS = 1.0      # ... this many milliseconds (else one run a round: its launches are then noise)
CAP_S = 0.25        # seconds in all after which no new round starts
HOW = (f"host time of a form's ops enqueued back to back ({REPEATS} runs a round where one takes under "
       f"{SHORT_MS} ms) and one finish, the least of up to {ROUNDS} rounds in turn after one untimed run")


def fastest_ms(rt, forms: dict[str, list], cap_s: float = CAP_S) -> dict[str, float]:
    """Each form's time per run in ms (see the module docstring); each form runs once untimed first.  On the
    queue a timed pass runs on (no profiling: its launches cost the host less, Runtime.unprofiled)."""
    with rt.unprofiled():
        return _fastest_ms(rt, forms, cap_s)


def _fastest_ms(rt, forms: dict[str, list], cap_s: float) -> dict[str, float]:
    quiet = Recorder(rt.queue, enabled=False)
    repeats = {}
    for name, ops in forms.items():
        start = time.perf_counter()
        for op in ops:
            op.enqueue(quiet)
        rt.queue.finish()
        repeats[name] = REPEATS if (time.perf_counter() - start) * 1e3 < SHORT_MS else 1
    best = {name: float("inf") for name in forms}
    began = time.perf_counter()
    for rnd in range(ROUNDS):
        if rnd >= MIN_ROUNDS and time.perf_counter() - began > cap_s:
            break
        for name, ops in forms.items():
            start = time.perf_counter()
            for _ in range(repeats[name]):
                for op in ops:
                    op.enqueue(quiet)
            rt.queue.finish()
            best[name] = min(best[name], (time.perf_counter() - start) * 1e3 / repeats[name])
    return best


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    """How far `got` is from `ref`: the norm of the difference over `ref`'s (over 1 where `ref` is all zero)."""
    return float(np.linalg.norm(np.asarray(got).reshape(np.shape(ref)) - ref)) / (float(np.linalg.norm(ref)) or 1.0)


def outputs_on_random_input(net, index: int, forms: dict, seed) -> dict:
    """Each form's output of layer `index` of `net` on one random input (`seed`: numpy's, which input)."""
    x = np.random.default_rng(seed).standard_normal(net.input_layout(index).canonical_shape).astype(np.float32)
    return outputs_on(net, index, forms, x)


def outputs_on(net, index: int, forms: dict, x: np.ndarray) -> dict:
    """Each form's (an op's) output of layer `index` of `net` on the canonical input `x`, in float64; the
    buffers it used poisoned again after."""
    src = net.input_layout(index)
    in_buf = net.activations[net.net.sources(index)[0] + 1]
    out_layout, out_buf = net.layouts[index + 1], net.activations[index + 1]
    net.rt.write(in_buf, src.pack(x))
    quiet = Recorder(net.rt.queue, enabled=False)
    outs = {}
    try:
        for form, op in forms.items():
            op.enqueue(quiet)
            net.rt.finish()
            outs[form] = op.read_output().astype(np.float64)
    finally:   # zero border, NaN interior, as prepare left them (layout.py)
        net.rt.write(in_buf, src.template())
        net.rt.write(out_buf, out_layout.template())
    return outs
