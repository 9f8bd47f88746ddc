"""What one `compare tune` asks (Request), what the harness lends the
searches (Harness: the float64 oracle's check and the cache writer live
above this layer), and what comes back (Summary)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .address import Address


@dataclass(frozen=True)
class Harness:
    """What the searches borrow from the harness: `checker_for(one_layer_net, weights, x)` gives a test of a
    candidate's output against the float64 oracle; `store_cache(kind, device_info, value, what, merge=None)`
    writes a device's entry of a cache file (`merge(entry there, value)` under the file's lock, where given)
    and returns where it went (compare/keep.py's Kept);
    `check_writable(path, what)` refuses in one line, before any work, a file that could not be written."""

    checker_for: Callable
    store_cache: Callable
    check_writable: Callable


@dataclass
class Request:
    """One `compare tune`: the nets whose work is searched, the scopes, the budget, where it runs."""

    nets: list                          # nets.Net
    scopes: list[str] | None            # None: the default (scopes.DEFAULT)
    budget_s: float = 900.0
    batch: int | None = None            # instead of each net's own
    device: str | None = None           # --device: the device here
    jobs: int | None = None             # CLBlast's children side by side (per device on a farm); None: the default
    scheduler: Address | None = None    # a Dask scheduler: search on its workers of the device's kind
    every_kind: bool = False            # --devices all: each kind among the workers, into its own store
    width: int = 2                      # tinygrad's search width (BEAM)
    as_tuner: list[str] | None = None   # CLBlast: these layers' im2col GEMMs as its xgemm tuner runs them
    routines: list[str] | None = None   # CLBlast: only these routines' problems
    verify_only: bool = False           # CLBlast: re-time what was found, search nothing
    harness: Harness | None = None
    progress: Callable[[str], None] = lambda text: None
    tiled: list = field(default_factory=list)       # the nets vectorised-tiled runs (the tiles scope's check sets it)
    unwritten: list[str] = field(default_factory=list)   # files kept elsewhere than asked, each in one line
    _rt: object = None

    def runtime(self):
        """The device here (--device), opened once."""
        if self._rt is None:
            from ..opencl.runtime import get_runtime
            self._rt = get_runtime(self.device)
        return self._rt

    def batch_of(self, net) -> int:
        return self.batch or net.default_batch


@dataclass
class Summary:
    """What a tune did, in lines for people, and the files that could not be written where asked (each in one
    line: the CLI says them last and exits 2)."""

    lines: list[str] = field(default_factory=list)
    unwritten: list[str] = field(default_factory=list)
