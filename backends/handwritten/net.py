"""What `baseline` and `vectorised` share: a net as one kernel launch per
layer over buffers laid out by layout.py, and the Backend shell.

Each backend subclass of HandwrittenNet says which layout its buffers use
and builds one KernelOp per layer (compile with -D constants, upload the
layer's reordered parameters, fix the launch shape).  Buffers are made here:
buffer 0 is the net's input and buffer i+1 layer i's output, so layer i
writes straight into the buffer (and the padding) its readers read, and
reads the buffers of the layers it names (net.sources(i); in a chain, buffer i).

The net's input and output are held on the device in the canonical layout
too, in staging buffers, so that load_input and fetch_output are plain
copies as in every other backend and the conversions to and from the
buffers' layouts (kernels/layout.cl) are compute: the first layer's op
converts the input before its kernel, the last layer's converts the output
after its own, each a named step (InputEdge, OutputEdge).  Where a layout
already is canonical, the staging buffer is that activation buffer and no
conversion runs.
"""
from __future__ import annotations

import time
import weakref

import numpy as np
import pyopencl as cl

from nets.errors import Unsupported

from ..base import Family, layer_params
from ..opencl.backend import OpenCLBackend
from ..opencl.launch import Launch
from ..opencl.net import LayerOp, OpenCLNet, Recorder
from . import branches
from .layout import Layout, net_layouts

LAYOUT_SOURCE = "layout.cl"
CONVERT_GROUP = (64,)   # work-items per group of a conversion kernel, shrunk to the device's limits

class KernelOp(LayerOp):
    """One layer = one kernel launch.  Host arrays in and out are canonical,
    converted here on the host (layer-wise checks); a forward pass converts
    on the device instead, at the net's edges (InputEdge, OutputEdge)."""

    def __init__(self, net: "HandwrittenNet", index: int, launch: Launch, args, step: str):
        super().__init__(net.net.layers[index], index)
        self.rt = net.rt
        buffers = [s + 1 for s in net.net.sources(index)]   # the layers it reads (-1, the input: buffer 0)
        self.in_layouts: list[Layout] = [net.layouts[b] for b in buffers]
        self.in_bufs = [net.activations[b] for b in buffers]
        self.in_layout, self.in_buf = self.in_layouts[0], self.in_bufs[0]
        self.out_layout: Layout = net.layouts[index + 1]
        self.out_buf = net.activations[index + 1]
        self.launch = launch
        self.args = tuple(self.in_bufs) + tuple(args) + (self.out_buf,)
        self.step = step

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))

    def write_input(self, x):
        """x: one canonical array, or a list of them (an add) in the order of its inputs."""
        xs = x if isinstance(x, (list, tuple)) else [x]
        for buf, layout, a in zip(self.in_bufs, self.in_layouts, xs):
            self.rt.write(buf, layout.pack(a))

    def read_output(self):
        return self.out_layout.unpack(self.rt.read(self.out_buf, self.out_layout.stored_shape))

    def describe(self) -> dict:
        return {"kernel": self.step, **self.launch.describe(), "output": self.out_layout.describe()}

class Convert:
    """One conversion between a canonical staging buffer and a stored
    activation buffer (kernels/layout.cl `pack` or `unpack`)."""

    def __init__(self, rt, kernel: str, layout: Layout, src, dst, step: str):
        count = int(np.prod(layout.canonical_shape))
        self.launch = Launch(rt, LAYOUT_SOURCE, kernel, layout.kernel_defines(), (count,), CONVERT_GROUP)
        self.args = (src, dst)
        self.step = step

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))

    def describe(self) -> str:
        shape = self.launch.describe()
        return (f"'{self.step}' on the device (kernels/{LAYOUT_SOURCE} {self.launch.name}, "
                f"global {shape['global']}, local {shape['local']})")

