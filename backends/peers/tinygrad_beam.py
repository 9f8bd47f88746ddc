"""In tinygrad's process (a child, tinygrad_device.py): its schedule search
(BEAM) under our control.

tinygrad asks `tinygrad.codegen.opt.search.beam_search` for the schedule of
each kernel it compiles while BEAM is set; that function looks the kernel up
in tinygrad's cache (CACHEDB) and otherwise searches.  BeamHook stands in
for it (installed once per process) so that a run never searches: a kernel
whose choice was seeded into the cache gets it (tinygrad's own lookup
applies it), any other gets tinygrad's hand-coded heuristics, as at BEAM=0,
and is counted unsearched.  The tuner records those others (with what their
search needs) and searches them one at a time with tinygrad's own search,
which writes its choice into the cache; the choice is then returned for the
committed file (tinygrad_choices.py).
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

from .tinygrad_choices import Choice, Choices, KernelKey, now

# tinygrad's knobs of the search (read by tinygrad at each search): recorded with each choice where set
SEARCH_SETTINGS = ("BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", "BEAM_MIN_PROGRESS", "BEAM_UOPS_MAX", "BEAM_ESTIMATE",
                   "BEAM_PADTO", "BEAM_TIMEOUT_SEC", "BEAM_DEV_TIMEOUT", "NOLOCALS", "TC", "TC_OPT", "PARALLEL")


def _search_module():
    import tinygrad.codegen.opt.search as search
    return search


def key_of(s, amt: int, allow_test_size: bool) -> KernelKey:
    """The key tinygrad's search files kernel scheduler `s` under, less the device."""
    return KernelKey(int(amt), s.ast.key.hex(), bool(allow_test_size), str(s.ren.suffix))


def kernel_name(s) -> str:
    """A short name for people: reduce or elementwise, and the kernel's loop sizes."""
    return ("r" if s.reduceop is not None else "E") + "_" + "_".join(str(n) for n in s.full_shape)


def opts_to_json(opts) -> list:
    return [[o.op.name, o.axis, list(o.arg) if isinstance(o.arg, tuple) else o.arg] for o in opts]


def opts_from_json(rows) -> list:
    from tinygrad.codegen.opt import Opt, OptOps
    return [Opt(OptOps[op], axis, tuple(arg) if isinstance(arg, list) else arg) for op, axis, arg in rows]


def cache_device(device: str) -> str:
    """The device string tinygrad's search keys its cache by on tinygrad's device `device`."""
    from tinygrad import Device
    return Device[device].renderer.target.device


def put(key: KernelKey, device: str, opts: list) -> None:
    """Choice `opts` (tinygrad's Opts) of kernel `key` into tinygrad's cache, as its search looks it up on `device`."""
    from tinygrad.helpers import diskcache_put
    diskcache_put("beam_search", {"ast": bytes.fromhex(key.ast), "amt": key.width, "allow_test_size":
                                  key.allow_test_size, "device": cache_device(device), "suffix": key.suffix}, opts)


def seed(choices: Choices, device: str) -> int:
    """Every choice into tinygrad's cache under the key its search looks up on `device`; how many."""
    for c in choices.kernels.values():
        put(c.key, device, opts_from_json(c.opts))
    return len(choices.kernels)


def heuristic(s):
    """What tinygrad does without BEAM: its hand-coded optimisations (none for a multi-block kernel)."""
    from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
    from tinygrad.uop.ops import Ops
    if any(u.op is Ops.STAGE for u in s.ast.backward_slice):
        return s
    return hand_coded_optimizations(s)


@dataclass
class Pending:
    """A kernel met unsearched, with what tinygrad's search of it needs."""

    key: KernelKey
    name: str
    sched: object
    rawbufs: list
    var_vals: dict
    cost_ms: float | None = None   # under the heuristics, once timed


class BeamHook:
    """tinygrad's beam_search, answering from the seeded choices or with the heuristics (see the module)."""

    _installed: "BeamHook | None" = None

    def __init__(self, known: set[str]):
        self.known = set(known)           # KernelKey.text of every seeded choice
        self.seen: dict[str, str] | None = None   # while watching: key -> name, in compile order
        self.recording = False
        self.pending: dict[str, Pending] = {}
        self.original = _search_module().beam_search

    @classmethod
    def install(cls, known: set[str]) -> "BeamHook":
        """The process's hook (one: tinygrad's search function is the process's)."""
        if cls._installed is None:
            cls._installed = cls(known)
            _search_module().beam_search = cls._installed
        else:
            cls._installed.known |= set(known)
        return cls._installed

    def __call__(self, s, rawbufs, var_vals, amt, allow_test_size=True, disable_cache=False):
        key = key_of(s, amt, allow_test_size)
        if self.seen is not None:
            self.seen.setdefault(key.text, kernel_name(s))
        if key.text in self.known:
            return self.original(s, rawbufs, var_vals, amt, allow_test_size)   # found in the seeded cache
        if self.recording and key.text not in self.pending:
            self.pending[key.text] = Pending(key, kernel_name(s), s.copy(), rawbufs, var_vals)
        return heuristic(s)

    @contextmanager
    def watching(self):
        """The kernels the schedule search is asked for inside (key -> name); tinygrad asks once per
        kernel and process, so the caller clears tinygrad's program cache first where it needs all."""
        self.seen = {}
        try:
            yield self.seen
        finally:
            self.seen = None

    def time_heuristic(self, key: str) -> float | None:
        """Pending kernel `key` under the heuristics (ms), which orders the search: the costliest first."""
        p = self.pending[key]
        if p.cost_ms is None:
            p.cost_ms = self.time_ms(p, heuristic(p.sched.copy()))
        return p.cost_ms

    def time_ms(self, p: Pending, sched) -> float | None:
        """Kernel `p` scheduled as `sched`, timed as tinygrad's search times a candidate (least of 3, ms)."""
        search = _search_module()
        _, compiled = search._try_compile((0, sched))
        if compiled is None:
            return None
        bufs = [b.ensure_allocated() if b is not None else b for b in p.rawbufs]
        try:
            return min(search._time_program(compiled[0], p.var_vals, bufs, cnt=3)) * 1e3
        except Exception:  # noqa: BLE001 - a kernel that cannot be timed alone keeps no cost: it goes last
            return None

    def search(self, key: str, device: str) -> Choice:
        """tinygrad's own search of pending kernel `key`, the heuristics' schedule kept as a candidate:
        where it times faster than the search's best (as tinygrad's search times them), it is the choice,
        so a search never makes a kernel slower.  The choice goes into tinygrad's cache too."""
        p = self.pending[key]
        t0 = time.perf_counter()
        best = self.original(p.sched.copy(), p.rawbufs, p.var_vals, p.key.width, p.key.allow_test_size)
        took = time.perf_counter() - t0
        best_ms, kept = self.time_ms(p, best), "search"
        heuristic_ms = self.time_ms(p, heuristic(p.sched.copy()))   # beside the best, on the same clock
        if heuristic_ms is not None and (best_ms is None or heuristic_ms < best_ms):
            best, best_ms, kept = heuristic(p.sched.copy()), heuristic_ms, "heuristics"
            put(p.key, device, best.applied_opts)
        self.known.add(key)
        del self.pending[key]
        settings = {k: os.environ[k] for k in SEARCH_SETTINGS if k in os.environ}
        return Choice(p.key, opts_to_json(best.applied_opts), p.name, round(took, 2), _rounded(heuristic_ms),
                      _rounded(best_ms), settings, now(), kept)


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else float(f"{ms:.4g}")
