"""What `baseline` and `vectorised` share: a net as one kernel launch per
layer over buffers laid out by layout.py, and the Backend shell.

Each backend subclass of HandwrittenNet says which layout its buffers use
and builds one KernelOp per layer (compile with -D constants, upload the
layer's reordered parameters, fix the launch shape).  Buffers are made here:
buffer i is layer i's input and buffer i+1 its output, so layer i writes
straight into the buffer (and the padding) layer i+1 reads.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from compare.errors import Unsupported

from ..base import Backend, layer_params
from ..opencl.launch import Launch
from ..opencl.net import LayerOp, OpenCLNet
from ..opencl.runtime import get_runtime
from .layout import Layout, net_layouts


class KernelOp(LayerOp):
    """One layer = one kernel launch.  Host arrays in and out are canonical;
    the conversion to and from the buffers' layouts happens only here."""

    def __init__(self, net: "HandwrittenNet", index: int, launch: Launch, args, step: str):
        super().__init__(net.net.layers[index], index)
        self.rt = net.rt
        self.in_layout: Layout = net.layouts[index]
        self.out_layout: Layout = net.layouts[index + 1]
        self.in_buf = net.activations[index]
        self.out_buf = net.activations[index + 1]
        self.launch = launch
        self.args = (self.in_buf,) + tuple(args) + (self.out_buf,)
        self.step = step

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))

    def write_input(self, x):
        self.rt.write(self.in_buf, self.in_layout.pack(x))

    def read_output(self):
        return self.out_layout.unpack(self.rt.read(self.out_buf, self.out_layout.stored_shape))

    def describe(self) -> dict:
        return {"kernel": self.step, **self.launch.describe(), "output": self.out_layout.describe()}


class HandwrittenNet(OpenCLNet):
    """Subclasses set `order` and `channel_multiple` and implement make_op()."""

    order = "nchw"
    channel_multiple = 1

    def __init__(self, runtime, net, weights, batch: int):
        super().__init__(runtime, net, batch)
        try:
            self.layouts = net_layouts(net, batch, self.order, self.channel_multiple)
            self.activations = [self._activation_buffer(i, lay) for i, lay in enumerate(self.layouts)]
            layers = {}
            for i, layer in enumerate(net.layers):
                if layer.kind not in ("conv", "subsample", "maxpool", "dense"):
                    raise Unsupported(f"{layer.name}: no {type(self).__name__} kernel for layer kind {layer.kind!r}")
                op = self.make_op(i, layer, layer_params(net, weights, i))
                self.ops.append(op)
                layers[layer.name] = op.describe()
            self.config.update({"input": self.layouts[0].describe(), "layers": layers})
        except BaseException:
            self.close()
            raise
        self.finish_prepare()

    def _activation_buffer(self, i: int, layout: Layout):
        what = "input buffer" if i == 0 else f"output of {self.net.layers[i - 1].name}"
        buf = self.alloc(layout.nbytes, what, poison=False)
        # zero border once, NaN interior (see layout.py); a blocking write
        cl.enqueue_copy(self.rt.queue, buf, layout.template())
        return buf

    def make_op(self, index: int, layer, params: dict[str, np.ndarray]) -> KernelOp:
        raise NotImplementedError


class HandwrittenBackend(Backend):
    uses_opencl = True
    net_class = HandwrittenNet

    def runtime(self):
        return get_runtime(self.device_spec)

    def info(self):
        rt = self.runtime()
        return {"device": rt.info["name"], "kind": "opencl", "platform": rt.info["platform"],
                "versions": {"pyopencl": cl.VERSION_TEXT, "driver": rt.info["driver"]}}

    def prepare(self, net, weights, batch):
        return self.net_class(self.runtime(), net, weights, batch)
