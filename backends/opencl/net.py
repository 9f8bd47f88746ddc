"""What the OpenCL backends share: a net as a list of layer operations on
device buffers, and the recording of each operation's named steps.

A backend builds one LayerOp per layer in prepare().  Each op knows how to
enqueue its work, how to fill its input buffer from a canonical host array
and how to read its output buffer back as a canonical host array; the
backend's own layouts (padding, NHWC, Morton) stay inside those two.
"""
from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager, nullcontext

import numpy as np
import pyopencl as cl

from nets import Layer, Net

from ..base import Launches, LayerTiming, PreparedNet, Step
from .runtime import Runtime


def event_ms(event) -> float:
    """A finished profiling event's device time in ms."""
    return (event.profile.end - event.profile.start) * 1e-6


class Recorder:
    """Collects the named steps of one layer while it is enqueued.

    kernel(): a kernel we launched; its own profiling event is its device time.
    library(): a library routine (CLBlast) that may launch several kernels and
    returns at most the last one's event.  It is bracketed by markers on the
    in-order queue; its time runs from the end of the marker before to the end
    of the marker after, i.e. from when the queue reached the call to when all
    of the routine's work was done (host-side gaps inside the routine count).
    """

    def __init__(self, queue, enabled: bool = True):
        self.queue = queue
        self.enabled = enabled
        self._pending: list[tuple[str, str, object, object]] = []
        # counted whether enabled or not (OpenCLNet.launches): replays of a recorded pass
        self.replays = 0
        self.replayed_kernels = 0

    def kernel(self, name: str, event) -> None:
        if self.enabled:
            self._pending.append((name, "event", event, None))

    def replay(self, name: str, kernels: int, event) -> None:
        """A recorded command buffer of `kernels` kernels enqueued (replay.py): one step."""
        self.replays += 1
        self.replayed_kernels += kernels
        self.kernel(name, event)

    @contextmanager
    def library(self, name: str):
        if not self.enabled:
            yield
            return
        before = cl.enqueue_marker(self.queue)
        yield
        after = cl.enqueue_marker(self.queue)
        self._pending.append((name, "markers", before, after))

    def steps(self) -> list[Step]:
        """Call after the queue has finished."""
        out = []
        for name, how, a, b in self._pending:
            ms = event_ms(a) if how == "event" else (b.profile.end - a.profile.end) * 1e-6
            out.append(Step(name, ms, how))
        return out


class LayerOp(ABC):
    """One layer of a net on the device."""

    def __init__(self, layer: Layer, index: int):
        self.layer = layer
        self.index = index

    @abstractmethod
    def enqueue(self, rec: Recorder) -> None:
        """Enqueue this layer's work; name every step through `rec`."""

    @abstractmethod
    def write_input(self, x: np.ndarray | list) -> None:
        """Fill this op's input buffer from a canonical host array (blocking); an
        op of a layer that reads several inputs takes a list, one array each."""

    @abstractmethod
    def read_output(self) -> np.ndarray:
        """This op's output buffer as a canonical host array (blocking)."""


