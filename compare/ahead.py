"""Prepares started ahead: the backends whose modes each prepare in a child process of their own (the
CLBlast ones) have their children started and sent the net as a run begins (IsolatedBackend.prepare_ahead),
so they compile side by side while the runner computes the oracle and prepares the backends of its own
process, which it opens first.  No pass is timed until every one has answered (`settle`).

What the runner times meanwhile shares the host with the compiles: the peak (on profiling events) and our
own backends' prepare-time choices (on the host's clock, the least of rounds in turn).  So prepares run
ahead only on a device apart from the host's cores (not a CPU device, not a driver without profiling times),
and at most half the host's cores compile at once, first processes first."""
from __future__ import annotations

import os

from nets.errors import Unsupported, raise_if_interrupted


def apart_from_host(runtime) -> bool:
    """Whether the device works apart from the host's cores, so host work can run beside what it times: not a CPU
    device, and a driver whose profiling times mean something (what it times is then on the device's clock)."""
    return runtime is not None and runtime.profiling_ok and "CPU" not in runtime.info["type"]


class Ahead:
    """The backends whose prepares run ahead (name -> backend), until the runner opens them."""

    def __init__(self):
        self.backends: dict = {}
        self._settled = False   # every prepare started ahead has answered

    def __contains__(self, name: str) -> bool:
        return name in self.backends

    def start(self, plan, runtime, made: dict, modes: dict) -> None:
        """Every mode of every backend `made` (name -> backend, `modes` name -> its modes) that can prepare
        ahead, but a mode with a floor (it may be skipped as one that cannot win: its compile would be
        wasted); with draws, each drawn process of a mode too (the runner's draws take them through
        prepare_fresh).  Every run checks or times, so each mode started is asked for."""
        if runtime is not None and not apart_from_host(runtime):
            return
        wanted = {}
        for name, backend in made.items():   # a test double need not be a Backend: getattr
            if not getattr(backend, "prepares_ahead", False) or not modes.get(name):
                continue
            try:
                floored = [mode for mode in modes[name] if self._has_floor(backend, plan, mode)]
            except Exception:  # noqa: BLE001 - the backend fails when it opens, as it would have
                raise_if_interrupted()
                continue
            started = [mode for mode in modes[name] if mode not in floored]
            if floored and hasattr(backend, "floors_ahead"):   # measured meanwhile, taken when the backend opens
                backend.floors_ahead(plan.net, plan.batch, floored)
            copies = plan.draws if plan.times and getattr(backend, "redrawable", False) else 1
            wanted[name] = [(copy, mode) for copy in range(copies) for mode in started]
        budget = max(2, (os.cpu_count() or 2) // 2)   # each child compiles on one core
        order = sorted((copy, i, j, name, mode) for i, (name, started) in enumerate(wanted.items())
                       for j, (copy, mode) in enumerate(started))[:budget]
        try:
            for name in wanted:
                chosen = [mode for *_, n, mode in order if n == name]
                if not chosen:
                    continue
                backend = self.backends[name] = made[name]   # first: an interrupt then stops what it started
                try:
                    if not backend.prepare_ahead(plan.net, plan.weights, plan.batch, chosen):
                        del self.backends[name]
                except Exception:  # noqa: BLE001 - then each mode prepares in turn, and fails there if it must
                    raise_if_interrupted()
                    self.backends.pop(name).drop_ahead()
        except BaseException:
            self.drop()
            raise

    @staticmethod
    def _has_floor(backend, plan, mode) -> bool:
        """Told without measuring the floor (Backend.has_floor): a test double may offer mode_floor alone."""
        try:
            if hasattr(backend, "has_floor"):
                return backend.has_floor(plan.net, plan.batch, mode)
            return backend.mode_floor(plan.net, plan.batch, mode) is not None
        except Unsupported:
            return True   # not started ahead: said when the backend opens

    def settle(self, progress) -> None:
        """Every prepare started ahead answered (kept for `prepare`); `progress` told once that it waits."""
        if self._settled or not self.backends:
            return
        progress(f"waiting for the prepares started ahead ({', '.join(self.backends)}) to answer")
        for backend in self.backends.values():
            backend.settle_ahead()
        self._settled = True   # none is started after the first: settled once, settled for good

    def opened(self, name: str) -> None:
        """`name` opened: what it started ahead and never asked for (it failed first), stopped."""
        if name in self.backends:
            self.backends.pop(name).drop_ahead()

    def drop(self) -> None:
        """Every prepare started ahead that no one took, stopped (an interrupt, the end of the run)."""
        while self.backends:
            self.backends.popitem()[1].drop_ahead()

    def open_order(self, names: list[str]) -> list[int]:
        """The indices of `names` in the order to open them: the backends whose prepares run ahead last, so
        their children compile while the others are prepared; the rest as they come."""
        return sorted(range(len(names)), key=lambda i: names[i] in self.backends)
