"""`tinygrad`: the peer that runs on the same OpenCL device, a compiler that
generates OpenCL kernels and searches their schedules (BEAM).

The net is built from our graph and weights with tinygrad's tensor
operations (tinygrad_layers.py); a pass walks the graph (graph_walk.py).
It runs in a child process whose OpenCL loader lists the run's device's
platform alone, checked there by the device's handle and name
(tinygrad_device.py); where that cannot be arranged it says UNSUPPORTED in
one line.

Modes:
- `untuned`: BEAM=0, tinygrad's hand-coded heuristics for every kernel.
- `searched`: BEAM=2, each kernel's schedule as `compare tune --scope
  tinygrad` searched it on this device (backends/tuning/tinygrad/); a kernel not
  searched yet runs on the heuristics, and nothing is searched at run time.
  The depth (kernels searched of the pass's) is in the result.  No kernel
  searched: UNSUPPORTED, naming the command that searches.
- `searched-wN`: the same at another width N, where choices at N exist.
- `searched-onnx`: the searched schedules through tinygrad's own recipe for a
  model (tinygrad_onnx.py): the net written as ONNX, run by tinygrad's
  OnnxRunner in one TinyJit.  Timed beside `searched` in the same run, so
  the peer is held to tinygrad's best way of running a model of either.

Timing: the whole pass is one TinyJit, compiled and captured at prepare
(one pass) and replayed by run() (OpenCL has no graph replay in tinygrad: one enqueue
per kernel), which returns after the device's queue finished; the input is
a plain copy into the JIT's input buffer, the output a plain copy out.
Kernels that read only weights are pruned out of the replay (run once at
prepare, as every backend lays its weights out at prepare).  Per layer:
each layer alone as its own replayed TinyJit, wall clock only (tinygrad
keeps no per-kernel events in a replay), so its kernels are those of the
layer alone, not the fused ones of the whole pass.
"""
from __future__ import annotations

import time

import numpy as np

from nets import Feature, LayerKind, Net
from nets.errors import Unsupported, UserError

from ..base import Backend, Family, LayerTiming, Launches, PreparedNet, Step, layer_params
from ..isolated import IsolatedBackend
from .graph_walk import GraphWalk
from ..store import DeviceId
from .tinygrad_choices import DEFAULT_WIDTH, ChoiceStore, net_key
from .tinygrad_device import Child, OpenedDevice, open_device, tinygrad_version
from .tinygrad_onnx import OnnxRecipe

UNTUNED, SEARCHED = "untuned", "searched"
ONNX = SEARCHED + "-onnx"   # the searched schedules, the net as tinygrad runs an ONNX model (tinygrad_onnx.py)
KINDS = frozenset(LayerKind)       # every kind the reference runs
FEATURES = frozenset(Feature)
TIMING = ("whole pass: one replayed TinyJit, synchronised; per layer: each layer alone as a replayed TinyJit, "
          "wall clock only; its kernels are not the pass's fused ones and run on tinygrad's heuristics where "
          "the search never met them (the per-layer table is heuristic, the whole pass searched)")


def width_of(mode: str | None) -> int:
    """BEAM of a mode: 0 untuned, DEFAULT_WIDTH searched, N searched-wN."""
    mode = mode or UNTUNED
    if mode == UNTUNED:
        return 0
    if mode in (SEARCHED, ONNX):
        return DEFAULT_WIDTH
    if mode.startswith(SEARCHED + "-w") and mode[len(SEARCHED) + 2:].isdigit() and int(mode[len(SEARCHED) + 2:]) > 0:
        return int(mode[len(SEARCHED) + 2:])
    raise UserError(f"unknown mode {mode!r} of the tinygrad backend; it has {UNTUNED}, {SEARCHED} "
                    f"(BEAM={DEFAULT_WIDTH}), {ONNX} (the same as an ONNX model) and {SEARCHED}-wN (BEAM=N)")


def mode_of(width: int) -> str:
    return UNTUNED if width == 0 else SEARCHED if width == DEFAULT_WIDTH else f"{SEARCHED}-w{width}"


