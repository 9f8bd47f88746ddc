"""The transformer's layers (issue 45) as PyTorch functions, as torch_layers.py
makes the others: layer normalisation over the channels is F.layer_norm on
the channels-last view, attention F.scaled_dot_product_attention (PyTorch's
fused kernel where it has one) on the windows, with the position bias and
Swin's shift mask as one additive mask (-inf where a key is left out); cosine
attention's queries and keys F.normalize'd first, each head's scale folded
into its queries."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nets import COSINE_EPS, LayerKind

from .windows import partition, unpartition


def _attention(torch, layer, p: dict, in_shape: tuple, dev) -> Callable:
    F = torch.nn.functional
    c3, h, w = in_shape
    c = c3 // 3
    heads, dh = layer.heads, c // layer.heads
    win = layer.windows(in_shape)
    shift = tuple(layer.shift)
    scale = layer.head_scale(in_shape)
    mask = None   # (windows or 1, heads or 1, n, n), added to the scores
    if layer.position_bias:
        mask = p["bias"][None]
    allowed = layer.keep(in_shape)
    if allowed is not None:
        keep = torch.from_numpy(np.where(allowed, 0.0, -np.inf).astype(np.float32)).to(dev)[:, None]
        mask = keep if mask is None else mask + keep
    cosine = p["cosine_scale"].reshape(heads, 1, 1) if layer.cosine else None

    def op(xs):
        x = xs[0]
        if any(shift):
            x = torch.roll(x, (-shift[0], -shift[1]), (2, 3))
        t = partition(x, win, layer.grid)                                      # (N, W, n, 3C)
        nb, nw, nt = t.shape[0], t.shape[1], t.shape[2]
        qkv = t.reshape(nb, nw, nt, 3, heads, dh).permute(3, 0, 1, 4, 2, 5)     # (3, N, W, heads, n, dh)
        q, k = qkv[0], qkv[1]
        if cosine is not None:
            q = F.normalize(q, dim=-1, eps=COSINE_EPS) * cosine
            k = F.normalize(k, dim=-1, eps=COSINE_EPS)
        o = F.scaled_dot_product_attention(q, k, qkv[2], attn_mask=mask, scale=scale)
        y = unpartition(o.permute(0, 1, 3, 2, 4).reshape(nb, nw, nt, c), (nb, c, h, w), win, layer.grid)
        return torch.roll(y, shift, (2, 3)) if any(shift) else y.contiguous()
    return op


def layer_fn(torch, layer, p: dict, in_shape: tuple, dev) -> Callable:
    """Layer `layer`, one of nets.TRANSFORMER_KINDS, as a function of the list of its
    inputs; `p` its parameters as tensors on `dev`.  Each returns a fresh tensor."""
    F = torch.nn.functional
    kind = layer.kind
    if kind == LayerKind.LAYERNORM:
        c = in_shape[0]

        def op(xs):
            return F.layer_norm(xs[0].permute(0, 2, 3, 1), (c,), p["scale"], p["bias"], layer.eps).permute(0, 3, 1, 2)
        return op
    if kind == LayerKind.TOKENS:
        def op(xs):
            x = xs[0].flatten(2)                                                # (N, C, H*W)
            if layer.class_token:
                x = torch.cat([p["cls"].view(1, -1, 1).expand(x.shape[0], -1, 1), x], 2)
            if layer.position:
                x = x + p["pos"]
            return x.unsqueeze(3).contiguous()
        return op
    if kind == LayerKind.TAKE_TOKEN:
        return lambda xs: xs[0][:, :, layer.index:layer.index + 1, :].contiguous()
    if kind == LayerKind.ATTENTION:
        return _attention(torch, layer, p, in_shape, dev)
    if kind == LayerKind.SPACE_TO_DEPTH:
        bh, bw = layer.block
        return lambda xs: torch.cat([xs[0][:, :, dy::bh, dx::bw] for dy, dx in layer.order], 1)
    if kind == LayerKind.CROP:
        top, left, bottom, right = layer.crop
        return lambda xs: xs[0][:, :, top:xs[0].shape[2] - bottom, left:xs[0].shape[3] - right].contiguous()
    raise ValueError(f"torch backend: unknown layer kind {kind!r}")
