"""Attention's windows (Swin's, MaxViT's block and grid) cut from and put back into an (N, C, H, W) map,
for the peers whose tensors have `reshape` and `permute` (torch's, tinygrad's): the spec's order, as the
numpy backend's partition."""
from __future__ import annotations


def partition(x, win, grid: bool):
    """(N, C, H, W) -> (N, windows, n, C)."""
    n, c, h, w = x.shape
    wh, ww = win
    if grid:
        t = x.reshape(n, c, wh, h // wh, ww, w // ww).permute(0, 3, 5, 2, 4, 1)
    else:
        t = x.reshape(n, c, h // wh, wh, w // ww, ww).permute(0, 2, 4, 3, 5, 1)
    return t.reshape(n, (h // wh) * (w // ww), wh * ww, c)


def unpartition(t, shape, win, grid: bool):
    """(N, windows, n, C) -> (N, C, H, W) of `shape`."""
    n, c, h, w = shape
    wh, ww = win
    t = t.reshape(n, h // wh, w // ww, wh, ww, c)
    return (t.permute(0, 5, 3, 1, 4, 2) if grid else t.permute(0, 5, 1, 3, 2, 4)).reshape(n, c, h, w)