# The pass's copies go straight to the device's allocator (clEnqueueWriteBuffer, clEnqueueReadBuffer on OpenCL):
# through tinygrad's public path (Buffer.copy_from, Tensor.numpy: its engine run for each copy) they slowed the
# JIT call after them on the H200 as much as the peer trailed tinygrad's own recipe, which copies nothing (LeNet-5:
# own 0.573 ms, own between those copies 0.694, the peer 0.701; its notes' step 41).
def _whole_buffer(tensor):
    """The device buffer `tensor` is, whole and in order (only reshapes above it), where its allocator copies
    to and from the host itself; else None."""
    u = tensor.uop
    while u is not u.base and u.op.name == "RESHAPE":
        u = u.src[0]
    if u is not u.base or u.op.name != "BUFFER":
        return None
    buf = u.buffer
    if buf.size != int(np.prod(tensor.shape)) or buf.dtype.fmt != "f" or getattr(buf, "_base", None) is not None:
        return None
    allocator = buf.ensure_allocated().allocator
    return buf if hasattr(allocator, "_copyin") and hasattr(allocator, "_copyout") else None


def copy_into(tensor, x: np.ndarray) -> None:
    """`x` copied into the realized float32 `tensor`'s buffer (a JIT's input), enqueued: a plain copy, no kernel."""
    x = np.ascontiguousarray(x, np.float32)
    buf = _whole_buffer(tensor)
    if buf is not None:
        buf.allocator._copyin(buf._buf, memoryview(x).cast("B"))
        return
    from tinygrad.device import Buffer
    from tinygrad.dtype import dtypes
    tensor.uop.base.buffer.copy_from(Buffer("PYTHON", x.size, dtypes.float32, opaque=memoryview(x).cast("B")))


def copy_out(tensor) -> np.ndarray:
    """The realized float32 `tensor` (a JIT's output) read into a new array, the device synchronized."""
    buf = _whole_buffer(tensor)
    if buf is None:
        return tensor.numpy()
    out = np.empty(tensor.shape, np.float32)
    buf.allocator._copyout(memoryview(out).cast("B"), buf._buf)
    return out


