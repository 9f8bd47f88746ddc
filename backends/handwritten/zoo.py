"""The classification zoo's layers (issue 36) in `vectorised` and
`vectorised-tiled` (kernels/vectorised.cl's CONCAT_COPY, GATHER, MUL,
AVGPOOL and SOFTMAX kernels).

Concatenation: each input's producer writes straight into its slice of the
concatenation's NHWC buffer (its layout a view: layout.py), so no copy is
made, where the input is read by the concatenation alone, starts at a
multiple of four channels (a float4 store) and fills whole float4s (or is
the last, its tail lanes then the buffer's zero padding channels), and the
concatenation has no activation of its own; any other input is copied into
its slice by a small kernel (labelled), with the activation where there is
one.  Every kernel writes its output through Y_PIXEL, which takes the view's
pitch and offset, so a conv, a tiled conv, a depthwise conv with its 1x1
(dw_pw) or a residual fold all write in place alike.

The multiply (elementwise, or by a per-channel gate), the channel selection,
the padded or ceil-mode average pool and the softmax are kernels of their
own; the new activations are the ACT codes every kernel's epilogue applies
(kernels/common.h), so a conv's hardswish or silu is in its epilogue.
"""
from __future__ import annotations

import numpy as np

from nets import LayerKind

from ..opencl.launch import ACT_CODES, Launch, step_name
from ..opencl.workgroups import choose_local
from .layout import Layout
from .net import KernelOp
from .workgroups import CONV_SHAPES

SOURCE = "vectorised.cl"
KINDS = frozenset({LayerKind.CONCAT, LayerKind.MUL, LayerKind.CHANNELS, LayerKind.AVGPOOL, LayerKind.SOFTMAX})


def concat_views(net, layouts: list) -> dict[int, tuple[int, int]]:
    """Producer -> (concatenation, first channel) for each input written in place; `layouts`
    (entry i + 1 layer i's) updated: the producer's a view of the concatenation's buffer."""
    readers: dict[int, list[int]] = {}
    for i in range(len(net.layers)):
        for s in net.sources(i):
            readers.setdefault(s, []).append(i)
    placed: dict[int, tuple[int, int]] = {}
    for j, layer in enumerate(net.layers):
        if layer.kind != LayerKind.CONCAT or layer.activation != "none" or j in placed:
            continue
        host = layouts[j + 1]
        sources, at = net.sources(j), 0
        for k, s in enumerate(sources):
            c = net.out_shape(s)[0] if s >= 0 else net.input_shape[0]
            last = k == len(sources) - 1
            own = layouts[s + 1] if s >= 0 else None
            if (s >= 0 and readers.get(s) == [j] and at % 4 == 0 and (c % 4 == 0 or last)
                    and not own.flat and not any(own.border) and s not in placed and not _hosts(placed, s)):
                placed[s] = (j, at)
                layouts[s + 1] = Layout(host.batch, c, host.h, host.w, host.pad_h, host.pad_w, "nhwc",
                                        own.c_stored, False, host.pad_bottom, host.pad_right,
                                        c_pitch=host.c_pitch, c_offset=host.c_offset + at)
            at += c
    return placed


def _hosts(placed: dict, j: int) -> bool:
    return any(host == j for host, _ in placed.values())


