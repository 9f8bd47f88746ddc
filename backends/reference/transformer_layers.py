"""The numpy backend's transformer layers (issue 45), float32.

Attention batches every window and head into one product each (scores, then
the weighted sum), unlike the oracle's query-by-query loop, so the two check
each other.  gelu's erf is Abramowitz and Stegun's 7.1.26 (absolute error
under 1.5e-7; numpy has no erf).
"""
from __future__ import annotations

import numpy as np

from nets import COSINE_EPS, LayerKind


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float32, Abramowitz and Stegun 7.1.26."""
    a = np.abs(x)
    t = np.float32(1) / (np.float32(1) + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (np.float32(1.421413741)
                + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return np.sign(x) * (np.float32(1) - poly * np.exp(-a * a))


def gelu(y: np.ndarray) -> np.ndarray:
    return y * np.float32(0.5) * (np.float32(1) + erf(y * np.float32(1 / np.sqrt(2))))


def gelu_tanh(y: np.ndarray) -> np.ndarray:
    inner = np.float32(np.sqrt(2 / np.pi)) * (y + np.float32(0.044715) * y * y * y)
    return np.float32(0.5) * y * (np.float32(1) + np.tanh(inner))


def layernorm(x, scale, bias, eps):
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    d /= np.sqrt(var + np.float32(eps))
    return d * scale[None, :, None, None] + bias[None, :, None, None]


def tokens(x, params, layer):
    n, c, h, w = x.shape
    seq = x.reshape(n, c, h * w)
    if layer.class_token:
        seq = np.concatenate([np.broadcast_to(params["cls"][None, :, None], (n, c, 1)), seq], axis=2)
    if layer.position:
        seq = seq + params["pos"][None]
    return np.ascontiguousarray(seq[..., None], dtype=np.float32)


def partition(x, win, grid):
    """(N, C, H, W) -> (N, windows, tokens, C), windows and their tokens in the oracle's order."""
    n, c, h, w = x.shape
    wh, ww = win
    if grid:   # row i * (H / wh) + a of window a
        t = x.reshape(n, c, wh, h // wh, ww, w // ww).transpose(0, 3, 5, 2, 4, 1)
    else:
        t = x.reshape(n, c, h // wh, wh, w // ww, ww).transpose(0, 2, 4, 3, 5, 1)
    return t.reshape(n, -1, wh * ww, c)


def unpartition(t, shape, win, grid):
    n, c, h, w = shape
    wh, ww = win
    if grid:
        return t.reshape(n, h // wh, w // ww, wh, ww, c).transpose(0, 5, 3, 1, 4, 2).reshape(shape)
    return t.reshape(n, h // wh, w // ww, wh, ww, c).transpose(0, 5, 1, 3, 2, 4).reshape(shape)


def attention(x, layer, params):
    n, c3, h, w = x.shape
    c = c3 // 3
    heads, dh = layer.heads, c // layer.heads
    win = layer.windows(x.shape[1:])
    x = np.roll(x, (-layer.shift[0], -layer.shift[1]), axis=(2, 3)) if any(layer.shift) else x
    t = partition(x, win, layer.grid)                                           # (N, W, n, 3C)
    nw, nt = t.shape[1], t.shape[2]
    qkv = t.reshape(n, nw, nt, 3, heads, dh).transpose(3, 0, 1, 4, 2, 5)         # (3, N, W, heads, n, dh)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if layer.cosine:   # each head's query and key normalised, its scale folded into the query
        q = q * (params["cosine_scale"][:, None, None] / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True),
                                                                      np.float32(COSINE_EPS)))
        k = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), np.float32(COSINE_EPS))
    s = q @ k.swapaxes(-1, -2)                                                  # (N, W, heads, n, n)
    s *= np.float32(layer.head_scale(x.shape[1:]))
    if layer.position_bias:
        s += params["bias"]
    mask = layer.keep(x.shape[1:])
    if mask is not None:
        s = np.where(mask[None, :, None], s, np.float32(-np.inf))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    o = (s @ v).transpose(0, 1, 3, 2, 4).reshape(n, nw, nt, c)                  # heads side by side
    y = unpartition(o, (n, c, h, w), win, layer.grid)
    y = np.roll(y, layer.shift, axis=(2, 3)) if any(layer.shift) else y
    return np.ascontiguousarray(y, dtype=np.float32)


def space_to_depth(x, layer):
    bh, bw = layer.block
    return np.concatenate([x[:, :, dy::bh, dx::bw] for dy, dx in layer.order], axis=1)


def crop(x, layer):
    top, left, bottom, right = layer.crop
    return np.ascontiguousarray(x[:, :, top:x.shape[2] - bottom, left:x.shape[3] - right])


def run(layer, params, xs):
    """Layer `layer` (one of nets.TRANSFORMER_KINDS) on its inputs, before its activation."""
    x = xs[0]
    if layer.kind == LayerKind.LAYERNORM:
        return layernorm(x, params["scale"], params["bias"], layer.eps)
    if layer.kind == LayerKind.TOKENS:
        return tokens(x, params, layer)
    if layer.kind == LayerKind.TAKE_TOKEN:
        return np.ascontiguousarray(x[:, :, layer.index:layer.index + 1, :])
    if layer.kind == LayerKind.ATTENTION:
        return attention(x, layer, params)
    if layer.kind == LayerKind.SPACE_TO_DEPTH:
        return space_to_depth(x, layer)
    if layer.kind == LayerKind.CROP:
        return crop(x, layer)
    raise ValueError(f"numpy backend: unknown layer kind {layer.kind!r}")
