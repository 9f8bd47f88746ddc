"""In tinygrad's process (a child, tinygrad_device.py): its schedule search
(BEAM) under our control.

tinygrad asks `tinygrad.codegen.opt.search.beam_search` for the schedule of
each kernel it compiles while BEAM is set; that function looks the kernel up
in tinygrad's cache (CACHEDB) and otherwise searches.  BeamHook stands in
for it (installed once per process) so that a run never searches: a kernel
whose choice was seeded into the cache gets it (tinygrad's own lookup
applies it), any other gets tinygrad's hand-coded heuristics, as at BEAM=0,
and is counted unsearched.  The tuner's hook (backends/tuning/tinygrad/
beam.py) records those others and searches them with tinygrad's own search;
its choices reach the backend only through the committed file
(tinygrad_choices.py).
"""
from __future__ import annotations

from contextlib import contextmanager

from .tinygrad_choices import Choices, KernelKey

def search_module():
    import tinygrad.codegen.opt.search as search
    return search


def key_of(s, amt: int, allow_test_size: bool) -> KernelKey:
    """The key tinygrad's search files kernel scheduler `s` under, less the device."""
    return KernelKey(int(amt), s.ast.key.hex(), bool(allow_test_size), str(s.ren.suffix))


def kernel_name(s) -> str:
    """A short name for people: reduce or elementwise, and the kernel's loop sizes."""
    return ("r" if s.reduceop is not None else "E") + "_" + "_".join(str(n) for n in s.full_shape)


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


class BeamHook:
    """tinygrad's beam_search, answering from the seeded choices or with the heuristics (see the module)."""

    _installed: "BeamHook | None" = None

    def __init__(self, known: set[str]):
        self.known = set(known)           # KernelKey.text of every seeded choice
        self.seen: dict[str, str] | None = None   # while watching: key -> name, in compile order
        self.original = search_module().beam_search

    @classmethod
    def install(cls, known: set[str]) -> "BeamHook":
        """The process's hook (one: tinygrad's search function is the process's), of this class where it is
        the first."""
        hook = BeamHook._installed
        if hook is None:
            hook = BeamHook._installed = cls(known)
            search_module().beam_search = hook
        else:
            hook.known |= set(known)
        return hook

    def __call__(self, s, rawbufs, var_vals, amt, allow_test_size=True, disable_cache=False):
        key = key_of(s, amt, allow_test_size)
        if self.seen is not None:
            self.seen.setdefault(key.text, kernel_name(s))
        if key.text in self.known:
            return self.original(s, rawbufs, var_vals, amt, allow_test_size)   # found in the seeded cache
        self.unknown(key, s, rawbufs, var_vals)
        return heuristic(s)

    def unknown(self, key: KernelKey, s, rawbufs, var_vals) -> None:
        """A kernel met with no choice seeded (a run gives it the heuristics; the search records it)."""

    @contextmanager
    def watching(self):
        """The kernels the schedule search is asked for inside (key -> name); tinygrad asks once per
        kernel and process, so the caller clears tinygrad's program cache first where it needs all."""
        self.seen = {}
        try:
            yield self.seen
        finally:
            self.seen = None