class TinygradNet(PreparedNet):
    """In the child: the net on tinygrad's device, its pass captured in a TinyJit."""

    def __init__(self, net: Net, weights, batch: int, owner: "TinygradInChild", width: int, recipe=None):
        """`recipe`: the pass another way than our graph walk (tinygrad_onnx.OnnxRecipe), its layers still ours."""
        super().__init__(net, batch)
        self.recipe = recipe
        from tinygrad import Tensor, TinyJit
        from tinygrad.helpers import Context
        self._Tensor, self._Context = Tensor, Context
        self.width, self._dev = width, owner.device.tinygrad
        self._walk = GraphWalk(net)
        with self._context():
            built = [_layer(Tensor, layer, layer_params(net, weights, i), self._dev, net.in_shape(i))
                     for i, layer in enumerate(net.layers)]
            self._fns = [f for f, _ in built]
            self._x = Tensor(np.zeros((batch,) + tuple(net.input_shape), np.float32), device=self._dev).realize()
            self._jit = TinyJit(self._forward, prune=True)
            searched, total = owner.compile_pass(self, net, batch, width)
        self._layer_jits = None
        self._y = None
        self.memory_bytes = sum(n for _, n in built) + self._x.nbytes()
        self.config = {"mode": mode_of(width), "beam": width, "device": self._dev,
                       "tinygrad_kernels": {"width": width, "searched": searched, "total": total,
                                            "searched_mode": owner.searched_depth(net, batch) if width == 0 else None},
                       "tinygrad_search": owner.search_line(net, batch, width, searched, total),
                       "jit": "TinyJit of the whole pass (prune=True: kernels of the weights alone run at prepare)",
                       "timing": TIMING}
        if recipe is not None:
            # the answer names the recipe beside the depth: "`tinygrad` (1.0 ms, searched 17/17, as an ONNX model)"
            self.config.update({"mode": ONNX, "mode_label": f"{ONNX}, as an ONNX model", **recipe.config})

    def _context(self):
        return self._Context(BEAM=self.width)

    def _forward(self, x):
        if self.recipe is not None:
            return self.recipe.forward(x)
        fns = self._fns
        return self._walk.run(x, lambda i, xs: fns[i](xs))[-1]

    def capture(self) -> None:
        """The JIT's capture, which compiles every kernel (with the schedule search's choices) and runs
        the pass once.  Straight to it: the weights and the input are realized already, so the eager
        first call a JIT makes for work to be done once has none (on PoCL it would cost a pass more).  tinygrad's
        ONNX runner has some: it reads its shape inputs (Reshape's, Slice's) as Python values on its first call,
        which a capture cannot, so the recipe's eager call is made."""
        if self.recipe is not None:
            self._jit(self._x)
        self._jit.cnt = 1
        self._y = self._jit(self._x)
        self._sync()

    def _sync(self) -> None:
        from tinygrad import Device
        Device[self._dev].synchronize()

    # -- the PreparedNet interface
    def load_input(self, x):
        """A plain copy into the JIT's input buffer, finished before it returns."""
        copy_into(self._x, x)
        self._sync()

    def run(self):
        with self._context():
            self._y = self._jit(self._x)
        self._sync()

    def fetch_output(self):
        return copy_out(self._y)

    def launches(self, x):
        """The kernels a replay of the TinyJit enqueues: tinygrad's own OpenCL binding's
        clEnqueueNDRangeKernel wrapped for one untimed pass (None on a device of tinygrad's not OpenCL)."""
        if not str(self._dev).upper().startswith("CL"):
            return None
        from tinygrad.runtime.autogen import opencl
        self.load_input(self.check_input(x))
        real, count = opencl.clEnqueueNDRangeKernel, [0]

        def counted(*args):
            count[0] += 1
            return real(*args)
        opencl.clEnqueueNDRangeKernel = counted
        try:
            self.run()
        finally:
            opencl.clEnqueueNDRangeKernel = real
        return Launches(count[0], count[0], how="kernels a replay of tinygrad's TinyJit enqueues (clEnqueueNDRangeKernel "
                                                 "calls of its OpenCL runtime in one pass)")

    def _layer_jit(self, i: int):
        """Layer i alone as a TinyJit of its distinct inputs (a JIT takes each buffer once)."""
        from tinygrad import TinyJit
        fn, sources = self._fns[i], self._walk.sources[i]
        slots = list(dict.fromkeys(sources))
        return TinyJit(lambda *ins: fn([ins[slots.index(s)] for s in sources])), slots

    def run_timed(self):
        """Each layer's replayed JIT, synchronised after each; the first call of this also compiles and
        captures every layer's JIT (untimed warm-up calls: the runner's first per-layer pass is untimed)."""
        first = self._layer_jits is None
        if first:
            self._layer_jits = [self._layer_jit(i) for i in range(len(self.net.layers))]
        self._sync()
        timings = []

        def timed(i, xs):
            jit, slots = self._layer_jits[i]
            ins = [xs[self._walk.sources[i].index(s)] for s in slots]
            if first:
                for _ in range(2):
                    jit(*ins)
                self._sync()
            t0 = time.perf_counter()
            y = jit(*ins)
            self._sync()
            wall = (time.perf_counter() - t0) * 1e3
            layer = self.net.layers[i]
            timings.append(LayerTiming(layer.name, wall, None, [Step(layer.kind, wall, "wall")]))
            return y

        with self._context():
            self._y = self._walk.run(self._x, timed)[-1]
        return timings

    def _tensor(self, x: np.ndarray, index: int, which: int = 0):
        return self._Tensor(self.check_input(x, index, which), device=self._dev)

    def run_layer(self, index, x):
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        with self._context():
            return self._fns[index]([self._tensor(a, index, k) for k, a in enumerate(xs)]).numpy()

    def layer_outputs(self, x):
        fns = self._fns
        with self._context():
            outs = self._walk.run(self._tensor(x, 0), lambda i, xs: fns[i](xs), keep=True)
            self._Tensor.realize(*outs)
            return [y.numpy() for y in outs]

    def close(self):
        self._fns = self._jit = self._layer_jits = self._x = self._y = self.recipe = None


def _layer(Tensor, layer, params, device, in_shape):
    from .tinygrad_layers import layer_fn
    return layer_fn(Tensor, layer, params, device, in_shape)


