"""`clblast` and `clblast-convgemm`: every layer composed from CLBlast
routines, as the study did (Rovder 2018, chapters 4-5), so its tables 5.3
and A.1 can be reproduced on any OpenCL device.

clblast           conv and subsampling (as sparse conv): xCOPY bias init,
                  xIM2COL, xGEMMBATCHED (xGEMM at batch 1); dense: xCOPY bias
                  init, xGEMM (xGEMV at batch 1); activations and max-pool:
                  small own kernels, timed and labelled "(own kernel)".
                  Graph nets: a grouped or depthwise conv is one GEMM per
                  image and group in one xGEMMBATCHED; a 1x1 stride-1 conv
                  skips xIM2COL; an asymmetric padding is padded first (own
                  kernel); add: xCOPY + xAXPY + activation; global average
                  pool: xGEMV with a ones vector.  The classification zoo's layers
                  (concatenation in place or by xCOPY, xHAD, a gate as a batched
                  GEMM, channel selections by xCOPY, average pooling and softmax
                  as own kernels): zoo_layers.py.
clblast-convgemm  conv and subsampling through CLBlast's fused, batched
                  xCONVGEMM plus an own bias+activation kernel (grouped: one
                  xCONVGEMM per image and group); the rest as `clblast`.
                  Today's CLBlast, for a fair comparison.

Each layer reads the device buffers of the layers it names (a graph: skip
connections read an earlier output), so every layer's output has a buffer.
pyclblast wraps the BLAS routines; xIM2COL and xCONVGEMM go through the
ctypes binding in library.py.  Layer recipes are in layers.py, graph_layers.py.
"""
from __future__ import annotations

import os
import time
from importlib import metadata

import numpy as np
import pyopencl as cl

from nets import TRANSFORMER_KINDS
from nets.errors import Unsupported

from ..base import Family, ModeFloor, layer_params
from ..isolated import IsolatedBackend
from ..opencl.backend import OpenCLBackend
from ..opencl.net import OpenCLNet
from . import counting, library, problems
from .conv_plan import ConvPlan
from .graph_layers import FEATURES, KINDS, AxpyAddOp, GemvAvgPoolOp
from .transformer_layers import transformer_op
from .layers import ConvgemmOp, DenseOp, Im2colConvOp, MaxPoolOp, subsample_as_conv_weight
from .zoo_layers import (AvgPoolKernelOp, CopyChannelsOp, GateGemmOp, HadMulOp, PlacedConcatOp, SoftmaxOp,
                         concat_placement, sub_buffer)
from . import overrides
from .call import Call
from .library import check_library, require_library
from .record import DeviceId, Store
from .tuned import DATABASE, MODES, PER_PROBLEM, TUNED, Tuning, clblast_version, frozen, switches_per_pass

_SPATIAL = ("conv", "subsample")


def conv_plan(net, batch: int, i: int) -> ConvPlan:
    """Layer i's plan: a conv, or a subsampling as its sparse conv (C filters, no padding)."""
    layer = net.layers[i]
    padding = layer.padding if layer.kind == "conv" else (0, 0)
    return ConvPlan.of(batch, net.in_shape(i), net.out_shape(i), layer.kernel, layer.stride, padding,
                       getattr(layer, "groups", 1), getattr(layer, "dilation", (1, 1)))


def input_buffers(net, i: int, activations: list) -> list:
    """The buffers layer i reads, in its order: activations[0] is the net's input, [j + 1] layer j's output."""
    return [activations[s + 1] for s in net.sources(i)]