class OpenCLNet(PreparedNet):
    """A PreparedNet made of LayerOps; subclasses fill self.ops in __init__."""

    def __init__(self, runtime: Runtime, net: Net, batch: int):
        super().__init__(net, batch)
        self.rt = runtime
        self.ops: list[LayerOp] = []
        self.buffers: list = []   # everything allocated, for memory_bytes and close()
        self.recorded = None      # the pass as a command buffer (record), which run() replays
        self.flat = None          # the pass as a flat list of launches (flatten), which run() enqueues

    # -- allocation helpers that keep count of device memory
    def alloc(self, nbytes: int, what: str, poison: bool = True):
        buf = self.rt.alloc(nbytes, what, poison)
        self.buffers.append(buf)
        return buf

    def upload(self, array: np.ndarray, what: str):
        buf = self.rt.upload(np.asarray(array, np.float32), what)
        self.buffers.append(buf)
        return buf

    def finish_prepare(self) -> None:
        """Call at the end of a subclass's __init__."""
        self.rt.finish()
        self.memory_bytes = sum(b.size for b in self.buffers)

    # -- the PreparedNet interface
    def load_input(self, x):
        self.ops[0].write_input(x)

    def pass_ops(self) -> list[LayerOp]:
        """The ops of a forward pass (run, run_timed), one per layer: self.ops,
        unless a backend fuses layers there (the layer-wise checks keep self.ops)."""
        return self.ops

    def enqueue_pass(self, rec: Recorder) -> None:
        """Enqueue a whole forward pass, no syncs (run; launches counts it)."""
        for op in self.pass_ops():
            op.enqueue(rec)

    def _whole_pass(self, rec: Recorder) -> None:
        """The pass as run() runs it: replayed where it was recorded (record), enqueued from its flat
        list where it was flattened (flatten; not while rt.bind_once is off, which benchmarks/launches.py
        sets to time the old way), else op by op."""
        if self.recorded is not None:
            rec.replay("whole pass (recorded command buffer)", self.recorded.kernels, self.recorded.enqueue())
        elif self.flat is not None and self.rt.bind_once:
            self.flat.enqueue(rec)
        else:
            self.enqueue_pass(rec)

    def run(self):
        # nobody reads a timed pass's events: a launch costs less without them; a command buffer replays on
        # the queue it was recorded for
        with self.rt.unprofiled() if self.recorded is None else nullcontext():
            self._whole_pass(Recorder(self.rt.queue, enabled=False))
            self.rt.finish()

    def _capture(self, target) -> None:
        """One pass's launches into `target` (a LaunchList or a CommandBuffer) instead of the queue.  Only
        for a net whose pass enqueues nothing but launch.py's Launches (the hand-written backends')."""
        with self.rt.recording_into(target):
            self.enqueue_pass(Recorder(self.rt.queue, enabled=False))

    def flatten(self) -> None:
        """From now on run() enqueues the pass from a flat list made here (passlist.py): every kernel's
        arguments set once, at prepare, and nothing else done per pass but the enqueues and the flushes
        of the queue measured fastest here (flushes.py)."""
        from .flushes import choose
        from .passlist import LaunchList
        flat = LaunchList(self.rt)
        self._capture(flat)
        with self.rt.unprofiled():   # measured on the queue run() enqueues on
            way, medians = choose(flat, Recorder(self.rt.queue, enabled=False))
        self.flat = flat
        self.config["pass"] = (f"enqueued from a flat list of {flat.kernels} launches made at prepare (each kernel's "
                               f"arguments set once there), its queue flushed: {way} (measured at prepare: "
                               + ", ".join(f"{name} {ms:.3f} ms" for name, ms in medians.items())
                               + " a pass); per-layer times and layer checks enqueue layer by layer")

    def record(self) -> None:
        """Record the pass once as a command buffer (replay.py), which run() replays from now on; per-layer
        times and the layer-wise checks still enqueue each layer's kernels one by one.  Unsupported
        where the device offers no command buffer."""
        from .replay import EXTENSION, CommandBuffer
        buf = CommandBuffer(self.rt.queue)
        try:
            self._capture(buf)
            buf.finalize()
        except BaseException:
            buf.release()
            raise
        self.recorded = buf
        self.config["pass"] = (f"recorded once as a command buffer of {buf.kernels} kernels ({EXTENSION}) and "
                               f"replayed whole; per-layer times and layer checks enqueue each layer's kernels alone")

    def replaying_twin(self) -> "OpenCLNet":
        """This prepared pass under a second handle that replays it recorded as a command buffer (record):
        the same kernels, buffers and measured choices, so the two modes differ only in how the pass is
        enqueued, and the prepare (a minute for a ResNet on PoCL) is done once.  Whichever of the two is
        closed last frees what they share."""
        twin = copy.copy(self)
        twin.config, twin.recorded = dict(self.config), None
        twin.record()
        self._holders = twin._holders = getattr(self, "_holders", None) or [1]
        self._holders[0] += 1
        twin.shared_prepare_ms = self.made_ms
        return twin

    @contextmanager
    def counting_routines(self):
        """Around a pass: yields a callable giving the library routine calls made so far (none here; a
        backend that calls a library counts them: backends/clblast/counting.py)."""
        yield lambda: 0

    def launches(self, x):
        """Counted as one pass on `x` enqueues: the kernels launched through launch.py's Launch (every
        kernel of ours goes through it), the replays the Recorder sees, the library's routine calls."""
        self.load_input(self.check_input(x))
        rec = Recorder(self.rt.queue, enabled=False)
        before = self.rt.kernel_launches
        with self.counting_routines() as routines:
            self._whole_pass(rec)
            self.rt.finish()
        alone, calls = self.rt.kernel_launches - before, routines()
        how = "kernels of ours a pass enqueues"
        if rec.replays:
            how = "enqueues: replays of the pass recorded as a command buffer; kernels: those recorded in it"
        if calls:
            how += "; CLBlast routine calls apart (the kernels each one enqueues are CLBlast's, not counted)"
        return Launches(kernels=alone + rec.replayed_kernels, enqueues=alone + calls + rec.replays,
                        routine_calls=calls, how=how)

    def fetch_output(self):
        return self.ops[-1].read_output()

    def run_timed(self):
        timings = []
        for op in self.pass_ops():
            rec = Recorder(self.rt.queue, enabled=self.rt.profiling_ok)
            t0 = time.perf_counter()
            op.enqueue(rec)
            self.rt.finish()
            wall = (time.perf_counter() - t0) * 1e3
            if self.rt.profiling_ok:
                steps = rec.steps()
                timings.append(LayerTiming(op.layer.name, wall, sum(s.ms for s in steps), steps))
            else:   # no device times on this driver: the layer's host clock only
                timings.append(LayerTiming(op.layer.name, wall, None, [Step(op.layer.kind, wall, "wall")]))
        return timings

    def run_layer(self, index, x):
        op = self.ops[index]
        if isinstance(x, (list, tuple)):   # a layer reading several inputs (an add)
            op.write_input(self.check_inputs(x, index))
        else:
            op.write_input(self.check_input(x, index))
        op.enqueue(Recorder(self.rt.queue, enabled=False))
        self.rt.finish()
        return op.read_output()

    def layer_outputs(self, x):
        self.load_input(self.check_input(x))
        outs = []
        for op in self.ops:
            op.enqueue(Recorder(self.rt.queue, enabled=False))
            self.rt.finish()
            outs.append(op.read_output())
        return outs

    def close(self):
        self.rt.finish()
        if self.recorded is not None:
            self.recorded.release()
            self.recorded = None
        self.flat = None
        holders, self._holders = getattr(self, "_holders", None), None
        if holders is not None:
            holders[0] -= 1
            if holders[0] > 0:   # its twin (replaying_twin) still runs on them
                self.buffers, self.ops = [], []
                return
        for buf in self.buffers:
            buf.release()
        self.buffers = []
        self.ops = []
