"""The float64 reference every backend is checked against.

Written from the layers' definitions, not for speed, and on purpose unlike
the numpy backend: convolution here is a sum of shifted inputs (one term per
filter tap, a dilated filter's taps spaced apart), pooling takes windows
explicitly, and an average pool's divisor is counted here from a mask of
the elements that count, where the numpy backend takes the spec's formula;
attention goes query by query, window by window (the numpy backend batches
every window and head into one product).  Its own tests are worked out
by hand (tests/test_oracle.py), and issue 7's TensorFlow cross-check tests
it against code we did not write.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nets import COSINE_EPS, Layer, LayerKind, Net


def activate(x: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "relu6":
        return np.minimum(np.maximum(x, 0.0), 6.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    if name == "hardsigmoid":   # PyTorch's: relu6(x + 3) / 6
        return np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0
    if name == "hardswish":
        return x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0
    if name == "silu":
        return x / (1.0 + np.exp(-x))
    if name == "gelu":   # x * Phi(x), Phi the standard normal's distribution function
        return x * 0.5 * (1.0 + _erf(x / np.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    return x


def _erf(x):
    """erf elementwise in float64 (numpy has none): math.erf, one value at a time."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _pad4(pad) -> tuple:
    """(rows, cols) or (top, left, bottom, right) -> numpy's pad widths for H and W."""
    top, left, bottom, right = tuple(pad) * 2 if len(pad) == 2 else tuple(pad)
    return ((0, 0), (0, 0), (top, bottom), (left, right))