class OutputBuffers:
    """Each layer's output buffer: its own, or, for an input a concatenation takes in place
    (zoo_layers.concat_placement), a region of the concatenation's, which is then made early."""

    def __init__(self, owner):
        self.owner = owner
        align = max(owner.rt.device.mem_base_addr_align // 8, 4)
        self.placed = concat_placement(owner.net, owner.batch, align)
        self.made: dict[int, object] = {}

    def _own(self, i: int):
        if i not in self.made:
            net = self.owner.net
            self.made[i] = self.owner.alloc(self.owner.batch * int(np.prod(net.out_shape(i))) * 4,
                                            f"output of {net.layers[i].name}")
        return self.made[i]

    def of(self, i: int):
        if i in self.placed:
            j, offset = self.placed[i]
            nbytes = self.owner.batch * int(np.prod(self.owner.net.out_shape(i))) * 4
            return sub_buffer(self.owner, self._own(j), offset, nbytes, f"output of {self.owner.net.layers[i].name}")
        return self._own(i)

    def in_place(self, j: int) -> list[bool]:
        """For each input of concatenation j, whether its producer writes it in place."""
        return [self.placed.get(s, (None,))[0] == j for s in self.owner.net.sources(j)]


class ClblastNet(OpenCLNet):
    """A net as CLBlast layer ops; buffer i+1 is layer i's output, and each
    layer reads the buffers of the layers it names."""

    counting_routines = staticmethod(counting.routine_calls)   # launches(): its CLBlast calls apart

    def __init__(self, runtime, net, weights, batch: int, conv_method: str, tuning: Tuning):
        super().__init__(runtime, net, batch)
        self.conv_method = conv_method
        self.tuning = tuning
        self.activations = []   # the input buffer and every layer's output
        try:
            self._build(weights)
            self._warm_up()
            # what the warm-up ran with: the overrides of this net, or none (the database's)
            self.config["clblast_parameters_in_force"] = overrides.in_force(self.rt.device)
        except BaseException:
            self.close()
            raise
        self.finish_prepare()

    def _warm_up(self):
        """CLBlast compiles each routine's kernels on its first call (seconds
        on PoCL): one untimed pass here keeps that out of every timed run.
        It runs on a zero input, like real data and unlike the NaN poison;
        then every activation buffer is poisoned with NaN again, so an
        element a later run fails to write still shows."""
        self.rt.write(self.activations[0], np.zeros((self.batch,) + tuple(self.net.input_shape), np.float32))
        t0 = time.perf_counter()
        self.run()
        self.config["warmup_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        for buf in self.activations:
            cl.enqueue_fill_buffer(self.rt.queue, buf, np.float32(np.nan), 0, buf.size)
        self.rt.finish()

    def _col_buffer(self):
        """One im2col buffer shared by every layer (they run one after the
        other), as large as the largest need.  Every layer's need is checked
        against MAX_MEM_ALLOC_SIZE before anything else is allocated."""
        if self.conv_method != "im2col":
            return None
        needs = []
        for i, layer in enumerate(self.net.layers):
            if layer.kind in _SPATIAL and conv_plan(self.net, self.batch, i).col_floats():
                plan = conv_plan(self.net, self.batch, i)
                rows, cols = plan.col_floats() // plan.out_plane, plan.out_plane
                what = f"im2col buffer of {layer.name} ({rows} x {cols} floats)"
                self.rt.check_alloc(rows * cols * 4, what)
                needs.append((rows * cols, what))
        if not needs:
            return None
        floats, what = max(needs)
        self.config["im2col_buffer"] = what.replace("im2col buffer of ", "sized for ")
        return self.alloc(floats * 4, what)

    def _build(self, weights):
        net, batch = self.net, self.batch
        col_buf = self._col_buffer()
        self.activations.append(self.alloc(batch * int(np.prod(net.in_shape(0))) * 4, "input buffer"))
        outputs = OutputBuffers(self)
        recipes = {}
        for i, layer in enumerate(net.layers):
            out = outputs.of(i)
            srcs = input_buffers(net, i, self.activations)
            self.activations.append(out)
            buf = srcs[0]
            params = layer_params(net, weights, i)
            if layer.kind in _SPATIAL:
                groups = 1
                if layer.kind == "conv":
                    weight, stride, pad, groups = params["weight"], layer.stride, layer.padding, layer.groups
                else:   # study 5.1.3: subsampling is a convolution with sparse filters
                    weight, stride, pad = subsample_as_conv_weight(params["coeff"], layer.kernel), layer.stride, (0, 0)
                if self.conv_method == "im2col":
                    op = Im2colConvOp(self, layer, i, buf, out, weight, params["bias"], stride, pad, col_buf, groups)
                else:
                    op = ConvgemmOp(self, layer, i, buf, out, weight, params["bias"], stride, pad, groups=groups)
            elif layer.kind == "add":
                op = AxpyAddOp(self, layer, i, srcs, out)
            elif layer.kind == "global_avgpool":
                op = GemvAvgPoolOp(self, layer, i, buf, out)
            elif layer.kind == "maxpool":
                op = MaxPoolOp(self, layer, i, buf, out)
            elif layer.kind == "dense":
                op = DenseOp(self, layer, i, buf, out, params["weight"], params["bias"])
            elif layer.kind == "concat":
                op = PlacedConcatOp(self, layer, i, srcs, out, outputs.in_place(i))
            elif layer.kind == "mul" and len(net.in_shapes(i)[1]) == 3 and net.in_shapes(i)[1] != net.in_shape(i):
                op = GateGemmOp(self, layer, i, srcs, out)
            elif layer.kind == "mul":
                op = HadMulOp(self, layer, i, srcs, out)
            elif layer.kind == "channels":
                op = CopyChannelsOp(self, layer, i, buf, out)
            elif layer.kind == "avgpool":
                op = AvgPoolKernelOp(self, layer, i, buf, out)
            elif layer.kind == "softmax":
                op = SoftmaxOp(self, layer, i, buf, out)
            elif layer.kind in TRANSFORMER_KINDS:
                op = transformer_op(self, layer, i, srcs, out, params)
            else:
                raise Unsupported(f"{layer.name}: CLBlast backends have no recipe for layer kind {layer.kind!r}")
            self.ops.append(op)
            recipes[layer.name] = op.describe()
        self.config.update({
            "conv_method": ("xIM2COL + xGEMMBATCHED (xGEMM at batch 1)" if self.conv_method == "im2col"
                            else "xCONVGEMM + bias/activation kernel"),
            "layers": recipes,
            "clblast_parameters": self.tuning.source,
            "clblast_tuning_depth": str(self.tuning.depth()) if self.tuning.records else None,
            # the net and batch whose chosen sets the tuned mode ran, where this batch has none of its own
            "clblast_tuned_at": self.tuning.net.net if self.tuning.borrowed else None,
            "clblast_tuning_progress": self.tuning.progress() if self.tuning.records else None,
            "step_timing": "CLBlast routines: markers around the call on the in-order profiling queue; "
                           "own kernels: their own profiling events",
        })


class ClblastInProcess(OpenCLBackend):
    """The backend itself; it runs inside a child process of ClblastBackend."""

    name = "clblast"
    supported_kinds = KINDS
    supported_features = FEATURES
    conv_method = "im2col"

    def versions(self):
        lib = library.library_file()
        return {"pyclblast": metadata.version("pyclblast"), "libclblast": os.path.basename(lib) if lib else "unknown"}

    def tuning(self, net, batch, mode) -> Tuning:
        """The parameters of `mode`; without one (no verified tuning, or --clblast-params database) the option's."""
        use = mode if mode is not None and self.options.clblast_params == TUNED else self.options.clblast_params
        tuning = Tuning.for_net(self.runtime.info, problems.net_calls(net, batch), use, (net.name, batch),
                                problems.net_compositions(net, batch))
        if mode is not None and use != DATABASE and tuning.changes_nothing():
            # timing the database twice under two names would only report noise as a difference
            raise Unsupported(f"{use}: every call would run with CLBlast's database parameters "
                              f"(tuning: {tuning.depth()}), so the database mode stands for it")
        return tuning

    way_words = "in the composition it runs"

    def ways(self, net, batch: int, i: int, tuning: Tuning) -> list[list]:
        """Layer i's compositions as this backend may run them, each as the parameter sets of its calls in
        order (tuned.switches_per_pass): the study's recipe runs one; xCONVGEMM its own for a conv."""
        found = problems.layer_compositions(net, batch, i)
        if not found:
            return []
        pick = 1 if self.conv_method == "convgemm" and net.layers[i].kind in ("conv", "subsample") else 0
        return [[frozen(tuning.sets(p)) for p in found[pick]]]

    def _floor_plan(self, net, batch, mode):
        """What tuned-per-problem's floor is made of, told from the tuning alone: (switches a pass, the ways,
        the switching kernel, two of its sets, the smallest problem that runs it); None where it has none."""
        if mode != PER_PROBLEM or check_library() is not None:
            return None
        tuning = self.tuning(net, batch, mode)
        ways = [self.ways(net, batch, i, tuning) for i in range(len(net.layers))]
        switches = switches_per_pass(ways)
        sets = {}
        for layer in ways:
            for way in layer:
                for call in way:
                    for kernel, params in call:
                        sets.setdefault(kernel, set()).add(params)
        kernel = next((k for k, v in sets.items() if len(v) > 1), None)
        if not switches or kernel is None:
            return None
        runs = [p for p in problems.net_calls(net, batch) if any(k == kernel for k, _ in tuning.sets(p))]
        if not runs:
            return None
        smallest = min(runs, key=lambda p: int(np.prod([int(v) for v in p.sizes if not isinstance(v, bool)])))
        one, other = (dict(p) for p in sorted(sets[kernel])[:2])
        return switches, ways, kernel, one, other, smallest, tuning.sets(smallest)

    def has_floor(self, net, batch, mode):
        return self._floor_plan(net, batch, mode) is not None

    def mode_floor(self, net, batch, mode):
        """The host time a pass in tuned-per-problem cannot go under (ModeFloor): it switches parameters
        between calls, and each switch costs the call after it an override call and what CLBlast does again
        for it (its program looked up or compiled), on top of enqueuing the pass's calls; so its switches a pass
        times the least a switch added to a call here, plus its fewest calls a pass times the least a call took
        to enqueue.  Measured on the smallest of the net's problems that runs the switching kernel, its other
        kernels as the pass has them."""
        plan = self._floor_plan(net, batch, mode)
        if plan is None:
            return None
        switches, ways, kernel, one, other, smallest, in_force = plan
        for k, params in in_force:   # the pass's other kernels in force, as the call runs them
            overrides.ensure(self.runtime.device, k, params)
        call = Call(self.runtime, smallest)
        switch = overrides.switch_ms(self.runtime.device, call, kernel, one, other)
        calls = sum(min(len(way) for way in layer) for layer in ways if layer)
        enqueue = call.enqueue_ms()
        return ModeFloor(switches * switch + calls * enqueue,
                         f"{switches} parameter switches a pass {self.way_words} x {switch:.3f} ms, the least a "
                         f"switch added to the call after it here (the override call and CLBlast's program looked "
                         f"up again or compiled), + {calls} CLBlast calls a pass x {enqueue:.3f} ms, the least one "
                         f"took to enqueue")

    def modes(self):
        return clblast_modes(self.runtime, self.options)

    def prepare(self, net, weights, batch, mode=None):
        require_library()
        return ClblastNet(self.runtime, net, weights, batch, self.conv_method, self.tuning(net, batch, mode))


class ClblastConvgemmInProcess(ClblastInProcess):
    name = "clblast-convgemm"
    conv_method = "convgemm"


def clblast_modes(runtime, options) -> list[str]:
    """With a verified tuning on this device: 'tuned' (one set per kernel for the whole net),
    'tuned-per-problem' and 'database' (CLBlast's own parameters), each in a child of its own; at its
    best is the fastest, so tuning never makes it slower.  Told without loading anything into CLBlast, so
    the parent of the children can ask it."""
    if check_library() is None and options.clblast_params == TUNED and _has_tuning(runtime):
        return list(MODES)
    return []


def _has_tuning(runtime) -> bool:
    store = Store(DeviceId.of(runtime.info, clblast_version()))
    return any(r.verified for r in store.all())


class ClblastBackend(IsolatedBackend):
    family = Family.CLBLAST
    name = "clblast"
    summary = ("CLBlast routines as the study composed them: xCOPY + xIM2COL + xGEMMBATCHED/xGEMM(V), with the "
               "tuned parameters or CLBlast's database, whichever is faster")
    uses_opencl = True
    supported_kinds = KINDS
    supported_features = FEATURES
    inner = "backends.clblast.backend:ClblastInProcess"
    child_per_mode = True   # CLBlast's overrides hold for a whole process

    @classmethod
    def unavailable_reason(cls):
        return check_library()

    def modes(self):   # told here: no child is started to ask
        return clblast_modes(self.runtime, self.options)


class ClblastConvgemmBackend(ClblastBackend):
    name = "clblast-convgemm"
    summary = ("CLBlast's fused batched xCONVGEMM for conv/subsampling (+ own bias kernel); the rest as clblast; "
               "tuned or database parameters, whichever is faster")
    inner = "backends.clblast.backend:ClblastConvgemmInProcess"
