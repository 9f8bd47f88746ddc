"""Winograd's minimal filtering F(m x m, 3 x 3) for 3x3 stride-1
convolutions (Lavin and Gray 2016, "Fast Algorithms for Convolutional Neural
Networks"): the matrices, the filter transform done once at prepare, and a
float64 numpy reference of the whole algorithm that the tests hold the
matrices to.  Plain arithmetic, no device.

An m x m output tile reads an a x a input patch, a = m + 2:
    Y = A^T [ (G g G^T) * (B^T d B) ] A
with g the 3x3 filter, d the patch and * the element-wise product; over the
input channels the products sum, so for each of the a^2 positions e the
layer is one GEMM (tiles x channels) x (channels x filters): the "batched
tile products".  F(2x2) does 16 multiplies per 4 outputs (2.25x fewer than
direct), F(4x4) 36 per 16 (4x fewer), at the price of larger transform
coefficients and so of more float32 rounding (benchmarks/winograd_error.py
measures it against the float64 oracle).

kernels/winograd_lines.h writes these same matrices out as its transforms
(bt_line, at_line); the tests check the kernel against the oracle and the
matrices against direct correlation here.
"""
from __future__ import annotations

import numpy as np

# points 0, 1, -1 (and infinity) for F(2, 3); 0, +-1, +-2 (and infinity) for F(4, 3)
MATRICES: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    2: (np.array([[1, 0, -1, 0],
                  [0, 1, 1, 0],
                  [0, -1, 1, 0],
                  [0, 1, 0, -1]], np.float64),                       # B^T, a x a
        np.array([[1, 0, 0],
                  [0.5, 0.5, 0.5],
                  [0.5, -0.5, 0.5],
                  [0, 0, 1]], np.float64),                           # G, a x 3
        np.array([[1, 1, 1, 0],
                  [0, 1, -1, -1]], np.float64)),                     # A^T, m x a
    4: (np.array([[4, 0, -5, 0, 1, 0],
                  [0, -4, -4, 1, 1, 0],
                  [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0],
                  [0, 2, -1, -2, 1, 0],
                  [0, 4, 0, -5, 0, 1]], np.float64),
        np.array([[1 / 4, 0, 0],
                  [-1 / 6, -1 / 6, -1 / 6],
                  [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6],
                  [1 / 24, -1 / 12, 1 / 6],
                  [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 1, 1, 0],
                  [0, 1, -1, 2, -2, 0],
                  [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], np.float64)),
}
TILE_SIZES = tuple(MATRICES)


def name(m: int) -> str:
    """How results and steps name the algorithm, e.g. 'F(2x2,3x3)'."""
    return f"F({m}x{m},3x3)"


def applies(layer, in_channels: int) -> bool:
    """Winograd F(m x m, 3 x 3) computes `layer`: a 3x3 stride-1 conv, not grouped, not dilated."""
    return (layer.kind == "conv" and tuple(layer.kernel) == (3, 3) and tuple(layer.stride) == (1, 1)
            and layer.groups == 1 and tuple(layer.dilation) == (1, 1) and in_channels >= 1)


def filter_transform(weight: np.ndarray, m: int, c_stored: int, k_stored: int) -> np.ndarray:
    """(K, C, 3, 3) -> U of shape (a*a, c_stored, k_stored), U[e][c][k] = (G g_kc G^T) at position e,
    computed in float64 and rounded once; zero where padded."""
    _, g_mat, _ = MATRICES[m]
    k, c = weight.shape[:2]
    u = np.einsum("ai,kcij,bj->abck", g_mat, np.asarray(weight, np.float64), g_mat)   # (a, a, C, K)
    a = m + 2
    out = np.zeros((a * a, c_stored, k_stored), np.float32)
    out[:, :c, :k] = u.reshape(a * a, c, k)
    return out


def conv3x3(x: np.ndarray, weight: np.ndarray, m: int) -> np.ndarray:
    """The reference: a 3x3 stride-1 unpadded correlation of x (C, H, W) with
    weight (K, C, 3, 3) by F(m x m, 3 x 3) in float64, output (K, H-2, W-2).
    Tiles past the edge read zeros and their outputs are dropped, as the kernel does."""
    b_t, g_mat, a_t = MATRICES[m]
    a = m + 2
    c, h, w = x.shape
    oh, ow = h - 2, w - 2
    th, tw = -(-oh // m), -(-ow // m)
    padded = np.zeros((c, th * m + 2, tw * m + 2))
    padded[:, :h, :w] = x
    u = np.einsum("ai,kcij,bj->abkc", g_mat, np.asarray(weight, np.float64), g_mat)
    out = np.zeros((weight.shape[0], th * m, tw * m))
    for i in range(th):
        for j in range(tw):
            d = padded[:, i * m:i * m + a, j * m:j * m + a]
            v = np.einsum("ai,cij,bj->abc", b_t, d, b_t)
            mm = np.einsum("abkc,abc->abk", u, v)
            out[:, i * m:(i + 1) * m, j * m:(j + 1) * m] = np.einsum("ia,abk,jb->kij", a_t, mm, a_t)
    return out[:, :oh, :ow]
