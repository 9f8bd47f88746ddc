"""One problem run in this process through CLBlast's real routine, the
way the backends call it, on random data: checked against a float64
reference, and timed.

Used by the search (one configuration after another, overrides put in
force before each), by the verification, and by the per-problem mode's
floor (what a parameter switch adds to the call after it).  Three clocks:
- `span_ms`: the device time between markers around the call on the
  in-order profiling queue: every kernel the routine launches (an indirect
  GEMM pads and transposes), without the host's enqueue cost;
- `wall_ms`: host clock around enqueue + finish, what a pass pays;
- `kernel_ms` (the Xgemm kernel alone only): its own event, start to end,
  the clock CLBlast's tuner reports (no launch gap, unlike the markers).
"""
from __future__ import annotations

import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import library
from .library import pyclblast
from .problems import GEMM, GEMV, XGEMM_ALONE, Problem

TOLERANCE = 1e-4   # relative L2 error of a float32 result (the project's float32 tolerance)


SAMPLES = 2048      # outputs checked against the float64 reference, at random ...
EDGES = 64          # ... and the first and last ones (a tile at the border is where a configuration errs)


class Call:
    """`problem` made ready on `rt`'s queue: float32 inputs, a float64
    reference of a sample of the outputs (a whole product in float64 would
    cost more than a configuration's compile), and the output buffer."""

    def __init__(self, rt, problem: Problem, seed: int = 0):
        self.rt, self.problem, self.q = rt, problem, rt.queue
        rng = np.random.default_rng(seed)
        s = problem.sizes
        f32 = (lambda shape: rng.uniform(-1, 1, shape).astype(np.float32))
        if problem.routine == GEMM:
            m, n, k, b = s
            a, bm = f32((m, k)), f32((b, k, n))
            self.shape = (b, m, n)
            self.inputs = [a, bm.reshape(b * k, n)]   # pyclblast takes matrices: the batch stacked
            self.at = _sample(self.shape, rng)
            bb, i, j = np.unravel_index(self.at, self.shape)
            self.ref = np.einsum("sk,sk->s", a[i].astype(np.float64), bm[bb, :, j].astype(np.float64))
        elif problem.routine == XGEMM_ALONE:
            m, n, k = s
            a, bm = f32((k, m)), f32((k, n))      # column-major A (m x k) and B (n x k), as stored
            self.shape = (n, m)                    # column-major C (m x n), as stored
            self.inputs = [a, bm]
            self.at = _sample(self.shape, rng)
            j, i = np.unravel_index(self.at, self.shape)
            self.ref = np.einsum("ks,ks->s", a[:, i].astype(np.float64), bm[:, j].astype(np.float64))
        elif problem.routine == GEMV:
            rows, cols, transposed = s
            w, x = f32((rows, cols)), f32(cols)
            self.shape = (rows,)
            self.inputs = [np.ascontiguousarray(w.T) if transposed else w, x]
            self.at = np.arange(rows)
            self.ref = w.astype(np.float64) @ x.astype(np.float64)
        else:
            c, h, w_, kh, kw, ph, pw, sh, sw, k, n = s
            im, wt = f32((n, c, h, w_)), f32((k, c, kh, kw))
            oh, ow = (h + 2 * ph - kh) // sh + 1, (w_ + 2 * pw - kw) // sw + 1
            self.shape = (n, k, oh, ow)
            self.inputs = [im, wt]
            self.at = _sample(self.shape, rng)
            self.ref = _conv_reference(im, wt, (ph, pw), (sh, sw), np.unravel_index(self.at, self.shape))
        self.dev = [cla.to_device(self.q, v) for v in self.inputs]
        flat = (s[3] * s[0], s[1]) if problem.routine == GEMM else self.shape
        self.out = cla.empty(self.q, flat, np.float32)

    def enqueue(self):
        """Enqueue the routine once; the event of its last kernel."""
        s, q = self.problem.sizes, self.q
        if self.problem.routine == GEMM:
            m, n, k, b = s
            a, bm = self.dev
            if b == 1:
                return pyclblast.gemm(q, m, n, k, a, bm, self.out, a_ld=k, b_ld=n, c_ld=n, alpha=1.0, beta=0.0)
            return pyclblast.gemmStridedBatched(q, m, n, k, b, a, bm, self.out, k, n, n, 0, k * n, m * n,
                                                alpha=1.0, beta=0.0)
        if self.problem.routine == XGEMM_ALONE:
            m, n, k = s
            a, bm = self.dev
            return library.gemm_as_tuned(q, m, n, k, a.data, bm.data, self.out.data, event=True)
        if self.problem.routine == GEMV:
            rows, cols, transposed = s
            w, x = self.dev
            if transposed:
                return pyclblast.gemv(q, cols, rows, w, x, self.out, a_ld=rows, alpha=1.0, beta=0.0, a_transp=True)
            return pyclblast.gemv(q, rows, cols, w, x, self.out, a_ld=cols, alpha=1.0, beta=0.0)
        c, h, w_, kh, kw, ph, pw, sh, sw, k, n = s
        im, wt = self.dev
        library.convgemm(q, c, h, w_, (kh, kw), (ph, pw), (sh, sw), k, n, im.data, 0, wt.data, 0, self.out.data, 0)
        return None

    def check(self) -> str | None:
        """Run once on an output poisoned with NaN; None when right, else what was wrong."""
        # an element never written stays NaN; but GEMV reads y even at beta 0, so it starts at zero
        self.out.fill(np.float32(0 if self.problem.routine == GEMV else np.nan))
        self.enqueue()
        out = self.out.get()
        if not np.all(np.isfinite(out)):
            return "wrong result: NaN or inf in the output"
        got = out.reshape(-1)[self.at].astype(np.float64)
        err = np.linalg.norm(got - self.ref) / max(np.linalg.norm(self.ref), 1e-30)
        return None if err <= TOLERANCE else f"wrong result: relative L2 error {err:.2e}"

    def span_ms(self) -> float:
        """Device time of one call between markers (host time where the driver has no timer)."""
        if not self.rt.profiling_ok:
            return self.wall_ms()
        before = cl.enqueue_marker(self.q)
        self.enqueue()
        after = cl.enqueue_marker(self.q)
        after.wait()
        return (after.profile.end - before.profile.end) * 1e-6

    def kernel_ms(self) -> float:
        """The Xgemm kernel's own device time (an XGEMM_ALONE problem runs that kernel and nothing else)."""
        if self.problem.routine != XGEMM_ALONE:
            raise ValueError(f"{self.problem.key}: only the Xgemm kernel alone is timed by its own event")
        if not self.rt.profiling_ok:
            return self.wall_ms()
        event = self.enqueue()
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-6

    def enqueue_ms(self, rounds: int = 5) -> float:
        """The least host time of enqueuing the call (CLBlast's routine set up and its kernels put on the
        queue, not waited for), over `rounds` calls each finished before the next."""
        least = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            self.enqueue()
            least = min(least, (time.perf_counter() - t0) * 1e3)
            self.q.finish()
        return least

    def wall_ms(self) -> float:
        t0 = time.perf_counter()
        self.enqueue()
        self.q.finish()
        return (time.perf_counter() - t0) * 1e3


def _sample(shape, rng) -> np.ndarray:
    """Flat indices of the outputs checked: SAMPLES at random, and the first and last EDGES."""
    total = int(np.prod(shape))
    picked = rng.choice(total, size=min(SAMPLES, total), replace=False)
    return np.unique(np.concatenate([picked, np.arange(min(EDGES, total)), np.arange(max(total - EDGES, 0), total)]))


def _conv_reference(im, wt, pad, stride, at) -> np.ndarray:
    """Cross-correlation outputs (n, k, y, x) at the given indices, in float64."""
    n, k, y, x = at
    kh, kw = wt.shape[2:]
    padded = np.pad(im.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dy, dx = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    rows = (y * stride[0])[:, None, None] + dy[None]
    cols = (x * stride[1])[:, None, None] + dx[None]
    windows = padded[n[:, None, None, None], np.arange(im.shape[1])[None, :, None, None], rows[:, None], cols[:, None]]
    return np.einsum("scyx,scyx->s", windows, wt[k].astype(np.float64))