class EdgeOp(LayerOp):
    """The first or last layer's op, its conversion added; the rest is the op's."""

    def __init__(self, op: LayerOp, rt, stage, shape: tuple, convert: Convert | None):
        super().__init__(op.layer, op.index)
        self.op, self.rt, self.stage, self.shape, self.convert = op, rt, stage, shape, convert

    def enqueue(self, rec):
        self.op.enqueue(rec)

    def write_input(self, x):
        self.op.write_input(x)

    def read_output(self):
        return self.op.read_output()

    def describe(self) -> dict:
        return self.op.describe()

def bare(op):
    """The op inside the edges' wrappers (a one-layer net's op has two)."""
    while isinstance(op, EdgeOp):
        op = op.op
    return op

class InputEdge(EdgeOp):
    """The first layer, fed from the canonical input staging buffer."""

    def enqueue(self, rec):
        if self.convert is not None:
            self.convert.enqueue(rec)
        self.op.enqueue(rec)

    def write_input(self, x):
        # a plain copy, waited for: the upload holds no conversion
        if isinstance(x, (list, tuple)):   # the first layer reads only the net's input, however often it names it
            x = x[0]
        x = np.ascontiguousarray(x, np.float32).reshape(self.shape)
        cl.enqueue_copy(self.rt.queue, self.stage, x, is_blocking=True)

class OutputEdge(EdgeOp):
    """The last layer, leaving its output in the canonical output staging buffer; or, given `stored` (a
    padded vector: Layout.padded_vector), in its own buffer, whose padding channels the host drops as it reads."""

    def __init__(self, op: LayerOp, rt, stage, shape: tuple, convert: Convert | None, stored: tuple | None = None):
        super().__init__(op, rt, stage, shape, convert)
        self.stored = stored

    def enqueue(self, rec):
        self.op.enqueue(rec)
        if self.convert is not None:
            self.convert.enqueue(rec)

    def read_output(self):
        if self.stored is None:
            return self.rt.read(self.stage, self.shape)   # a plain, blocking copy
        y = self.rt.read(self.stage, self.stored).reshape(self.shape[0], -1)
        return np.ascontiguousarray(y[:, :self.shape[1]]).reshape(self.shape)


class Folded(LayerOp):
    """A layer whose work the next layer's kernel does (a depthwise conv or a layernorm into the 1x1 after
    it, a pool into the dense): nothing to enqueue but, as the net's first layer, the input's conversion."""

    def __init__(self, op: LayerOp):
        super().__init__(op.layer, op.index)
        self.first_op = op
        self.convert = op.convert if isinstance(op, InputEdge) else None

    def enqueue(self, rec):
        if self.convert is not None:
            self.convert.enqueue(rec)

    def write_input(self, x):
        self.first_op.write_input(x)

    def read_output(self):
        return self.first_op.read_output()