def conv(x, weight, bias, stride=(1, 1), pad=(0, 0), groups=1, dilation=(1, 1)):
    """x (N,C,H,W), weight (K,C/groups,FH,FW) -> (N,K,OH,OW); cross-correlation,
    each group of K/groups kernels reading its own C/groups channels; tap
    (dy, dx) reads the input dilation * (dy, dx) from the window's corner."""
    x = np.pad(np.asarray(x, np.float64), _pad4(pad))
    weight = np.asarray(weight, np.float64)
    n, c, h, w = x.shape
    k, cg, fh, fw = weight.shape
    g = groups
    sh, sw = stride
    dh, dw = dilation
    oh, ow = (h - (fh - 1) * dh - 1) // sh + 1, (w - (fw - 1) * dw - 1) // sw + 1
    xg = x.reshape(n, g, cg, h, w)
    wg = weight.reshape(g, k // g, cg, fh, fw)
    out = np.zeros((n, g, k // g, oh, ow))
    for dy in range(fh):
        for dx in range(fw):
            y0, x0 = dy * dh, dx * dw
            tap = xg[:, :, :, y0:y0 + sh * (oh - 1) + 1:sh, x0:x0 + sw * (ow - 1) + 1:sw]   # (N,G,C/g,OH,OW)
            out += np.einsum("ngchw,gkc->ngkhw", tap, wg[:, :, :, dy, dx], optimize=True)  # sum over C/g
    return out.reshape(n, k, oh, ow) + np.asarray(bias, np.float64)[None, :, None, None]


def _windows(x, kernel, stride):
    """(N,C,H,W) -> (N,C,OH,OW,FH,FW) view of every pooling window."""
    win = sliding_window_view(np.asarray(x, np.float64), tuple(kernel), axis=(2, 3))
    return win[:, :, ::stride[0], ::stride[1]]


def subsample(x, coeff, bias, kernel=(2, 2), stride=(2, 2)):
    mean = _windows(x, kernel, stride).mean(axis=(4, 5))
    return mean * np.asarray(coeff, np.float64)[None, :, None, None] + np.asarray(bias, np.float64)[None, :, None, None]


def maxpool(x, kernel=(2, 2), stride=(2, 2), pad=(0, 0)):
    """Padding holds -inf, so it never wins."""
    x = np.pad(np.asarray(x, np.float64), _pad4(pad), constant_values=-np.inf)
    return _windows(x, kernel, stride).max(axis=(4, 5))


def avgpool(x, kernel, stride, pad=(0, 0), ceil_mode=False, count_include_pad=True):
    """Each window's sum over the elements that count.  The input is padded with
    zeros, and with more at the bottom and right for a ceil-mode window that
    runs past the padding; a mask padded the same way holds 1 where an element
    counts (the input, and the padding with count_include_pad; never the
    ceil-mode overhang), and its window sums are the divisors."""
    x = np.asarray(x, np.float64)
    n, c, h, w = x.shape
    (_, _), (_, _), (top, bottom), (left, right) = _pad4(pad)
    rows, cols = h + top + bottom, w + left + right
    oh = _ceil_or_floor(rows, kernel[0], stride[0], top + h, ceil_mode)
    ow = _ceil_or_floor(cols, kernel[1], stride[1], left + w, ceil_mode)
    more_rows = max(0, (oh - 1) * stride[0] + kernel[0] - rows)
    more_cols = max(0, (ow - 1) * stride[1] + kernel[1] - cols)
    widths = ((0, 0), (0, 0), (top, bottom + more_rows), (left, right + more_cols))
    padded = np.pad(x, widths)
    mask = np.zeros((1, 1) + padded.shape[2:])
    if count_include_pad:
        mask[..., :rows, :cols] = 1.0
    else:
        mask[..., top:top + h, left:left + w] = 1.0
    sums = _windows(padded, kernel, stride).sum(axis=(4, 5))[:, :, :oh, :ow]
    counts = _windows(mask, kernel, stride).sum(axis=(4, 5))[:, :, :oh, :ow]
    return sums / counts


def _ceil_or_floor(padded: int, k: int, s: int, last_start_below: int, ceil_mode: bool) -> int:
    """Windows along an axis of `padded` elements; in ceil mode one more where a
    window would be cut short, unless it would start at or past `last_start_below`
    (the end of the input: a window must start inside it or in the padding before)."""
    if not ceil_mode:
        return (padded - k) // s + 1
    out = -(-(padded - k) // s) + 1
    return out - 1 if (out - 1) * s >= last_start_below else out


def concat(xs):
    return np.concatenate([np.asarray(a, np.float64) for a in xs], axis=1)


def multiply(x, other):
    """Elementwise; an (N, C, 1, 1) `other` scales each channel of `x`."""
    return np.asarray(x, np.float64) * np.asarray(other, np.float64)


def channels(x, order):
    return np.asarray(x, np.float64)[:, list(order)]


def softmax(x):
    """Over each image's features, flattened in C, H, W order."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def global_avgpool(x):
    return np.asarray(x, np.float64).mean(axis=(2, 3), keepdims=True)


def batchnorm(x, scale, bias, mean, var, eps):
    def per_channel(a):
        return np.asarray(a, np.float64)[None, :, None, None]
    return (np.asarray(x, np.float64) - per_channel(mean)) / np.sqrt(per_channel(var) + eps) * per_channel(scale) \
        + per_channel(bias)


def dense(x, weight, bias):
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return x @ np.asarray(weight, np.float64) + np.asarray(bias, np.float64)


def layernorm(x, scale, bias, eps):
    """Over the channels (axis 1) of each pixel or token, variance biased (divided by C)."""
    x = np.asarray(x, np.float64)
    c = x.shape[1]
    mean = x.sum(axis=1, keepdims=True) / c
    var = ((x - mean) ** 2).sum(axis=1, keepdims=True) / c
    return (x - mean) / np.sqrt(var + eps) * np.asarray(scale, np.float64)[None, :, None, None] \
        + np.asarray(bias, np.float64)[None, :, None, None]


def tokens(x, cls=None, pos=None):
    """(N, C, H, W) -> (N, C, T, 1): the pixels row by row, after the class token, plus the positions."""
    x = np.asarray(x, np.float64)
    n, c, h, w = x.shape
    seq = [x[:, :, i, j] for i in range(h) for j in range(w)]             # each (N, C)
    if cls is not None:
        seq.insert(0, np.broadcast_to(np.asarray(cls, np.float64), (n, c)))
    out = np.stack(seq, axis=2)                                             # (N, C, T)
    if pos is not None:
        out = out + np.asarray(pos, np.float64)[None]
    return out[..., None]


def take_token(x, index):
    return np.asarray(x, np.float64)[:, :, index:index + 1, :]


def _window_members(h, w, window, grid):
    """Each window's tokens as a list of (row, col), row-major within the window."""
    wh, ww = window
    if grid:   # window (a, b) holds rows a, a + H/wh, ...; columns b, b + W/ww, ...
        sh, sw = h // wh, w // ww
        return [[(a + i * sh, b + j * sw) for i in range(wh) for j in range(ww)] for a in range(sh) for b in range(sw)]
    return [[(a * wh + i, b * ww + j) for i in range(wh) for j in range(ww)] for a in range(h // wh) for b in range(w // ww)]


def _shift_region(r, size, win, shift):
    """Swin's region of rolled row (column) r: 0 above the last row of windows, in it 1 for rows the roll
    did not bring round, 2 for those it did."""
    if not shift:
        return 0
    return 0 if r < size - win else (1 if r < size - shift else 2)


def attention(x, heads, window=(0, 0), shift=(0, 0), grid=False, bias=None, scale=0.0, cosine_scale=None):
    """x (N, 3C, H, W): queries, keys, values -> (N, C, H, W).  Token by token and head by head: the
    scores of each query against the keys of its window, softmax over them, the values' weighted sum.
    With `cosine_scale` (heads,), cosine attention: each query and key divided by its norm over the
    head's channels (at least COSINE_EPS) and the scores of head h multiplied by cosine_scale[h]."""
    x = np.asarray(x, np.float64)
    n, c3, h, w = x.shape
    c = c3 // 3
    dh = c // heads
    scale = scale or 1.0 / math.sqrt(dh)
    win = (h, w) if tuple(window) == (0, 0) else tuple(window)
    x = np.roll(x, (-shift[0], -shift[1]), axis=(2, 3))
    out = np.zeros((n, c, h, w))
    for members in _window_members(h, w, win, grid):
        rows = [r for r, _ in members]
        cols = [q for _, q in members]
        region = [(_shift_region(r, h, win[0], shift[0]), _shift_region(q, w, win[1], shift[1])) for r, q in members]
        for head in range(heads):
            ch = slice(head * dh, (head + 1) * dh)
            q = x[:, ch, rows, cols]                          # (N, dh, n)
            k = x[:, c:][:, ch, rows, cols]
            v = x[:, 2 * c:][:, ch, rows, cols]
            factor = scale
            if cosine_scale is not None:
                q = q / np.maximum(np.sqrt((q * q).sum(axis=1, keepdims=True)), COSINE_EPS)
                k = k / np.maximum(np.sqrt((k * k).sum(axis=1, keepdims=True)), COSINE_EPS)
                factor = float(np.asarray(cosine_scale, np.float64)[head])
            for i in range(len(members)):
                s = np.einsum("nd,ndj->nj", q[:, :, i], k) * factor
                if bias is not None:
                    s = s + np.asarray(bias, np.float64)[head, i]
                keep = np.array([region[j] == region[i] for j in range(len(members))])
                s = np.where(keep[None], s, -np.inf)
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p = p / p.sum(axis=1, keepdims=True)
                out[:, ch, rows[i], cols[i]] = np.einsum("nj,ndj->nd", p, v)
    return np.roll(out, (shift[0], shift[1]), axis=(2, 3))


def space_to_depth(x, block, order):
    x = np.asarray(x, np.float64)
    bh, bw = block
    return np.concatenate([x[:, :, dy::bh, dx::bw] for dy, dx in order], axis=1)


def crop(x, amounts):
    top, left, bottom, right = amounts
    x = np.asarray(x, np.float64)
    return x[:, :, top:x.shape[2] - bottom, left:x.shape[3] - right]


def layer_forward(layer: Layer, x, weights: dict[str, np.ndarray]) -> np.ndarray:
    """Layer `layer` on its input `x` (a list of arrays for a layer of several inputs)."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    p = {k.split(".", 1)[1]: v for k, v in weights.items() if k.split(".", 1)[0] == layer.name}
    if layer.kind == LayerKind.CONV:
        y = conv(xs[0], p["weight"], p["bias"], layer.stride, layer.pad, layer.groups, layer.dilation)
    elif layer.kind == LayerKind.SUBSAMPLE:
        y = subsample(xs[0], p["coeff"], p["bias"], layer.kernel, layer.stride)
    elif layer.kind == LayerKind.MAXPOOL:
        y = maxpool(xs[0], layer.kernel, layer.stride, layer.pad)
    elif layer.kind == LayerKind.DENSE:
        y = dense(xs[0], p["weight"], p["bias"])
    elif layer.kind == LayerKind.ADD:
        y = sum(np.asarray(a, np.float64) for a in xs)
    elif layer.kind == LayerKind.GLOBAL_AVGPOOL:
        y = global_avgpool(xs[0])
    elif layer.kind == LayerKind.BATCHNORM:
        y = batchnorm(xs[0], p["scale"], p["bias"], p["mean"], p["var"], layer.eps)
    elif layer.kind == LayerKind.AVGPOOL:
        y = avgpool(xs[0], layer.kernel, layer.stride, layer.pad, layer.ceil_mode, layer.count_include_pad)
    elif layer.kind == LayerKind.CONCAT:
        y = concat(xs)
    elif layer.kind == LayerKind.MUL:
        y = multiply(xs[0], xs[1])
    elif layer.kind == LayerKind.CHANNELS:
        y = channels(xs[0], layer.order)
    elif layer.kind == LayerKind.SOFTMAX:
        y = softmax(xs[0])
    elif layer.kind == LayerKind.LAYERNORM:
        y = layernorm(xs[0], p["scale"], p["bias"], layer.eps)
    elif layer.kind == LayerKind.TOKENS:
        y = tokens(xs[0], p.get("cls"), p.get("pos"))
    elif layer.kind == LayerKind.TAKE_TOKEN:
        y = take_token(xs[0], layer.index)
    elif layer.kind == LayerKind.ATTENTION:
        y = attention(xs[0], layer.heads, layer.window, layer.shift, layer.grid, p.get("bias"), layer.scale,
                      p["cosine_scale"] if layer.cosine else None)
    elif layer.kind == LayerKind.SPACE_TO_DEPTH:
        y = space_to_depth(xs[0], layer.block, layer.order)
    elif layer.kind == LayerKind.CROP:
        y = crop(xs[0], layer.crop)
    else:
        raise ValueError(f"oracle: unknown layer kind {layer.kind!r}")
    return activate(y, layer.activation)


def forward(net: Net, weights: dict[str, np.ndarray], x: np.ndarray) -> list[np.ndarray]:
    """Every layer's float64 output, each layer fed the outputs of the layers it names."""
    outs = []
    for i, layer in enumerate(net.layers):
        outs.append(layer_forward(layer, [x if s < 0 else outs[s] for s in net.sources(i)], weights))
    return outs
