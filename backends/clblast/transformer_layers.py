"""The transformer's layers (issue 45) in the CLBlast backends.  The
projections and the MLP are 1x1 convolutions, so they are already GEMMs
(layers.py); here is the rest:

  attention       per window and head, the scores S = scale * Q^T K as one GEMM
                  (Q and K are dh x n blocks of the NCHW map: transposed A), the
                  softmax over each query's keys with the position bias and the
                  shift's mask added (own kernel), and the weighted sum
                  O = V P^T (transposed B) written into the output; the GEMMs of
                  every image, window and head in one xGEMMBATCHED ("pointer"),
                  or one xGEMMSTRIDEDBATCHED a head ("strided"; refused where
                  CLBlast computes it wrong: strided.py); clblast-best
                  measures both.  Windows that are not the whole map are
                  gathered into contiguous blocks first and scattered back after
                  (own kernels; the shift's roll is in their indices); cosine
                  attention (Swin v2's) normalises each head's queries and keys
                  first, its scale in the queries (own kernel), so the scores'
                  GEMM is the same with alpha 1
  layernorm       layernorm (own kernel): CLBlast has no reduction over channels
  tokens          tokens (own kernel): the class token and the position embedding
  take_token      xCOPY of one token's channels (stride T), once per image
  space_to_depth, crop
                  gather (own kernel): a copy by an index map
gelu is an activation as the others: in the epilogue of the convolution's
own kernel, or the activate_inplace kernel (kernels/common.h).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from nets import COSINE_EPS

from ..opencl.launch import ACT_CODES, Launch
from .layers import ClblastOp, as_array
from .library import pyclblast
from .own_kernels import LOCAL_SIZE, own_step
from .strided import StridedGemm, require_right
from .tuned import COPY_KERNELS, GEMM_KERNELS

FILE = "transformer.cl"


def _launch(rt, name: str, activation: str, size: tuple, local: tuple, **defines) -> Launch:
    return Launch(rt, FILE, name, {"ACT": ACT_CODES[activation], **defines}, size, local)


def gather_indices(layer, in_shape: tuple) -> np.ndarray:
    """Per image, the flat (C, H, W) input index of each output element of a space-to-depth or a crop."""
    c, h, w = in_shape
    base = np.arange(c * h * w, dtype=np.int64).reshape(1, c, h, w)
    if layer.kind == "space_to_depth":
        bh, bw = layer.block
        out = np.concatenate([base[:, :, dy::bh, dx::bw] for dy, dx in layer.order], axis=1)
    else:
        top, left, bottom, right = layer.crop
        out = base[:, :, top:h - bottom, left:w - right]
    return out.reshape(-1).astype(np.int32)


class GatherOp(ClblastOp):
    """A copy by an index map (space-to-depth, crop) in one kernel of ours, the activation in it."""

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        in_shape = owner.net.in_shape(index)
        idx = gather_indices(layer, in_shape)
        self.index = owner.rt.upload(idx, f"index map of {layer.name}")
        owner.buffers.append(self.index)
        self.launch = _launch(self.rt, "gather_index", layer.activation, (len(idx), owner.batch), (LOCAL_SIZE, 1),
                              GATHER_INDEX=1, OUTN=len(idx), INN=int(np.prod(in_shape)))
        self.step = own_step(str(layer.kind).replace("_", "-"), layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_buf, self.index, self.out_buf))


class LayerNormOp(ClblastOp):
    """Layer normalisation over the channels of each pixel (NCHW: channel stride H*W) and the activation."""

    def __init__(self, owner, layer, index, in_buf, out_buf, params):
        super().__init__(owner, layer, index, in_buf, out_buf, separate_activation=False, sets=[])
        c, h, w = owner.net.in_shape(index)
        self.scale = owner.rt.upload(params["scale"], f"scale of {layer.name}")
        self.bias = owner.rt.upload(params["bias"], f"bias of {layer.name}")
        owner.buffers += [self.scale, self.bias]
        self.eps = np.float32(layer.eps)
        self.launch = _launch(self.rt, "layernorm", layer.activation, (h * w, owner.batch), (LOCAL_SIZE, 1), LN=1,
                              C=c, PIX=h * w, CS=h * w, PS=1, IMG=c * h * w, N=owner.batch)
        self.step = own_step("layernorm", layer.activation)
        self.recipe = [self.step]

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(self.in_buf, self.scale, self.bias, self.out_buf, self.eps))


class TokensOp(ClblastOp):
    """The class token and the position embedding (own kernel), then the activation."""

    def __init__(self, owner, layer, index, in_buf, out_buf, params):
        super().__init__(owner, layer, index, in_buf, out_buf, sets=[])
        c, h, w = owner.net.in_shape(index)
        t = owner.net.out_shape(index)[1]
        dummy = np.zeros(1, np.float32)
        self.cls = owner.rt.upload(params.get("cls", dummy), f"class token of {layer.name}")
        self.pos = owner.rt.upload(params.get("pos", dummy), f"position embedding of {layer.name}")
        owner.buffers += [self.cls, self.pos]
        self.launch = _launch(self.rt, "tokens", "none", (c * t, owner.batch), (LOCAL_SIZE, 1), TOKENS=1, C=c,
                              HW=h * w, T=t, CLS=int(layer.class_token), POS=int(layer.position), ICS=h * w, IPS=1,
                              OCS=t, OPS=1)
        self.recipe = ["tokens (own kernel)"] + self._activation_step()

    def enqueue(self, rec):
        rec.kernel("tokens (own kernel)", self.launch(self.in_buf, self.cls, self.pos, self.out_buf))
        self._activate(rec)


class TakeTokenOp(ClblastOp):
    """One token's C channels, T apart in the (C, T, 1) map: xCOPY with stride T, once per image."""

    kernels = COPY_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf):
        super().__init__(owner, layer, index, in_buf, out_buf, sets=[])
        c, t, _ = owner.net.in_shape(index)
        n = owner.batch
        self.c, self.t = c, t
        self.x = as_array(self.queue, in_buf, (n * c * t,))
        self.y = as_array(self.queue, out_buf, (n * c,))
        self.recipe = [f"xCOPY x {n} (stride {t}, once per image)"] + self._activation_step()

    def enqueue(self, rec):
        self.apply()
        with rec.library("xCOPY"):
            for i in range(self.batch):
                pyclblast.copy(self.queue, self.c, self.x, self.y, x_inc=self.t, y_inc=1,
                               x_offset=i * self.c * self.t + self.layer.index, y_offset=i * self.c)
        self._activate(rec)


