"""`fused`: the whole net in one kernel launch, one work-group per image, its
activations in local memory (backends/handwritten/fused_source.py writes the
kernel for each net).  Small nets are launch-bound on a GPU (LeNet-5 batch
100 is 84 MFLOP in six or more launches elsewhere); here a forward pass is
one launch and no activation goes through global memory.

Where one image's activations (the local array) do not fit the device's
local memory, or the kernel cannot have a work-group, it is UNSUPPORTED
with the sizes, never a crash (VGG-16 needs megabytes).  Graphs fit as
chains do: a residual branch, a transformer's blocks (vit-tiny: 16 launches
a pass in `vectorised-tiled`).

The end-to-end pass is the one kernel.  Per-layer times (run_timed) and the
layer-wise checks run each layer as a kernel of its own, global memory in
and out: that is said in `config`, and the per-layer tables show those.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from nets import STUDY_KINDS, Feature, LayerKind
from nets.errors import Unsupported

from ..base import Family
from ..opencl.backend import OpenCLBackend
from ..opencl.launch import Launch, step_name
from ..opencl.net import LayerOp, OpenCLNet, Recorder
from ..opencl.registers import register_cap
from ..opencl.runtime import KernelBuildError
from ..opencl.workgroups import build_fitting, limits
from .fused_source import layer_source, local_floats, net_source, refusal
from .measured import HOW, fastest_ms, rel_l2

GROUPS = (256, 512, 1024)   # work-items per image tried at prepare (each shrunk to what the device and the
                            # kernel accept, and on NVIDIA also built with its registers capped to fit the size:
                            # registers.py), each with its convs' output channels one or a block a work-item
                            # (fused_source.channel_block), the fastest pass kept: one image's work is
                            # latency-bound in one group
SEED = 58              # of the random input a launch past the kernel's WORK_GROUP_SIZE is checked on
PAST_LIMIT_L2 = 1e-6   # ... and how far its output may be from the first form's (the same sums: rounding alone)
TYPICAL_LOCAL = 48 * 1024   # a GPU work-group's local memory (NVIDIA's): a net needing more is said to


def _build(rt, source: str, name: str, most: int = GROUPS[0], options: tuple = ()):
    """The kernel and its work-group size (a -D constant of the source), at most `most`; `options`: more
    build options (a register cap)."""
    def choose(lim):
        size = 1
        while size * 2 <= min(most, lim.max_group, lim.max_items[0]):
            size *= 2
        return size
    try:
        return build_fitting(rt, "", name, choose, lambda lsz: {"LSZ": f"{lsz}u"}, lambda lsz: lsz,
                             build=lambda defines: rt.kernel_of(source, name, defines, options,
                                                                label=f"the {name} kernel"))
    except KernelBuildError as exc:   # e.g. a local array past what the compiler allows
        raise Unsupported(f"fused: the device's compiler refused the kernel: {str(exc).splitlines()[0]}") from None


class _LayerAlone(LayerOp):
    """Layer i as a kernel of its own, reading the buffers of the layers it reads, writing buffer i+1."""

    def __init__(self, owner, index):
        layer = owner.net.layers[index]
        super().__init__(layer, index)
        self.rt = owner.rt
        source, names = layer_source(owner.net, index)
        (lsz, kernel) = _build(owner.rt, source, "layer_fused")
        self.launch = Launch(owner.rt, "", "layer_fused", None, (owner.batch * lsz,), (lsz,), exact=True,
                             kernel=kernel)
        self.in_bufs = [owner.activations[s + 1] for s in owner.net.sources(index)]
        self.out_buf = owner.activations[index + 1]
        self.args = [owner.parameter(n) for n in names]
        self.out_shape = (owner.batch,) + tuple(owner.net.out_shape(index))
        self.step = f"{step_name(layer.kind, layer.activation)} alone"

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.in_bufs, self.out_buf, *self.args))

    def write_input(self, x):
        for buf, xi in zip(self.in_bufs, x if isinstance(x, (list, tuple)) else [x]):
            self.rt.write(buf, xi)

    def read_output(self):
        return self.rt.read(self.out_buf, self.out_shape)


class FusedNet(OpenCLNet):
    def __init__(self, runtime, net, weights, batch: int):
        super().__init__(runtime, net, batch)
        floats = local_floats(net)
        need, have = 4 * floats, runtime.info["local_mem_bytes"]
        if need > have:
            raise Unsupported(f"fused: one image of {net.name} needs {need / 1024:.1f} KiB of local memory "
                              f"for its activations, more than the {have / 1024:.1f} KiB of {runtime.info['name']}")
        self._params: dict[str, object] = {}
        try:
            self.activations = [self._poisoned(batch * int(np.prod(s)), f"activations {k}")
                                for k, s in enumerate(net.shapes)]
            self._weights = weights
            plain, names = net_source(net)
            blocked = net_source(net, blocked=True)[0]
            self.whole_args = [self.parameter(n) for n in names]
            wholes = {}
            for source in dict.fromkeys([plain, blocked]):   # the same where no conv's channels make blocks
                for most in GROUPS:   # a device's limit may make one size of several
                    # as compiled, and with its registers capped to fit `most` work-items (registers.py)
                    for options in dict.fromkeys([(), register_cap(runtime.device, most)]):
                        lsz, kernel = _build(runtime, source, "net_fused", most, options)
                        past = ""
                        if options and lsz < most:   # the kernel says fewer: tried past it, checked (below)
                            if most > runtime.info["max_work_group_size"]:
                                continue
                            lsz, past = most, " (past the kernel's WORK_GROUP_SIZE)"
                            kernel = runtime.kernel_of(source, "net_fused", {"LSZ": f"{most}u"}, options,
                                                       label="the net_fused kernel")
                        label = (f"{lsz} work-items" + (f", {options[0]}" if options else "")
                                 + (", conv channels in blocks" if source is not plain else "") + past)
                        wholes.setdefault(label, Launch(runtime, "", "net_fused", None, (batch * lsz,), (lsz,),
                                                        exact=True, kernel=kernel))
            refused = self._refuse_past_limit(wholes)
            passes = {label: _Whole(self, launch) for label, launch in wholes.items()}
            ms = fastest_ms(runtime, {label: [op] for label, op in passes.items()}) if len(passes) > 1 else {}
            label = min(ms, key=ms.get) if ms else next(iter(passes))
            self.whole, self._whole_op = wholes[label], passes[label]
            lim = limits(runtime, self.whole.kernel)
            self.ops = [_LayerAlone(self, i) for i in range(len(net.layers))]
        except BaseException:
            self.close()
            raise
        tried = (" measured fastest at prepare of " + ", ".join(f"{k}: {v:.3f} ms" for k, v in ms.items())
                 + f" ({HOW})") if ms else ""
        tried += "".join(f"; not timed: {k} ({why})" for k, why in refused.items())
        self.config.update({
            "kernel": "the whole net in one kernel (backends/handwritten/fused_source.py writes it per net)",
            "work_group": f"{label} per image (kernel limit {lim.max_group}){tried}",
            "local_memory": f"{need} bytes per work-group (one array of {floats} floats: each layer's output "
                            f"there while a layer still reads it, and the scratch of a layer norm or an attention)",
            "per_layer": "each layer alone as a kernel of its own (global memory in and out); the end-to-end "
                         "pass is the one fused kernel",
        })
        self.finish_prepare()
        self.flatten()   # every kernel's arguments set here, once: a pass only enqueues

    def _refuse_past_limit(self, wholes: dict) -> dict[str, str]:
        """Drop from `wholes` each launch past its kernel's WORK_GROUP_SIZE (NVIDIA's driver says 256 for every
        kernel, the empty one included, yet runs 1024: benchmarks/registers.py) that the driver refuses, or whose
        output on a random input is not the first launch's (the same sums, another share of them a work-item);
        each dropped one and why.  Only ever tried with the registers capped to fit the group."""
        past = [k for k in wholes if k.endswith("WORK_GROUP_SIZE)")]
        if not past:
            return {}
        shape = (self.batch,) + tuple(self.net.input_shape)
        x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
        want = self._output(next(iter(wholes.values())), x)
        refused = {}
        for label in past:
            try:
                got = self._output(wholes[label], x)
            except cl.Error as exc:
                refused[label] = f"the driver refused it: {str(exc).splitlines()[0]}"
            else:
                if not rel_l2(got, want) <= PAST_LIMIT_L2:   # NaN too
                    refused[label] = f"its output was {rel_l2(got, want):.2g} from the first form's"
            if label in refused:
                del wholes[label]
        return refused

    def _output(self, launch: Launch, x: np.ndarray) -> np.ndarray:
        """The net's output on `x` (canonical, the batch) through `launch` of the whole-net kernel."""
        self.rt.write(self.activations[0], x)
        _Whole(self, launch).enqueue(Recorder(self.rt.queue, enabled=False))
        self.rt.finish()
        return self.rt.read(self.activations[-1], (self.batch,) + tuple(self.net.output_shape))

    def _poisoned(self, floats: int, what: str):
        """A buffer of NaN, so an element no kernel writes shows; written from
        the host, not filled: after clEnqueueFillBuffer, Oclgrind 21.10 takes
        what kernels write there later for uninitialised values."""
        buf = self.alloc(floats * 4, what, poison=False)
        self.rt.write(buf, np.full(floats, np.nan, np.float32))
        return buf

    def parameter(self, name: str):
        """The device copy of weights array `name`, uploaded once."""
        if name not in self._params:
            self._params[name] = self.upload(self._weights[name], name)
        return self._params[name]

    def enqueue_pass(self, rec):
        self._whole_op.enqueue(rec)


