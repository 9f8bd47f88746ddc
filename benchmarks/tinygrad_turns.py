"""tinygrad's own recipe and our peer timed in turn (benchmarks/tinygrad_own.py --interleave).

On the H200's guest a process's speed at plain Python changes within seconds (reports/nvidia-h200/NOTES.md,
step 35: each CPU fast or slow by turns, 26 against 48 ms), so two sides timed one after the other can meet
different phases of the host.  Here every process is prepared first, each held open in its child, then the
samples go round: one of each process in turn, as `compare run --interleave` takes its backends, so a phase
falls on every side alike.  A sample is the same for both sides: the mean of passes back to back (as many as
compare/timing.py's rule gives for the side's warm-up pass), each pass one call and one synchronize, timed in
the child:
- `own`: tinygrad's recipe (its ONNX model in one TinyJit, the input on the device), a request a sample;
- `own-copies`: the same with the peer's copies around each timed call, untimed: the input copied into the
  JIT's input buffer before it, the output read after it (backends/peers/tinygrad_peer.py: whether they cost
  the next pass);
- `own-pruned`: the same recipe in a TinyJit with `prune=True` and a `Context(BEAM=...)` around each call, as the
  peer's is (step 47 of the H200 notes: the peer's ONNX mode 1.47x of own on LeNet-5, same recipe, same choices);
- `peer-timed`: our peer as `compare run` times it, `timed_passes` in one request (compute; compare/timing.py).
"""
from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

import backends
from backends.host import plain_python_ms
from backends.peers.tinygrad_device import Child
from backends.peers.tinygrad_onnx import OnnxRecipe
from compare.timing import passes_per_sample, sample

MODULE = __spec__.name if __spec__ else Path(__file__).stem   # how a child imports this file
WAYS = ("own", "own-copies", "own-pruned", "peer-timed")
_OPEN: dict = {}   # in own's child: the recipe held open between requests


# -- in own's child
def own_recipe(onnx_bytes: bytes, x: np.ndarray, device: str, width: int, prune: bool = False):
    """tinygrad's recipe on the ONNX model: its forward in one TinyJit, called twice (the first runs, the
    second captures), and the input on the device: (the JIT, the input)."""
    from tinygrad import Device, Tensor, TinyJit
    from tinygrad.helpers import Context
    jit = TinyJit(OnnxRecipe(onnx_bytes).forward, prune=prune)
    xt = Tensor(x, device=device).realize()
    with Context(BEAM=width):
        for _ in range(2):
            jit(xt)
        Device[device].synchronize()
    return jit, xt


def own_open(target, options, store, onnx_bytes: bytes, x: np.ndarray, width: int, way: str = "own") -> dict:
    """The recipe built and warmed in this child, set up as the peer's is (its device, the choices seeded):
    the fastest of three warm passes and this process's plain-Python figure.  `way`: `own`, `own-copies` (each
    pass between the peer's copies) or `own-pruned` (jitted and called as the peer's is)."""
    from tinygrad import Device

    from backends.peers.tinygrad_peer import TinygradInChild
    device = TinygradInChild(target, options, store).device.tinygrad
    pruned = way == "own-pruned"
    jit, xt = own_recipe(onnx_bytes, x, device, width, prune=pruned)
    _OPEN.update(jit=jit, xt=xt, sync=Device[device].synchronize, width=width, x=x, copies=way == "own-copies",
                 per_call=pruned)
    return {"warm_ms": min(own_sample(1) for _ in range(3)), "python_ms": plain_python_ms()}


def own_sample(n: int) -> float:
    """The mean of `n` passes back to back, each one call of the JIT and one synchronize (ms); with copies, the
    input copied in before each and the output read after it, as the peer's pass does, outside the time."""
    from tinygrad.helpers import Context

    from backends.peers.tinygrad_peer import copy_into, copy_out
    jit, xt, sync, width = _OPEN["jit"], _OPEN["xt"], _OPEN["sync"], _OPEN["width"]
    took = []
    with Context(BEAM=width):
        for _ in range(n):
            if _OPEN["copies"]:
                copy_into(xt, _OPEN["x"])
                sync()
            t0 = time.perf_counter()
            with Context(BEAM=width) if _OPEN["per_call"] else nullcontext():   # the peer's run() has one a call
                y = jit(xt)
            sync()
            took.append((time.perf_counter() - t0) * 1e3)
            if _OPEN["copies"]:
                copy_out(y)
    return statistics.fmean(took)


def own_output() -> np.ndarray:
    from tinygrad.helpers import Context
    with Context(BEAM=_OPEN["width"]):
        return _OPEN["jit"](_OPEN["xt"]).numpy()


# -- in the benchmark's process
class Own:
    """tinygrad's recipe open in a child of its own, screened as the peer's is (backends/screen.py)."""
    def __init__(self, device, options, store, onnx_bytes: bytes, x: np.ndarray, width: int, way: str = "own"):
        self.way = way
        self._child = Child(device, f"tinygrad ({self.way})", screen=True)
        try:
            got = self._child.worker.call(MODULE, "own_open", self._child.target, options, store, onnx_bytes, x, width,
                                          way)
        except BaseException:
            self._child.close()
            raise
        self.per_sample = passes_per_sample(got["warm_ms"])
        self.python_ms = got["python_ms"]

    def sample(self) -> float:
        return self._child.worker.call(MODULE, "own_sample", self.per_sample)

    def finish(self) -> np.ndarray:
        """The output of one more pass, and the child stopped."""
        try:
            return self._child.worker.call(MODULE, "own_output")
        finally:
            self._child.close()


class PeerTimed:
    """Our peer prepared as `compare run` prepares it (its child, screened), sampled as `compare run` samples."""
    way = "peer-timed"

    def __init__(self, net, weights, x: np.ndarray, mode: str, settle=lambda prepared: None):
        """`settle(prepared)`: what to do in the child before its warm passes (the benchmark's -freed and -gc
        ways)."""
        self._backend = backends.get("tinygrad")
        self._x = x
        try:
            self._prepared = self._backend.prepare(net, weights, x.shape[0], mode)
            settle(self._prepared)
            warm = [self._prepared.timed_pass(x)[0]["compute"] for _ in range(3)]
        except BaseException:
            self._backend.close()
            raise
        self.per_sample = passes_per_sample(min(warm))
        self.python_ms = (self._prepared.config or {}).get("plain_python_ms", float("nan"))
        self._y = None

    def sample(self) -> float:
        phases, outputs = sample(self._prepared, self._x, self.per_sample)
        self._y = outputs[-1]
        return phases["compute"]

    def finish(self) -> np.ndarray:
        try:
            return self._y if self._y is not None else self._prepared.timed_pass(self._x)[1]
        finally:
            self._prepared.close()
            self._backend.close()


def in_turn(players: list, repeats: int, gap_s: float = 0.0) -> list[list[float]]:
    """`repeats` rounds, one sample of each player a round, `gap_s` of sleep after each round: each player's
    samples (ms).  The gap stands for the other backends of a `compare run --backends all` round (13 of them
    on the H200 took about a tenth of a second between two samples of one): whether a side whose process
    waits that long between samples comes back slower (steps 36-37 of the H200 notes: the peer's LeNet-5 at
    0.71 ms in the run, 0.45 timed in turn with own and nothing else)."""
    took: list[list[float]] = [[] for _ in players]
    for _ in range(repeats):
        for player, mine in zip(players, took):
            mine.append(player.sample())
        if gap_s > 0:
            time.sleep(gap_s)
    return took
