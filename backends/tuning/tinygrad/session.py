"""tinygrad's schedule search (BEAM) on one device: the child's side
(SearchSession: the device opened, the choices seeded, each kernel of a
net's pass found by compiling it, then searched with tinygrad's own
search, beam.py) and the parent's handle on it (LocalSearcher), which the
search loop (loop.py) drives, here or on a farm's worker (farm.py).

The child is told the time left, stops its search softly when it is
spent, and is stopped by force GRACE_S later if it does not answer.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import threading

from nets.errors import PassTimeout, Unsupported, UserError
from nets.weights import init_weights

from ...peers.tinygrad_choices import EVERY_WAY, WALK, ChoiceStore, Survey, net_key
from ...peers.tinygrad_device import Child, open_device, tinygrad_version
from ...store import DeviceId

GRACE_S = 30.0


class BudgetSpent(BaseException):
    """Raised in the child's main thread when its time is up (a BaseException: tinygrad's search
    catches Exception around each candidate, and must not swallow this)."""


def _budget_spent(signum, frame):
    raise BudgetSpent()


# -- in the child
class SearchSession:
    """The child's side: the device opened, the choices seeded, the schedule search recording the
    kernels it is asked for (beam.SearchHook)."""

    def __init__(self, target, store: ChoiceStore):
        from ...peers.tinygrad_beam import seed
        from .beam import SearchHook
        self.device = open_device(target)
        choices = store.load()
        seed(choices, self.device.tinygrad)
        self.hook = SearchHook.install(set(choices.kernels))
        self._seen: dict[str, str] = {}

    # what TinygradNet asks of its owner
    def compile_pass(self, prepared, net, batch, width):
        from tinygrad.codegen import to_program_cache
        to_program_cache.clear()   # tinygrad asks the search once per kernel and process: every kernel anew
        with self.hook.watching() as seen:
            prepared.capture()
        self._seen = dict(seen)
        return sum(1 for k in seen if k in self.hook.known), len(seen)

    def search_line(self, *args) -> str:
        return ""

    def searched_depth(self, *args) -> None:
        return None

    def survey(self, net, batch: int, width: int) -> Survey:
        """The distinct kernels of the net's pass at `width`, in compile order, the peer's walk's first, then
        those of tinygrad's ONNX recipe for it (the `searched-onnx` mode) the walk has not: (key, name, ms
        under the heuristics; None where known already or not timeable), and the ways it covered."""
        from ...peers.tinygrad_onnx import OnnxRecipe
        from ...peers.tinygrad_peer import TinygradNet
        weights = init_weights(net, 0)
        TinygradNet(net, weights, batch, self, width).close()
        seen = dict(self._seen)
        try:
            recipe = OnnxRecipe.for_net(net, weights, batch)
        except Unsupported:   # no ONNX of the net (Swin's windows), or no onnx package here: that mode says so
            recipe = None
        if recipe is not None:
            TinygradNet(net, weights, batch, self, width, recipe).close()
            seen.update((key, name) for key, name in self._seen.items() if key not in seen)
        # a net with no ONNX is covered; without the writer here the recipe is left to a machine that has it
        ways = EVERY_WAY if recipe is not None or importlib.util.find_spec("onnx") is not None else (WALK,)
        return Survey(net_key(net.name, batch), width,
                      [(key, name, self.hook.time_heuristic(key) if key in self.hook.pending else None)
                       for key, name in seen.items()], ways)

    def search(self, key: str, seconds: float):
        """tinygrad's search of pending kernel `key`: its Choice, or None when `seconds` ran out first."""
        from tinygrad.engine.worker import terminate_worker_pool
        main = threading.main_thread().ident
        previous = signal.signal(signal.SIGUSR1, _budget_spent)
        timer = threading.Timer(max(seconds, 0.0), signal.pthread_kill, (main, signal.SIGUSR1))
        timer.daemon = True
        timer.start()
        try:
            return self.hook.search(key, self.device.tinygrad)
        except BudgetSpent:
            terminate_worker_pool()   # its workers may still compile candidates of the abandoned search
            return None
        finally:
            timer.cancel()
            signal.signal(signal.SIGUSR1, previous)


# -- in the parent
def store_for(rt) -> ChoiceStore:
    return ChoiceStore(DeviceId.of(rt.info, tinygrad=tinygrad_version() or "none"))


def require() -> None:
    """A UserError where the tinygrad scope cannot run here."""
    from ...peers.tinygrad_peer import TinygradBackend
    why = TinygradBackend.unavailable_reason()
    if why:
        raise UserError(f"--scope tinygrad: {why}")


class LocalSearcher:
    """A SearchSession in a child on the OpenCL device `device` of this machine: what the tuning's search
    loop (loop.py) asks of a searcher, here; on a farm's worker the same runs there."""

    def __init__(self, device, store: ChoiceStore, name: str | None = None):
        self.name = name or f"{socket.gethostname()} pid {os.getpid()}"
        self.child = Child(device, "tinygrad search")
        try:
            self.session = self.child.worker.request("new", __name__, "SearchSession", (self.child.target, store))
        except BaseException:
            self.child.close()
            raise

    def _call(self, method: str, args: tuple, seconds: float):
        """The session's answer, or None when `seconds` ran out first (the child is then stopped by force)."""
        if seconds <= 0:
            return None
        try:
            return self.child.worker.request("call", self.session, method, args, False, timeout_s=seconds + GRACE_S)
        except PassTimeout:
            return None

    def survey(self, net, batch: int, width: int, seconds: float):
        return self._call("survey", (net, batch, width), seconds)

    def search(self, key: str, seconds: float):
        return self._call("search", (key, seconds), seconds)

    def stop(self) -> None:
        """Abandon the search at once (an interrupt): the child and its compilers are killed, and the
        request a search thread waits on returns."""
        self.child.worker.kill()

    def close(self) -> None:
        self.child.close()

