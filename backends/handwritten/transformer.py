"""The transformer's layers (issue 45) in `vectorised` and `vectorised-tiled`
(kernels/vectorised_transformer.cl).

Tokens are (C, T, 1) maps, so the projections and the MLP are 1x1
convolutions, which these backends already run (as the blocked GEMM where
it measures faster), gelu in their epilogue as every activation.  Here:

  attention   one fused kernel: per work-group a tile of one window's and head's
              queries, each work-item one query; the keys and values pass through
              local memory a tile at a time, the softmax is online (a running max
              and sum rescale the weighted sum), so the scores are never written;
              cosine attention (Swin v2's) divides each query and key by its norm
              in the same kernel
  layernorm   one work-item per pixel or token, its channels contiguous (NHWC)
  tokens, take_token, space_to_depth, crop
              gather: a copy by address maps made at prepare (the class token and
              the position embedding added in it)

Every kernel addresses pixels by offsets the host works out from the
buffers' layouts (border, channel pitch, a concatenation's view), so none of
them cares how the layers around lay their buffers out.
"""
from __future__ import annotations

import numpy as np

from nets import COSINE_EPS, LayerKind
from nets.errors import Unsupported

from ..opencl.launch import ACT_CODES, Launch, step_name
from .layout import Layout
from .net import KernelOp

SOURCE = "vectorised_transformer.cl"
LOCAL = 64        # work-items a group for the gather and layernorm kernels (shrunk to the device's limits)
QUERY_TILE = 32   # queries a work-group of the attention kernel
KEY_TILE = 32     # keys a tile in local memory


def pixel_offsets(layout: Layout) -> np.ndarray:
    """(H*W,) each pixel's first channel, as an offset into one image's stored NHWC buffer."""
    rows, cols = np.meshgrid(np.arange(layout.h), np.arange(layout.w), indexing="ij")
    return (((rows + layout.pad_h) * layout.wp + cols + layout.pad_w) * layout.c_pitch + layout.c_offset).reshape(-1)


def image_floats(layout: Layout) -> int:
    return layout.hp * layout.wp * layout.c_pitch


def element_offsets(layout: Layout) -> np.ndarray:
    """(C, H*W): each logical element's offset into one image's stored NHWC buffer."""
    return pixel_offsets(layout)[None, :] + np.arange(layout.c)[:, None]


def _ints(net, values: np.ndarray, what: str):
    return net.upload(np.ascontiguousarray(values, np.int32).view(np.float32), what)


def _local(size: int) -> tuple:
    return (min(LOCAL, size), 1)


