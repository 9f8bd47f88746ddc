"""The transformer's layers (issue 45) for the TensorFlow peer, on NHWC tensors
(keras_layers.py builds the others): LayerNormalization over the channels,
the tokens by reshape and concat, attention over the windows by batched
matmuls (TensorFlow's own; cosine attention's queries and keys
l2_normalize'd first, each head's scale folded into its queries), patch
merging by strided slices.  Tokens are
(N, T, 1, C) here, our (C, T, 1) maps channels-last."""
from __future__ import annotations

import numpy as np

from nets import COSINE_EPS, LayerKind


def _partition(tf, x, win, grid):
    """(N, H, W, C) -> (N, windows, n, C), windows and tokens in the spec's order."""
    _, h, w, c = x.shape
    wh, ww = win
    if grid:
        t = tf.transpose(tf.reshape(x, (-1, wh, h // wh, ww, w // ww, c)), (0, 2, 4, 1, 3, 5))
    else:
        t = tf.transpose(tf.reshape(x, (-1, h // wh, wh, w // ww, ww, c)), (0, 1, 3, 2, 4, 5))
    return tf.reshape(t, (-1, (h // wh) * (w // ww), wh * ww, c))


def _unpartition(tf, t, h, w, win, grid):
    wh, ww = win
    c = t.shape[-1]
    t = tf.reshape(t, (-1, h // wh, w // ww, wh, ww, c))
    t = tf.transpose(t, (0, 3, 1, 4, 2, 5) if grid else (0, 1, 3, 2, 4, 5))
    return tf.reshape(t, (-1, h, w, c))


def _attention(tf, layer, params, in_shape):
    c3, h, w = in_shape
    c, heads = c3 // 3, layer.heads
    dh = c // heads
    win = layer.windows(in_shape)
    shift = tuple(layer.shift)
    added = layer.added_scores(in_shape, params.get("bias"))
    added = None if added is None else tf.constant(added[None])          # (1, windows or 1, heads, n, n)
    scale = layer.head_scale(in_shape)
    cosine = tf.constant(params["cosine_scale"].reshape(heads, 1, 1)) if layer.cosine else None

    def op(x):
        if any(shift):
            x = tf.roll(x, (-shift[0], -shift[1]), (1, 2))
        t = _partition(tf, x, win, layer.grid)                                # (N, W, n, 3C)
        nw, n = t.shape[1], t.shape[2]
        t = tf.transpose(tf.reshape(t, (-1, nw, n, 3, heads, dh)), (3, 0, 1, 4, 2, 5))   # (3, N, W, heads, n, dh)
        q, k = t[0], t[1]
        if cosine is not None:   # l2_normalize's epsilon bounds the squared norm
            q = tf.math.l2_normalize(q, axis=-1, epsilon=COSINE_EPS ** 2) * cosine
            k = tf.math.l2_normalize(k, axis=-1, epsilon=COSINE_EPS ** 2)
        s = tf.matmul(q, k, transpose_b=True) * scale
        if added is not None:
            s = s + added
        o = tf.matmul(tf.nn.softmax(s, axis=-1), t[2])                      # (N, W, heads, n, dh)
        y = _unpartition(tf, tf.reshape(tf.transpose(o, (0, 1, 3, 2, 4)), (-1, nw, n, c)), h, w, win, layer.grid)
        return tf.roll(y, shift, (1, 2)) if any(shift) else y
    return op


def parts(tf, keras, layer, params: dict, in_shape: tuple) -> list:
    """Layer `layer` of nets.TRANSFORMER_KINDS as callables applied in turn (before its activation)."""
    kind = layer.kind
    if kind == LayerKind.LAYERNORM:
        norm = keras.layers.LayerNormalization(axis=-1, epsilon=layer.eps)
        norm.build((None,) + tuple(in_shape[1:]) + (in_shape[0],))
        norm.set_weights([params["scale"], params["bias"]])
        return [norm]
    if kind == LayerKind.TOKENS:
        c, h, w = in_shape
        cls = tf.constant(params["cls"].reshape(1, 1, c)) if layer.class_token else None
        pos = tf.constant(np.ascontiguousarray(params["pos"].T)[None]) if layer.position else None

        def tokens(x):
            seq = tf.reshape(x, (-1, h * w, c))
            if cls is not None:
                seq = tf.concat([tf.tile(cls, (tf.shape(seq)[0], 1, 1)), seq], axis=1)
            if pos is not None:
                seq = seq + pos
            return seq[:, :, None, :]
        return [tokens]
    if kind == LayerKind.TAKE_TOKEN:
        return [lambda x: x[:, layer.index:layer.index + 1, :, :]]
    if kind == LayerKind.ATTENTION:
        return [_attention(tf, layer, params, in_shape)]
    if kind == LayerKind.SPACE_TO_DEPTH:
        bh, bw = layer.block
        return [lambda x: tf.concat([x[:, dy::bh, dx::bw, :] for dy, dx in layer.order], axis=-1)]
    if kind == LayerKind.CROP:
        top, left, bottom, right = layer.crop
        _, h, w = in_shape
        return [lambda x: x[:, top:h - bottom, left:w - right, :]]
    raise ValueError(f"tensorflow backend: unknown layer kind {kind!r}")