class _Whole:
    """A pass as one launch of the whole-net kernel (at one work-group size)."""

    def __init__(self, owner: FusedNet, launch: Launch):
        self.owner, self.launch = owner, launch

    def enqueue(self, rec):
        o = self.owner
        rec.kernel("whole net (one kernel)", self.launch(o.activations[0], o.activations[-1], *o.whole_args))


class FusedBackend(OpenCLBackend):
    name = "fused"
    family = Family.HAND_WRITTEN
    summary = ("hand-written: the whole net in one kernel, one work-group per image, activations in local "
               "memory (nets whose activations fit, e.g. LeNet-5, vit-tiny)")

    supported_kinds = STUDY_KINDS | {LayerKind.ADD, LayerKind.LAYERNORM, LayerKind.TOKENS, LayerKind.TAKE_TOKEN,
                                     LayerKind.ATTENTION}
    supported_features = frozenset({Feature.GRAPH, Feature.RELU6, Feature.TANH, Feature.HARDSIGMOID,
                                    Feature.HARDSWISH, Feature.SILU, Feature.GELU, Feature.GELU_TANH})

    @classmethod
    def unsupported(cls, net):
        why = super().unsupported(net)
        if why is None:   # a kind it runs, in a form it has no code for (a windowed attention...)
            return next((f"layer {layer.name} ({layer.kind}): fused has {refusal(layer)}" for layer in net.layers
                         if refusal(layer)), None)
        # the design's own limit, beyond the kinds not written yet: it says whether writing them would help
        need = 4 * local_floats(net)
        if need <= TYPICAL_LOCAL:
            return why
        return (f"{why}; and fused keeps one image's activations in local memory, here {need / 1024:,.0f} KiB "
                f"(a GPU's work-group has tens of KiB)")

    def prepare(self, net, weights, batch, mode=None):
        return FusedNet(self.runtime, net, {k: np.asarray(v, np.float32) for k, v in weights.items()}, batch)