def _gather_maps(layer, src: Layout, dst: Layout, in_shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Per image: for each output element, the input offset it copies (the class token's channel c
    as -1 - c) and its own offset."""
    c, h, w = in_shape
    xs, ys = element_offsets(src), element_offsets(dst)   # (C, HW)
    if layer.kind == LayerKind.TOKENS:
        t = h * w + int(layer.class_token)
        read = np.empty((c, t), np.int64)
        if layer.class_token:
            read[:, 0] = -1 - np.arange(c)
        read[:, int(layer.class_token):] = xs
        return read.reshape(-1), ys.reshape(-1)
    if layer.kind == LayerKind.TAKE_TOKEN:
        return xs[:, layer.index], ys[:, 0]
    full = xs.reshape(c, h, w)
    if layer.kind == LayerKind.SPACE_TO_DEPTH:
        bh, bw = layer.block
        read = np.concatenate([full[:, dy::bh, dx::bw] for dy, dx in layer.order], axis=0)
    else:   # crop
        top, left, bottom, right = layer.crop
        read = full[:, top:h - bottom, left:w - right]
    return read.reshape(-1), ys.reshape(-1)


def transformer_op(net, index: int, layer, params: dict) -> KernelOp:
    """The op of a layer of nets.TRANSFORMER_KINDS in a VectorisedNet (or its tiled subclass)."""
    src, dst = net.input_layout(index), net.layouts[index + 1]
    in_shape = tuple(net.net.in_shape(index))
    act = ACT_CODES[layer.activation]
    if layer.kind == LayerKind.ATTENTION:
        return _attention(net, index, layer, params, src, dst, in_shape)
    if layer.kind == LayerKind.LAYERNORM:
        pixels = src.h * src.w
        defines = {"LAYERNORM": 1, "ACT": act, "C": src.c, "PIXELS": pixels, "XIMG": image_floats(src),
                   "YIMG": image_floats(dst)}
        launch = Launch(net.rt, SOURCE, "layernorm", defines, (pixels, net.batch), _local(pixels))
        args = (_ints(net, pixel_offsets(src), f"{layer.name} input pixels"),
                _ints(net, pixel_offsets(dst), f"{layer.name} output pixels"),
                net.upload(params["scale"], f"{layer.name} scale"), net.upload(params["bias"], f"{layer.name} bias"))
        return _EpsOp(net, index, launch, args, step_name("layernorm", layer.activation), layer.eps)
    read, write = _gather_maps(layer, src, dst, in_shape)
    defines = {"GATHER": 1, "ACT": act, "COUNT": len(read), "XIMG": image_floats(src), "YIMG": image_floats(dst)}
    dummy = np.zeros(1, np.float32)
    cls, pos = dummy, dummy
    if layer.kind == LayerKind.TOKENS:
        if layer.class_token:
            defines["CLS"], cls = 1, params["cls"]
        if layer.position:
            defines["POS"], pos = 1, params["pos"]
    launch = Launch(net.rt, SOURCE, "gather", defines, (len(read), net.batch), _local(len(read)))
    args = (_ints(net, read, f"{layer.name} input map"), _ints(net, write, f"{layer.name} output map"),
            net.upload(cls, f"{layer.name} class token"), net.upload(pos, f"{layer.name} positions"))
    what = {LayerKind.TOKENS: "tokens", LayerKind.TAKE_TOKEN: "take token", LayerKind.SPACE_TO_DEPTH: "space-to-depth",
            LayerKind.CROP: "crop"}[layer.kind]
    return KernelOp(net, index, launch, args, step_name(f"{what} (gather)", layer.activation))


class _EpsOp(KernelOp):
    """A kernel whose last argument is a float (layernorm's eps) after the output buffer."""

    def __init__(self, net, index, launch, args, step, eps: float):
        super().__init__(net, index, launch, args, step)
        self.args = self.args + (np.float32(eps),)


def _attention(net, index, layer, params, src: Layout, dst: Layout, in_shape: tuple) -> KernelOp:
    c = in_shape[0] // 3
    dh = c // layer.heads
    if dh % 4 or src.c_pitch % 4:
        raise Unsupported(f"layer {layer.name} has heads of {dh} channels; the fused attention kernel takes "
                          f"multiples of 4 (float4)")
    pixels = layer.window_pixels(in_shape)
    windows, nt = pixels.shape
    added = layer.added_scores(in_shape, params.get("bias"))
    qt = min(QUERY_TILE, -(-nt // 4) * 4)
    scale = layer.head_scale(in_shape)
    defines = {"ATTENTION": 1, "ACT": ACT_CODES["none"], "DH": dh, "NT": nt, "WINDOWS": windows, "HEADS": layer.heads,
               "C": c, "QT": qt, "KT": KEY_TILE, "XIMG": image_floats(src), "YIMG": image_floats(dst),
               "ADDED": 0 if added is None else added.shape[0], "SCALE": f"{scale!r}f",
               "COSINE": int(layer.cosine), "COSINE_EPS": f"{COSINE_EPS!r}f"}
    grid = (-(-nt // qt) * qt, windows * layer.heads, net.batch)
    launch = Launch(net.rt, SOURCE, "attention", defines, grid, (qt, 1, 1), exact=True)
    args = (_ints(net, pixel_offsets(src)[pixels.reshape(-1)], f"{layer.name} window pixels (input)"),
            _ints(net, pixel_offsets(dst)[pixels.reshape(-1)], f"{layer.name} window pixels (output)"),
            net.upload(added if added is not None else np.zeros(1, np.float32), f"{layer.name} added scores"))
    if layer.cosine:
        args += (net.upload(params["cosine_scale"], f"{layer.name} cosine scale"),)
    return KernelOp(net, index, launch, args, f"{'cosine ' if layer.cosine else ''}attention (fused: {windows} "
                                             f"window(s) x {layer.heads} heads of {nt} tokens, keys in tiles of "
                                             f"{KEY_TILE} in local memory)")