class TinygradInChild(Backend):
    """The backend inside its child: the device opened, the choices seeded into tinygrad's cache."""

    name = "tinygrad"
    supported_kinds = KINDS
    supported_features = FEATURES
    deterministic = False

    def __init__(self, target, options, store: ChoiceStore):
        super().__init__(options)
        from .tinygrad_beam import BeamHook, seed
        self.device: OpenedDevice = open_device(target)
        self.store = store
        self.choices = store.load()
        seed(self.choices, self.device.tinygrad)
        self.hook = BeamHook.install(set(self.choices.kernels))
        self._depths: dict[tuple, tuple[int, int]] = {}

    def info(self):
        return {"device": self.device.name, "platform": self.device.platform, "driver": self.device.driver,
                "kind": "opencl", "tinygrad_device": self.device.tinygrad,
                "versions": {"tinygrad": tinygrad_version()}, "choices": str(self.store.path)}

    def modes(self):
        """untuned, a searched mode for each width `compare tune` searched kernels at on this device, and at the
        default width the same schedules through tinygrad's ONNX recipe."""
        widths = sorted(self.choices.widths(), key=lambda w: w != DEFAULT_WIDTH)
        return [UNTUNED] + [mode_of(w) for w in widths] + ([ONNX] if DEFAULT_WIDTH in widths else [])

    def compile_pass(self, prepared: TinygradNet, net: Net, batch: int, width: int) -> tuple[int, int]:
        """Compile and capture the pass; with a width, (kernels given a searched schedule, distinct kernels)
        as the schedule search was asked for them, else (0, 0).  tinygrad asks once per kernel and
        process, so a net met the first time is compiled from a cleared program cache."""
        if width == 0:
            prepared.capture()
            return 0, 0
        known = self.choices.depth(net_key(net.name, batch), width)
        if width not in self.choices.widths() or (known is not None and known[0] == 0):
            self._refuse(net, batch, width, known[1] if known else None)
        memo = (repr(net), batch, width, prepared.recipe is not None)   # the ONNX recipe compiles its own kernels
        if memo in self._depths:
            prepared.capture()
        else:
            from tinygrad.codegen import to_program_cache
            to_program_cache.clear()
            with self.hook.watching() as seen:
                prepared.capture()
            self._depths[memo] = (sum(1 for k in seen if k in self.hook.known), len(seen))
        searched, total = self._depths[memo]
        if searched == 0:
            self._refuse(net, batch, width, total)
        return searched, total

    @staticmethod
    def _refuse(net: Net, batch: int, width: int, total: int | None):
        raise Unsupported(f"no kernel of {net.name} at batch {batch} was searched at width {width} on this device"
                          f"{'' if total is None else f' ({total} kernels)'}: `compare tune --scope tinygrad --net "
                          f"{net.name}{'' if batch == net.default_batch else f' --batch {batch}'}"
                          f"{'' if width == DEFAULT_WIDTH else f' --beam-width {width}'}` searches them")

    def searched_depth(self, net: Net, batch: int) -> dict | None:
        """The searched mode's depth on `net` as the last survey of `compare tune` found it; None before one."""
        found = self.choices.depth(net_key(net.name, batch), DEFAULT_WIDTH)
        return None if found is None else {"width": DEFAULT_WIDTH, "searched": found[0], "total": found[1]}

    def search_line(self, net: Net, batch: int, width: int, searched: int, total: int) -> str:
        """One line for the reports: the width, kernels searched of the pass's, where the choices come from."""
        where = f"choices of `compare tune --scope tinygrad` in {self.store.path}"
        if width == 0:
            return (f"untuned: BEAM=0, tinygrad's hand-coded heuristics; searched mode: "
                    f"{self.choices.depth_words(net_key(net.name, batch), DEFAULT_WIDTH)} ({where})")
        rest = "" if searched == total else f"; {total - searched} on tinygrad's heuristics, searched at no run"
        return (f"searched: BEAM={width}, {searched} of {total} distinct kernels of the pass searched{rest} "
                f"({where}; {len(self.choices.kernels)} choices there, tinygrad {tinygrad_version()})")

    def prepare(self, net, weights, batch, mode=None):
        recipe = OnnxRecipe.for_net(net, weights, batch) if mode == ONNX else None
        return TinygradNet(net, weights, batch, self, width_of(mode), recipe)


class TinygradBackend(IsolatedBackend):
    name = "tinygrad"
    family = Family.COMPILER
    summary = ("peer: tinygrad on the same OpenCL device, its kernels generated and their schedules "
               "searched (BEAM) by `compare tune --scope tinygrad`")
    uses_opencl = True
    deterministic = False   # the per-layer JITs compile other kernels than the whole pass's fused ones
    supported_kinds = KINDS
    supported_features = FEATURES

    def __init__(self, runtime=None, options=None):
        super().__init__(runtime, options)
        self._children: list[Child] = []

    @classmethod
    def unavailable_reason(cls):
        if tinygrad_version() is None:
            return "tinygrad is not installed (pip install 'clblast-compare[tinygrad]')"
        return None

    def store(self) -> ChoiceStore:
        return ChoiceStore(DeviceId.of(self.runtime.info, tinygrad=tinygrad_version()))

    def _spawn(self, what: str):
        child = Child(self.runtime.device, what, screen=True)
        self._children.append(child)
        try:
            handle = child.worker.request("new", __name__, "TinygradInChild", (child.target, self.options, self.store()))
        except BaseException:
            child.close()
            raise
        return child.worker, handle

    def close(self) -> None:
        super().close()
        for child in self._children:
            child.close()
        self._children = []