class HandwrittenNet(OpenCLNet):
    """Subclasses set `order` and `channel_multiple` and implement make_op()."""

    order = "nchw"
    channel_multiple = 1

    def __init__(self, runtime, net, weights, batch: int):
        super().__init__(runtime, net, batch)
        try:
            self.layouts = net_layouts(net, batch, self.order, self.channel_multiple)
            # an input a concatenation takes in place: its layout a view of the concatenation's buffer
            self.placed = self.concat_views()
            self.activations = [None if i - 1 in self.placed else self._activation_buffer(i, lay)
                                for i, lay in enumerate(self.layouts)]
            for s_, (j, _) in self.placed.items():
                self.activations[s_ + 1] = self.activations[j + 1]
            layers = {}
            for i, layer in enumerate(net.layers):   # kinds a backend does not declare are refused before this
                params = layer_params(net, weights, i)
                first = len(self.buffers)
                op = self.make_op(i, layer, params)
                op = self.choose_form(i, layer, params, op, self.buffers[first:])
                self.ops.append(op)
                layers[layer.name] = op.describe()
            self.config.update({"input": self.layouts[0].describe(), "output": self.layouts[-1].describe(),
                                "layers": layers})
            self._add_edges()
            self._pass = self.fused_ops()
        except BaseException:
            self.close()
            raise
        self.finish_prepare()
        self.flatten()   # every kernel's arguments set here, once: a pass only enqueues

    def flatten(self) -> None:
        """As OpenCLNet's, then the pass's branches on a second queue where that measured faster (branches.py)."""
        super().flatten()
        with self.rt.unprofiled():   # measured on the queue run() enqueues on
            way, medians = branches.choose(self, Recorder(self.rt.queue, enabled=False))
        if medians:
            self.config["pass"] += f"; {way} (measured at prepare: " + ", ".join(
                f"{name} {ms:.3f} ms" for name, ms in medians.items()) + " a pass)"

    def _add_edges(self) -> None:
        """Wrap the first and last ops (one op may be both) with the staging
        buffers and the conversions the net's input and output need."""
        first, last = self.layouts[0], self.layouts[-1]
        self.input_stage = stage = self._staging(first, 0, "input")
        pack = None if stage is self.activations[0] else Convert(
            self.rt, "pack", first, stage, self.activations[0], f"input NCHW->{first.order_name}")
        self.ops[0] = InputEdge(self.ops[0], self.rt, stage, first.canonical_shape, pack)
        self.config["input_conversion"] = self._edge_text(pack, "load_input copies into the input buffer")
        if last.padded_vector:   # a kernel in every pass to drop a few channels would cost a launch (0.02 ms on a GPU)
            self.output_stage = self.activations[-1]
            self.ops[-1] = OutputEdge(self.ops[-1], self.rt, self.output_stage, last.canonical_shape, None,
                                      stored=last.stored_shape)
            self.config["output_conversion"] = (f"none: fetch_output copies the output buffer's {last.c_stored} "
                                                f"channels and keeps the first {last.c} (the rest pad its stores)")
            return
        self.output_stage = stage = self._staging(last, -1, "output")
        unpack = None if stage is self.activations[-1] else Convert(
            self.rt, "unpack", last, self.activations[-1], stage, f"output {last.order_name}->{last.canonical_name}")
        self.ops[-1] = OutputEdge(self.ops[-1], self.rt, stage, last.canonical_shape, unpack)
        self.config["output_conversion"] = self._edge_text(unpack, "fetch_output copies from the output buffer")

    def _staging(self, layout: Layout, i: int, side: str):
        """The canonical buffer of the net's `side`: activations[i] itself
        when its layout is canonical, else a buffer of its own."""
        if layout.is_canonical:
            return self.activations[i]
        stage = self.alloc(int(np.prod(layout.canonical_shape)) * 4, f"canonical {side} staging buffer", poison=False)
        # NaN from the host, as the activation buffers' interior: an element never written still shows
        cl.enqueue_copy(self.rt.queue, stage, np.full(layout.canonical_shape, np.nan, np.float32))
        return stage

    @staticmethod
    def _edge_text(convert: Convert | None, plain: str) -> str:
        return convert.describe() if convert is not None else f"none: the layout is canonical, {plain}"

    def run_layer(self, index, x):
        """As OpenCLNet's, an add's list of inputs included."""
        xs = self.check_inputs(x, index)
        op = self.ops[index]
        op.write_input(xs)
        op.enqueue(Recorder(self.rt.queue, enabled=False))
        self.rt.finish()
        return op.read_output()

    def load_input(self, x):
        """A plain copy into the canonical input staging buffer, returning
        once it is done; the first layer's op converts it on the device."""
        self.ops[0].write_input(x)

    def _activation_buffer(self, i: int, layout: Layout):
        what = "input buffer" if i == 0 else f"output of {self.net.layers[i - 1].name}"
        buf = self.alloc(layout.nbytes, what, poison=False)
        # zero border once, NaN interior (see layout.py); a blocking write
        cl.enqueue_copy(self.rt.queue, buf, layout.template())
        return buf

    def concat_views(self) -> dict:
        """Producer layer -> (the concatenation it writes into, its first channel there), its
        layout made a view (self.layouts); none here, a backend that writes in place says which."""
        return {}

    def fused_ops(self) -> list[LayerOp]:
        """The ops of a forward pass; a backend that folds layers together replaces some."""
        return list(self.ops)

    def pass_ops(self):
        return self._pass

    def input_layout(self, index: int) -> Layout:
        """The layout of the buffer layer `index` reads first (in a chain, layouts[index])."""
        return self.layouts[self.net.sources(index)[0] + 1]

    def reads_or_writes_a_view(self, index: int) -> bool:
        """Layer `index` reads or writes a slice of a concatenation's buffer (layout.py's views)."""
        return self.input_layout(index).is_view or self.layouts[index + 1].is_view

    def make_op(self, index: int, layer, params: dict[str, np.ndarray]) -> KernelOp:
        raise NotImplementedError

    def choose_form(self, index: int, layer, params: dict[str, np.ndarray], op: LayerOp, bufs: list) -> LayerOp:
        """The op that runs layer `index`: `op` (which allocated `bufs`), or another form of the
        same work that a backend measured faster."""
        return op

    def share(self, buf):
        """Mark `buf` the net's own, used by the forms of several layers (Winograd's GEMM scratch): a form's
        release() leaves it, whichever form allocated it first; unshare() hands it back to release()."""
        self._shared = getattr(self, "_shared", set()) | {id(buf)}
        return buf

    def unshare(self, bufs: list) -> None:
        self._shared = getattr(self, "_shared", set()) - {id(b) for b in bufs}

    def release(self, bufs: list) -> None:
        """Free buffers that no op kept (a form not chosen); shared ones (share) stay."""
        shared = getattr(self, "_shared", set())
        bufs = [b for b in bufs if id(b) not in shared]
        gone = {id(b) for b in bufs}
        for b in bufs:
            b.release()
        self.buffers = [b for b in self.buffers if id(b) not in gone]