def _grid(net, dst) -> tuple:
    return (net.batch * dst.h, dst.w, dst.c_stored // 4)


def _launch(net, kernel: str, defines: dict, grid: tuple) -> Launch:
    return Launch(net.rt, SOURCE, kernel, net._defines(kernel, defines), grid,
                  lambda lim: choose_local(grid, CONV_SHAPES[net.device], lim))


def _inputs_defines(net, index: int) -> dict:
    """Each input's border, X<i>HP... as the add kernel reads them."""
    out = {}
    for i, s in enumerate(net.net.sources(index)):
        lay = net.layouts[s + 1]
        out.update({f"X{i}HP": lay.hp, f"X{i}WP": lay.wp, f"X{i}PT": lay.pad_h, f"X{i}PL": lay.pad_w})
    return out


class ConcatOp(KernelOp):
    """The concatenation: nothing where every input was written in place, else one copy kernel
    per input left.  Its layer-wise input is written as one image of the whole buffer."""

    def __init__(self, net, index: int, copies: list, step: str):
        super().__init__(net, index, copies[0][0] if copies else None, (), step)
        self.copies = copies   # (launch, input buffer)
        self.net_layouts = net.layouts

    def enqueue(self, rec):
        for launch, buf in self.copies:
            rec.kernel(self.step, launch(buf, self.out_buf))

    def write_input(self, x):
        xs = x if isinstance(x, (list, tuple)) else [x]
        whole = None
        for buf, layout, a in zip(self.in_bufs, self.in_layouts, xs):
            if layout.is_view:   # every view shares the one buffer: packed together, written once
                part = layout.pack(a)
                at = layout.c_offset
                if whole is None:
                    whole = part
                else:
                    whole[..., at:at + layout.c] = part[..., at:at + layout.c]
            else:
                self.rt.write(buf, layout.pack(a))
        if whole is not None:
            self.rt.write(self.out_buf, whole)

    def describe(self) -> dict:
        return {"kernel": self.step, "copies": len(self.copies), "output": self.out_layout.describe()}


def zoo_op(net, index: int, layer, params: dict) -> KernelOp:
    """The op of a zoo layer in a VectorisedNet (or its tiled subclass)."""
    src, dst = net.input_layout(index), net.layouts[index + 1]
    defines = net.window_defines(layer, src, dst)
    act = ACT_CODES[layer.activation]
    if layer.kind == LayerKind.CONCAT:
        copies, at = [], 0
        for s in net.net.sources(index):
            lay = net.layouts[s + 1]
            if not (s >= 0 and net.placed.get(s, (None,))[0] == index):
                d = {**net.window_defines(layer, lay, dst), "XC": lay.c, "COFF": at}
                grid = (net.batch * dst.h, dst.w, lay.c)
                launch = Launch(net.rt, SOURCE, "concat_copy", net._defines("concat_copy", d), grid,
                                lambda lim, g=grid: choose_local(g, CONV_SHAPES[net.device], lim))
                copies.append((launch, net.activations[s + 1]))
            at += lay.c
        placed = len(net.net.sources(index)) - len(copies)
        what = (f"concat ({placed} input(s) written in place by their producers"
                + (f", {len(copies)} copied into their slices)" if copies else ", no copy)"))
        return ConcatOp(net, index, copies, step_name(what, layer.activation))
    if layer.kind == LayerKind.MUL:
        gate = tuple(net.net.in_shapes(index)[1]) != tuple(net.net.in_shape(index))
        defines.update(_inputs_defines(net, index), GATE=int(gate))
        launch = _launch(net, "mul", defines, _grid(net, dst))
        return KernelOp(net, index, launch, (), step_name("gate multiply" if gate else "multiply", layer.activation))
    if layer.kind == LayerKind.CHANNELS:
        order = net.upload(np.asarray(layer.order, np.int32).view(np.float32), f"{layer.name} channel order")
        grid = (net.batch * dst.h, dst.w, dst.c)
        defines.update(XC=src.c)
        launch = Launch(net.rt, SOURCE, "gather", net._defines("gather", defines), grid,
                        lambda lim: choose_local(grid, CONV_SHAPES[net.device], lim))
        return KernelOp(net, index, launch, (order,), step_name("gather channels", layer.activation))
    if layer.kind == LayerKind.AVGPOOL:
        top, left, bottom, right = layer.padding
        defines.update(PT=top, PL=left, PB=bottom, PR=right, INCLUDE_PAD=int(layer.count_include_pad))
        launch = _launch(net, "avgpool", defines, _grid(net, dst))
        return KernelOp(net, index, launch, (), step_name("avgpool", layer.activation))
    if layer.kind == LayerKind.SOFTMAX:
        c, h, w = src.c, src.h, src.w
        defines.update(XC=c, FEATURES=c * h * w, ACT=act)
        launch = Launch(net.rt, SOURCE, "softmax", net._defines("softmax", defines), (net.batch,), (1,))
        return KernelOp(net, index, launch, (), "softmax")
    raise ValueError(f"{layer.name}: no zoo kernel for layer kind {layer.kind!r}")