class AttentionOp(ClblastOp):
    """Multi-head attention as two batched GEMMs around a softmax kernel (the module docstring);
    `batching`: "pointer" (one xGEMMBATCHED each) or "strided" (one xGEMMSTRIDEDBATCHED a head)."""

    kernels = GEMM_KERNELS

    def __init__(self, owner, layer, index, in_buf, out_buf, params, batching: str = "pointer", sets=None):
        in_shape = tuple(owner.net.in_shape(index))
        c3, h, w = in_shape
        c = c3 // 3
        heads = layer.heads
        dh = c // heads
        pixels = layer.window_pixels(in_shape)                  # (windows, n)
        nw, n = pixels.shape
        from .problems import gemm
        super().__init__(owner, layer, index, in_buf, out_buf, sets=sets,
                         problem=gemm(n, n, dh, owner.batch * nw * heads))
        rt, batch = owner.rt, owner.batch
        self.batching = batching
        self.geometry = (batch * nw, heads, n, dh, c)
        self.windowed = nw > 1 or any(layer.shift)
        self.steps: list[str] = []
        if self.windowed:   # (N, 3C, HW) -> (N * nw, 3C, n): each window's tokens side by side
            idx = (np.arange(c3)[None, :, None] * (h * w) + pixels[:, None, :]).reshape(-1).astype(np.int32)
            inv = np.empty(h * w, np.int64)
            inv[pixels.reshape(-1)] = np.arange(nw * n)                # pixel -> window * n + token
            win_of, tok_of = inv // n, inv % n
            back = ((win_of[None, :] * c + np.arange(c)[:, None]) * n + tok_of[None, :]).reshape(-1).astype(np.int32)
            self.gather_idx = rt.upload(idx, f"window map of {layer.name}")
            self.scatter_idx = rt.upload(back, f"window map back of {layer.name}")
            self.qkv_w = owner.alloc(batch * idx.size * 4, f"windows of {layer.name}")
            self.out_w = owner.alloc(batch * back.size * 4, f"windows' output of {layer.name}")
            owner.buffers += [self.gather_idx, self.scatter_idx]
            self.gather = _launch(rt, "gather_index", "none", (idx.size, batch), (LOCAL_SIZE, 1), GATHER_INDEX=1,
                                  OUTN=idx.size, INN=c3 * h * w)
            self.scatter = _launch(rt, "gather_index", "none", (back.size, batch), (LOCAL_SIZE, 1), GATHER_INDEX=1,
                                   OUTN=back.size, INN=back.size)
            self.steps.append("window partition (own kernel)")
        src, dst = (self.qkv_w, self.out_w) if self.windowed else (in_buf, out_buf)
        groups = batch * nw
        self.cosine = None
        if layer.cosine:   # into the windows' buffer in place, or from the input into a copy of its own
            self.unit = src if self.windowed else owner.alloc(batch * c3 * h * w * 4, f"unit queries of {layer.name}")
            self.cosine_scale = rt.upload(params["cosine_scale"], f"cosine scale of {layer.name}")
            owner.buffers.append(self.cosine_scale)
            self.cosine = _launch(rt, "cosine_qk", "none", (n, heads, groups), (LOCAL_SIZE, 1, 1), COSINE_QK=1, C=c,
                                  NT=n, DH=dh, COPY_V=int(not self.windowed), COSINE_EPS=f"{COSINE_EPS!r}f")
            self.cosine_from, src = src, self.unit
            self.steps.append("cosine normalisation (own kernel)")
        self.scores = owner.alloc(groups * heads * n * n * 4, f"scores of {layer.name}")
        added = layer.added_scores(in_shape, params.get("bias"))
        self.added = rt.upload(added if added is not None else np.zeros(1, np.float32), f"added scores of {layer.name}")
        owner.buffers.append(self.added)
        self.softmax = _launch(rt, "softmax_rows", "none", (groups * heads * n,), (LOCAL_SIZE,), SOFTMAX_ROWS=1,
                               ROWS=groups * heads * n, M=n,
                               ADDED_ROWS=0 if added is None else added.shape[0] * heads * n)
        q = self.queue
        self.qkv = as_array(q, src, (groups * c3, n))      # pyclblast takes matrices: rows of n tokens
        self.s = as_array(q, self.scores, (groups * heads * n, n))
        self.o = as_array(q, dst, (groups * c, n))
        self.scale = float(layer.head_scale(in_shape))
        blocks = [(g, hd) for g in range(groups) for hd in range(heads)]
        self.q_off = [(g * c3 + hd * dh) * n for g, hd in blocks]
        self.k_off = [(g * c3 + c + hd * dh) * n for g, hd in blocks]
        self.v_off = [(g * c3 + 2 * c + hd * dh) * n for g, hd in blocks]
        self.s_off = [(g * heads + hd) * n * n for g, hd in blocks]
        self.o_off = [(g * c + hd * dh) * n for g, hd in blocks]
        gemm_step = "xGEMMBATCHED" if batching == "pointer" else "xGEMMSTRIDEDBATCHED"
        count = f"{len(blocks)} GEMMs" if batching == "pointer" else f"{heads} calls of {groups} GEMMs"
        self.gemm_step = gemm_step
        self.steps += [f"{gemm_step} (scores: {count} {n}x{n}x{dh})", "softmax (own kernel)",
                       f"{gemm_step} (weighted sum: {count} {dh}x{n}x{n})"]
        if self.windowed:
            self.steps.append("window merge (own kernel)")
        self.recipe = self.steps + self._activation_step()
        if batching == "strided":   # a geometry CLBlast gets wrong is refused here (strided.py)
            self.apply()
            for call in self._strided_calls(True) + self._strided_calls(False):
                require_right(self.queue, owner.rt.device, call)

    def _product(self, first: bool) -> tuple:
        """(A, B, C, alpha, each block's offsets in A, B and C, the GEMM with the "strided" batching's strides)."""
        groups, heads, n, dh, c = self.geometry
        if first:   # S (n x n) = scale * Q^T K, Q and K stored dh x n
            return (self.qkv, self.qkv, self.s, self.scale, (self.q_off, self.k_off, self.s_off),
                    StridedGemm(n, n, dh, n, n, n, (3 * c * n, 3 * c * n, heads * n * n), (0, 0, 0), True, False))
        # O (dh x n) = V P^T, V stored dh x n, P n x n
        return (self.qkv, self.s, self.o, 1.0, (self.v_off, self.s_off, self.o_off),
                StridedGemm(dh, n, n, n, n, n, (3 * c * n, heads * n * n, c * n), (0, 0, 0), False, True))

    def _strided_calls(self, first: bool) -> list[StridedGemm]:
        """The "strided" batching's calls of one product: one a head, over the groups."""
        *_, offsets, gemm = self._product(first)
        return [replace(gemm, offsets=(offsets[0][hd], offsets[1][hd], offsets[2][hd]))
                for hd in range(self.geometry[1])]

    def _products(self, first: bool) -> None:
        a, b, out, alpha, offsets, g = self._product(first)
        q = self.queue
        if self.batching == "pointer":
            count = len(offsets[0])
            pyclblast.gemmBatched(q, g.m, g.n, g.k, a, b, out, [alpha] * count, [0.0] * count, g.lda, g.ldb, g.ldc,
                                  *offsets, a_transp=g.a_transp, b_transp=g.b_transp)
            return
        for call in self._strided_calls(first):
            pyclblast.gemmStridedBatched(q, g.m, g.n, g.k, self.geometry[0], a, b, out, g.lda, g.ldb, g.ldc,
                                         *call.strides, alpha=alpha, beta=0.0, a_transp=g.a_transp,
                                         b_transp=g.b_transp, a_offset=call.offsets[0], b_offset=call.offsets[1],
                                         c_offset=call.offsets[2])

    def enqueue(self, rec):
        self.apply()
        if self.windowed:
            rec.kernel("window partition (own kernel)", self.gather(self.in_buf, self.gather_idx, self.qkv_w))
        if self.cosine is not None:
            rec.kernel("cosine normalisation (own kernel)",
                       self.cosine(self.cosine_from, self.cosine_scale, self.unit))
        with rec.library(self.gemm_step):
            self._products(True)
        rec.kernel("softmax (own kernel)", self.softmax(self.scores, self.added))
        with rec.library(self.gemm_step):
            self._products(False)
        if self.windowed:
            rec.kernel("window merge (own kernel)", self.scatter(self.out_w, self.scatter_idx, self.out_buf))
        self._activate(rec)


def attention_problem(net, batch: int, index: int):
    """The scores' GEMM problem of attention layer `index` (its tuning's key)."""
    from .problems import gemm
    layer, in_shape = net.layers[index], tuple(net.in_shape(index))
    nw, n = layer.window_pixels(in_shape).shape
    return gemm(n, n, in_shape[0] // 3 // layer.heads, batch * nw * layer.heads)


def transformer_op(owner, layer, index, srcs, out, params, batching: str = "pointer", sets=None):
    """The op of a layer of nets.TRANSFORMER_KINDS."""
    kind, src = layer.kind, srcs[0]
    if kind == "attention":
        return AttentionOp(owner, layer, index, src, out, params, batching, sets)
    if kind == "layernorm":
        return LayerNormOp(owner, layer, index, src, out, params)
    if kind == "tokens":
        return TokensOp(owner, layer, index, src, out, params)
    if kind == "take_token":
        return TakeTokenOp(owner, layer, index, src, out)
    return GatherOp(owner, layer, index, src, out)
