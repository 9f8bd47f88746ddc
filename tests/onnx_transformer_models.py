"""Small PyTorch models in the shape of torchvision's transformer classifiers
(vit_b_16, swin_t, swin_v2_t, convnext_tiny, maxvit_t), built from torch.nn modules and
functions the way torchvision's forward passes compute (the same ops in the
same order, so the exported graphs have the same patterns), for
tests/test_onnx_transformer.py.  torchvision itself is not a test dependency."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class ViTBlock(nn.Module):
    """torchvision's EncoderBlock: ln_1, nn.MultiheadAttention (batch first, no weights), residual; ln_2, MLP."""

    def __init__(self, dim: int, heads: int, mlp: int, gelu: str = "none"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(approximate=gelu), nn.Dropout(0.0), nn.Linear(mlp, dim),
                                 nn.Dropout(0.0))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class TinyViT(nn.Module):
    """vit_b_16's forward: patch conv, (N, C, h*w) -> (N, T, C), class token, positions, blocks, ln, token 0, head."""

    def __init__(self, dim=16, heads=2, patch=4, image=(16, 16), blocks=2, classes=10, gelu="none"):
        super().__init__()
        self.patch = patch
        self.conv_proj = nn.Conv2d(3, dim, patch, patch)
        self.class_token = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.pos_embedding = nn.Parameter(torch.randn(1, (image[0] // patch) * (image[1] // patch) + 1, dim) * 0.1)
        self.layers = nn.Sequential(*[ViTBlock(dim, heads, 2 * dim, gelu) for _ in range(blocks)])
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        n, _, h, w = x.shape
        x = self.conv_proj(x)
        x = x.reshape(n, x.shape[1], (h // self.patch) * (w // self.patch)).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.ln(self.layers(x + self.pos_embedding))
        return self.head(x[:, 0])


class Permute(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


class LayerNorm2d(nn.LayerNorm):
    """torchvision's: a LayerNorm over the channels of an NCHW map, by permuting to channels-last and back."""

    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """torchvision's ConvNeXt block: depthwise 7x7, channels-last LayerNorm, Linear, GELU, Linear, back, scale, add."""

    def __init__(self, dim: int):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(dim, dim, 7, padding=3, groups=dim), Permute([0, 2, 3, 1]),
                                   nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, 4 * dim), nn.GELU(),
                                   nn.Linear(4 * dim, dim), Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(torch.rand(dim, 1, 1) + 0.5)

    def forward(self, x):
        return self.layer_scale * self.block(x) + x   # stochastic depth is the identity at inference


class TinyConvNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 4, 4), LayerNorm2d(8, eps=1e-6)), CNBlock(8),
            nn.Sequential(LayerNorm2d(8, eps=1e-6), nn.Conv2d(8, 16, 2, 2)), CNBlock(16))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(LayerNorm2d(16, eps=1e-6), nn.Flatten(1), nn.Linear(16, 10))

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


def _relative_index(ws: int) -> torch.Tensor:
    """Swin's relative position index of a ws x ws window: (ws*ws, ws*ws) into a (2ws-1)^2 table."""
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
    return (rel[..., 0] * (2 * ws - 1) + rel[..., 1]).flatten()


def shifted_window_attention(x, qkv, proj, table, index, heads: int, ws: int, shift: int):
    """Swin v1's window attention on a channels-last (B, H, W, C) map, in torchvision's order of operations."""
    b, h, w, c = x.shape
    pad_r, pad_b = (ws - w % ws) % ws, (ws - h % ws) % ws
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, ph, pw, _ = x.shape
    sh = 0 if ws >= ph else shift
    sw = 0 if ws >= pw else shift
    if sh + sw > 0:
        x = torch.roll(x, shifts=(-sh, -sw), dims=(1, 2))
    nw = (ph // ws) * (pw // ws)
    x = x.view(b, ph // ws, ws, pw // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, ws * ws, c)
    t = qkv(x).reshape(x.size(0), x.size(1), 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q, k, v = t[0], t[1], t[2]
    q = q * (c // heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1))
    n = ws * ws
    bias = table[index].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
    attn = attn + bias
    if sh + sw > 0:
        mask = x.new_zeros((ph, pw))
        count = 0
        for hs in ((0, -ws), (-ws, -sh), (-sh, None)):
            for wsl in ((0, -ws), (-ws, -sw), (-sw, None)):
                mask[hs[0]:hs[1], wsl[0]:wsl[1]] = count
                count += 1
        mask = mask.view(ph // ws, ws, pw // ws, ws).permute(0, 2, 1, 3).reshape(nw, n)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = attn.view(x.size(0) // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, n, n)
    attn = F.softmax(attn, dim=-1)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c)
    x = proj(x)
    x = x.view(b, ph // ws, pw // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
    if sh + sw > 0:
        x = torch.roll(x, shifts=(sh, sw), dims=(1, 2))
    return x[:, :h, :w, :].contiguous()


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, ws: int, shift: int):
        super().__init__()
        self.heads, self.ws, self.shift = heads, ws, shift
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.5)
        self.register_buffer("index", _relative_index(ws))
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + shifted_window_attention(self.norm1(x), self.qkv, self.proj, self.table, self.index, self.heads,
                                         self.ws, self.shift)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        x = torch.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)
        return self.reduction(self.norm(x))


class TinySwin(nn.Module):
    """swin_t's forward: patch conv, channels-last, LayerNorm, blocks (shift 0, then half the window), merging, ..."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 2, 2), Permute([0, 2, 3, 1]), nn.LayerNorm(8)),
            SwinBlock(8, 2, 4, 0), SwinBlock(8, 2, 4, 2), PatchMerging(8), SwinBlock(16, 2, 4, 2))
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.norm(self.features(x)).permute(0, 3, 1, 2)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _log_coords_table(ws: int) -> torch.Tensor:
    """Swin v2's (1, 2ws-1, 2ws-1, 2) table of relative offsets, scaled to +-8 and log-spaced."""
    r = torch.arange(-(ws - 1), ws, dtype=torch.float32)
    table = torch.stack(torch.meshgrid(r, r, indexing="ij"), dim=-1)[None] / (ws - 1) * 8
    return torch.sign(table) * torch.log2(table.abs() + 1.0) / 3.0


def cosine_window_attention(x, qkv, proj, logit_scale, bias, heads: int, ws: int, shift: int):
    """Swin v2's window attention on a channels-last (B, H, W, C) map, in torchvision's order of operations:
    the keys' bias zeroed, queries and keys normalised, their products times exp(min(logit_scale, log 100)),
    the position bias (16 sigmoid of an MLP's output, made by the caller) and the shift's mask added."""
    b, h, w, c = x.shape
    _, ph, pw, _ = x.shape
    sh = 0 if ws >= ph else shift
    sw = 0 if ws >= pw else shift
    if sh + sw > 0:
        x = torch.roll(x, shifts=(-sh, -sw), dims=(1, 2))
    nw = (ph // ws) * (pw // ws)
    x = x.view(b, ph // ws, ws, pw // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, ws * ws, c)
    qkv_bias = qkv.bias.clone()
    qkv_bias[c:2 * c].zero_()
    t = F.linear(x, qkv.weight, qkv_bias).reshape(x.size(0), x.size(1), 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q, k, v = t[0], t[1], t[2]
    attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(logit_scale, max=math.log(100.0)).exp()
    n = ws * ws
    attn = attn + bias
    if sh + sw > 0:
        mask = x.new_zeros((ph, pw))
        count = 0
        for hs in ((0, -ws), (-ws, -sh), (-sh, None)):
            for wsl in ((0, -ws), (-ws, -sw), (-sw, None)):
                mask[hs[0]:hs[1], wsl[0]:wsl[1]] = count
                count += 1
        mask = mask.view(ph // ws, ws, pw // ws, ws).permute(0, 2, 1, 3).reshape(nw, n)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = attn.view(x.size(0) // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, n, n)
    attn = F.softmax(attn, dim=-1)
    x = proj((attn @ v).transpose(1, 2).reshape(x.size(0), x.size(1), c))
    x = x.view(b, ph // ws, pw // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
    if sh + sw > 0:
        x = torch.roll(x, shifts=(sh, sw), dims=(1, 2))
    return x


class SwinV2Block(nn.Module):
    """Swin v2's block: cosine attention, and the norms after the attention and the MLP (post-norm)."""

    def __init__(self, dim: int, heads: int, ws: int, shift: int):
        super().__init__()
        self.heads, self.ws, self.shift = heads, ws, shift
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        # each head's logit scale, one above log 100 so the clamp matters
        scales = torch.linspace(math.log(5.0), math.log(200.0), heads).reshape(heads, 1, 1)
        self.logit_scale = nn.Parameter(scales)
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 32), nn.ReLU(inplace=True), nn.Linear(32, heads, bias=False))
        self.register_buffer("table", _log_coords_table(ws))
        self.register_buffer("index", _relative_index(ws))
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        n = self.ws * self.ws
        table = self.cpb_mlp(self.table).view(-1, self.heads)
        bias = 16 * torch.sigmoid(table[self.index].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0))
        x = x + self.norm1(cosine_window_attention(x, self.qkv, self.proj, self.logit_scale, bias, self.heads,
                                                   self.ws, self.shift))
        return x + self.norm2(self.mlp(x))


class PatchMergingV2(PatchMerging):
    """Swin v2's: the reduction, then the norm (of its output's width)."""

    def __init__(self, dim: int):
        super().__init__(dim)
        self.norm = nn.LayerNorm(2 * dim)

    def forward(self, x):
        x = torch.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)
        return self.norm(self.reduction(x))


class TinySwinV2(TinySwin):
    """swin_v2_t's forward: as swin_t's, its blocks and merging Swin v2's; after merging the 4x4 map is one
    window (unshifted)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 2, 2), Permute([0, 2, 3, 1]), nn.LayerNorm(8)),
            SwinV2Block(8, 2, 4, 0), SwinV2Block(8, 2, 4, 2), PatchMergingV2(8), SwinV2Block(16, 4, 4, 2))


class CosineTokens(nn.Module):
    """Cosine attention over a map's tokens, its queries and keys normalised along `axis` (-1: each head's
    channels, Swin v2's; -2: across the tokens, which is not cosine attention), each as the last axis."""

    def __init__(self, axis: int = -1, dim: int = 8, heads: int = 2):
        super().__init__()
        self.axis, self.heads = axis, heads
        self.patch = nn.Conv2d(3, dim, 2, 2)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.logit_scale = nn.Parameter(torch.log(torch.tensor([4.0, 12.0])).reshape(heads, 1, 1))

    def forward(self, x):
        x = self.patch(x)
        h, w = x.shape[2], x.shape[3]
        x = x.flatten(2).transpose(1, 2)                                               # (N, T, C)
        n, t, c = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        if self.axis == -1:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        else:   # along the last axis of the transposed: the tokens
            q, k = (F.normalize(a.transpose(-2, -1), dim=-1).transpose(-2, -1) for a in (q, k))
        attn = q @ k.transpose(-2, -1)
        attn = F.softmax(attn * torch.clamp(self.logit_scale, max=math.log(100.0)).exp(), dim=-1)
        return (attn @ v).transpose(1, 2).reshape(n, t, c).transpose(1, 2).reshape(n, c, h, w)


class SqueezeExcitation(nn.Module):
    def __init__(self, c: int, squeeze: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(F.silu(self.fc1(F.adaptive_avg_pool2d(x, 1)))))


class MBConv(nn.Module):
    """torchvision's MaxViT MBConv: a pre-norm BatchNorm, 1x1 + BN + GELU, depthwise 3x3 + BN + GELU,
    squeeze-and-excitation, 1x1; the shortcut an average pool and 1x1 when it downsamples."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        hidden = 4 * cout
        self.proj = (nn.Sequential(nn.AvgPool2d(3, stride, 1), nn.Conv2d(cin, cout, 1)) if stride != 1 or cin != cout
                     else nn.Identity())
        self.layers = nn.Sequential(
            nn.BatchNorm2d(cin), nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.GELU(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.GELU(),
            SqueezeExcitation(hidden, cout // 4), nn.Conv2d(hidden, cout, 1))

    def forward(self, x):
        return self.proj(x) + self.layers(x)


class RelativeAttention(nn.Module):
    """torchvision's RelativePositionalMultiHeadAttention on (B, G, P, D): to_qkv, chunk, heads, k scaled,
    einsum scores, the relative position bias, softmax, einsum with the values, merge."""

    def __init__(self, dim: int, heads: int, p: int):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.to_qkv, self.merge = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * p - 1) ** 2, heads) * 0.5)
        self.register_buffer("index", _relative_index(p))
        self.n = p * p

    def forward(self, x):
        b, g, p, d = x.shape
        q, k, v = torch.chunk(self.to_qkv(x), 3, dim=-1)
        q, k, v = (t.reshape(b, g, p, self.heads, self.dh).permute(0, 1, 3, 2, 4) for t in (q, k, v))
        k = k * self.dh ** -0.5
        scores = torch.einsum("BGHID,BGHJD->BGHIJ", q, k)
        bias = self.table[self.index.view(-1)].view(self.n, self.n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        weights = F.softmax(scores + bias, dim=-1)
        out = torch.einsum("BGHIJ,BGHJD->BGHID", weights, v).permute(0, 1, 3, 2, 4).reshape(b, g, p, d)
        return self.merge(out)


class PartitionAttention(nn.Module):
    """torchvision's PartitionAttentionLayer: windows (partition p) or a grid (partition H / p, then the
    window and token axes swapped), attention and an MLP on them, departitioned."""

    def __init__(self, dim: int, heads: int, p: int, size: int, grid: bool):
        super().__init__()
        self.grid = grid
        self.part = size // p if grid else p
        self.parts = size // self.part
        self.attn = nn.Sequential(nn.LayerNorm(dim), RelativeAttention(dim, heads, p))
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, c, h, w = x.shape
        q = self.part
        x = x.reshape(b, c, h // q, q, w // q, q).permute(0, 2, 4, 3, 5, 1).reshape(b, (h // q) * (w // q), q * q, c)
        if self.grid:
            x = x.swapaxes(-2, -3)
        x = x + self.attn(x)
        x = x + self.mlp(x)
        if self.grid:
            x = x.swapaxes(-2, -3)
        x = x.reshape(b, h // q, w // q, q, q, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, h, w)
        return x


class TinyMaxViT(nn.Module):
    """maxvit_t's forward: a stem, then per block MBConv, window attention and grid attention; a head of
    average pool, LayerNorm, Linear, tanh, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.GELU(),
                                  nn.Conv2d(8, 8, 3, 1, 1))
        self.blocks = nn.Sequential(MBConv(8, 16, 2), PartitionAttention(16, 2, 2, 8, False),
                                    PartitionAttention(16, 2, 2, 8, True))
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(16), nn.Linear(16, 16),
                                        nn.Tanh(), nn.Linear(16, 10, bias=False))

    def forward(self, x):
        return self.classifier(self.blocks(self.stem(x)))


MODELS = {"vit": (TinyViT, (3, 16, 16)), "convnext": (TinyConvNeXt, (3, 32, 32)), "swin": (TinySwin, (3, 16, 16)),
          "maxvit": (TinyMaxViT, (3, 32, 32)), "swin_v2": (TinySwinV2, (3, 16, 16))}
# models for the importer's own tests, not run on every backend
EXTRA = {"cosine_tokens": (CosineTokens, (3, 8, 8)), "cosine_across_tokens": (lambda: CosineTokens(axis=-2), (3, 8, 8)),
         # issue 54's odd ViT: width 80 in 5 heads, patches of 8 on a 40x56 image (5x7 tokens), tanh GELU
         "vit_odd": (lambda: TinyViT(dim=80, heads=5, patch=8, image=(40, 56), blocks=1, gelu="tanh"), (3, 40, 56))}


def export(name: str, path: str, x: np.ndarray, seed: int = 0, opset: int | None = None, dynamo: bool = False,
           fixed_batch: bool = False) -> np.ndarray:
    """Model `name` with seeded weights written to `path` as ONNX; PyTorch's output on `x`.  The batch a
    dynamic axis (traced at 1), or with `fixed_batch` x's own written into the graph, as an export at that batch
    writes it; `dynamo`: torch.export's exporter (which needs onnxscript), at x's batch, as it exports by default."""
    torch.manual_seed(seed)
    model = {**MODELS, **EXTRA}[name][0]()
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():   # batch norms with statistics of their own, so folding them is a real test
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.rand(m.num_features, generator=gen) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    model.eval()
    inp = torch.from_numpy(x)
    traced = inp if fixed_batch else inp[:1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the TorchScript exporter says it is deprecated; it needs no onnxscript
        if dynamo:
            import contextlib
            import io
            with contextlib.redirect_stdout(io.StringIO()):   # its progress lines
                torch.onnx.export(model, (inp,), path, dynamo=True, input_names=["image"], output_names=["out"],
                                  opset_version=opset, verbose=False)
        else:
            torch.onnx.export(model, traced, path, dynamo=False, input_names=["image"], output_names=["out"],
                              dynamic_axes=None if fixed_batch else {"image": {0: "n"}}, opset_version=opset)
    with torch.no_grad():
        return model(inp).numpy()
