"""The transformer's layers (issue 45) as tinygrad functions, NCHW as
tinygrad_layers.py's: layer normalisation on the channels-last view, the
windows by reshape and permute, attention by matmuls and softmax (tinygrad
fuses and searches them as the rest), the position bias and Swin's mask one
added constant; cosine attention's queries and keys divided by their norms
first, each head's scale folded into its queries; the exact gelu from
tinygrad's erf."""
from __future__ import annotations

from collections.abc import Callable


from nets import COSINE_EPS, LayerKind

from .windows import partition, unpartition


def gelu(y):
    return y * 0.5 * (1.0 + (y * 0.7071067811865476).erf())


def _attention(Tensor, layer, p: dict, in_shape: tuple, device: str) -> Callable:
    c3, h, w = in_shape
    c, heads = c3 // 3, layer.heads
    dh = c // heads
    win, shift = layer.windows(in_shape), tuple(layer.shift)
    added = layer.added_scores(in_shape, None if "bias" not in p else p["bias"].numpy())
    added = None if added is None else Tensor(added[None], device=device).realize()   # (1, W or 1, heads, n, n)
    scale = layer.head_scale(in_shape)
    cosine = p["cosine_scale"].reshape(heads, 1, 1) if layer.cosine else None

    def unit(t):
        return t / t.square().sum(-1, keepdim=True).sqrt().maximum(COSINE_EPS)

    def op(xs):
        x = xs[0]
        if any(shift):
            x = x.roll((-shift[0], -shift[1]), (2, 3))
        t = partition(x, win, layer.grid)
        nb, nw, nt = t.shape[0], t.shape[1], t.shape[2]
        qkv = t.reshape(nb, nw, nt, 3, heads, dh).permute(3, 0, 1, 4, 2, 5)
        q, k = qkv[0], qkv[1]
        if cosine is not None:
            q, k = unit(q) * cosine, unit(k)
        s = (q @ k.transpose(-1, -2)) * scale
        if added is not None:
            s = s + added
        o = s.softmax(-1) @ qkv[2]
        y = unpartition(o.permute(0, 1, 3, 2, 4).reshape(nb, nw, nt, c), (nb, c, h, w), win, layer.grid)
        return y.roll(shift, (2, 3)) if any(shift) else y
    return op


def layer_fn(Tensor, layer, p: dict, in_shape: tuple, device: str) -> Callable:
    """Layer `layer` of nets.TRANSFORMER_KINDS, before its activation; `p` its parameters as tensors."""
    kind = layer.kind
    if kind == LayerKind.LAYERNORM:
        def op(xs):
            y = xs[0].permute(0, 2, 3, 1).layernorm(axis=-1, eps=layer.eps) * p["scale"] + p["bias"]
            return y.permute(0, 3, 1, 2)
        return op
    if kind == LayerKind.TOKENS:
        def op(xs):
            x = xs[0].flatten(2)
            if layer.class_token:
                x = p["cls"].reshape(1, -1, 1).expand(x.shape[0], -1, 1).cat(x, dim=2)
            if layer.position:
                x = x + p["pos"]
            return x.unsqueeze(3)
        return op
    if kind == LayerKind.TAKE_TOKEN:
        return lambda xs: xs[0][:, :, layer.index:layer.index + 1, :]
    if kind == LayerKind.ATTENTION:
        return _attention(Tensor, layer, p, in_shape, device)
    if kind == LayerKind.SPACE_TO_DEPTH:
        bh, bw = layer.block
        return lambda xs: Tensor.cat(*[xs[0][:, :, dy::bh, dx::bw] for dy, dx in layer.order], dim=1)
    if kind == LayerKind.CROP:
        top, left, bottom, right = layer.crop
        _, h, w = in_shape
        return lambda xs: xs[0][:, :, top:h - bottom, left:w - right]
    raise ValueError(f"tinygrad backend: unknown layer kind {kind!r}")