class HandwrittenBackend(OpenCLBackend):
    family = Family.HAND_WRITTEN
    net_class = HandwrittenNet

    def prepare(self, net, weights, batch, mode=None):
        return self.net_class(self.runtime, net, weights, batch)


PLAIN, REPLAY = "plain", "replay"


class ReplayingBackend(HandwrittenBackend):
    """A hand-written backend with two modes, measured against each other as every mode is: its kernels
    enqueued one by one each pass (plain), or the pass recorded once as a command buffer and replayed
    (replay; refused in one line where the device offers no cl_khr_command_buffer).  The replay of a
    net whose plain pass is still open (the runner makes the modes in turn) is that pass recorded
    (OpenCLNet.replaying_twin): one prepare for both, and the same measured choices in both."""

    _plain = None   # (net, weights, batch, a weak reference to the plain pass last made of them)

    def modes(self):
        return [PLAIN, REPLAY]

    def mode_floor(self, net, batch, mode):
        if mode == REPLAY:   # refused before anything is prepared
            from ..opencl.replay import missing
            why = missing(self.runtime.device)
            if why:
                raise Unsupported(f"replay: {why}")
        return None

    def make_net(self, net, weights, batch):
        return self.net_class(self.runtime, net, weights, batch)

    def prepare(self, net, weights, batch, mode=None):
        if mode not in (None, PLAIN, REPLAY):
            raise ValueError(f"mode {mode!r}: {PLAIN} or {REPLAY}")
        self.mode_floor(net, batch, mode)
        if mode == REPLAY and self._plain is not None:
            made_net, made_weights, made_batch, ref = self._plain
            plain = ref()
            if made_net is net and made_weights is weights and made_batch == batch and plain is not None and plain.ops:
                self._plain = None
                return plain.replaying_twin()
        t0 = time.perf_counter()
        prepared = self.make_net(net, weights, batch)
        prepared.made_ms = (time.perf_counter() - t0) * 1e3
        if mode == PLAIN:
            self._plain = (net, weights, batch, weakref.ref(prepared))
        if mode == REPLAY:
            try:
                prepared.record()
            except BaseException:
                prepared.close()
                raise
        return prepared
