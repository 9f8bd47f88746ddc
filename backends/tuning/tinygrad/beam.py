"""In the search's child (session.py): tinygrad's own schedule search
(BEAM) of each kernel the run-time hook (backends/peers/tinygrad_beam.py)
met unsearched, one at a time on our call, each choice returned for the
committed file (backends/peers/tinygrad_choices.py)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ...peers.tinygrad_beam import BeamHook, search_module, heuristic, kernel_name, put
from ...peers.tinygrad_choices import Choice, KernelKey

# tinygrad's knobs of the search (read by tinygrad at each search): recorded with each choice where set
SEARCH_SETTINGS = ("BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", "BEAM_MIN_PROGRESS", "BEAM_UOPS_MAX", "BEAM_ESTIMATE",
                   "BEAM_PADTO", "BEAM_TIMEOUT_SEC", "BEAM_DEV_TIMEOUT", "NOLOCALS", "TC", "TC_OPT", "PARALLEL")


def opts_to_json(opts) -> list:
    return [[o.op.name, o.axis, list(o.arg) if isinstance(o.arg, tuple) else o.arg] for o in opts]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


@dataclass
class Pending:
    """A kernel met unsearched, with what tinygrad's search of it needs."""

    key: KernelKey
    name: str
    sched: object
    rawbufs: list
    var_vals: dict
    cost_ms: float | None = None   # under the heuristics, once timed


class SearchHook(BeamHook):
    """The run-time hook that also records each kernel met unsearched (with what its search needs), and
    searches those on demand."""

    def __init__(self, known: set[str]):
        super().__init__(known)
        self.pending: dict[str, Pending] = {}

    def unknown(self, key: KernelKey, s, rawbufs, var_vals) -> None:
        if key.text not in self.pending:
            self.pending[key.text] = Pending(key, kernel_name(s), s.copy(), rawbufs, var_vals)

    def time_heuristic(self, key: str) -> float | None:
        """Pending kernel `key` under the heuristics (ms), which orders the search: the costliest first."""
        p = self.pending[key]
        if p.cost_ms is None:
            p.cost_ms = self.time_ms(p, heuristic(p.sched.copy()))
        return p.cost_ms

    def time_ms(self, p: Pending, sched) -> float | None:
        """Kernel `p` scheduled as `sched`, timed as tinygrad's search times a candidate (least of 3, ms)."""
        search = search_module()
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
