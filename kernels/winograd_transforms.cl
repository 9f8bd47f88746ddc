// Winograd F(m x m, 3 x 3) as three launches, the tile products a batched
// GEMM (backends/handwritten/winograd_gemm.py): these are the first and the
// last, the transforms; kernels/winograd_gemm.cl is the middle one.
//
//   wg_input   V[e][q][t] = (B^T d_t B)[e] over input channels 4q .. 4q+3,
//              a float4; d_t the a x a patch of output tile t (a = m + 2)
//   (GEMM)     M[e][t][k] = sum over c of V[e][c][t] * U[e][c][k]
//   wg_output  y = act(A^T M_t A + bias (+ residual)) where tile t lies
//              inside the output (kw_store.h's epilogue, KW = 4)
//
// V is (E, XC4/4, TILES) float4s, each four channels of one tile, so the
// GEMM reads a slice of channels for consecutive tiles in one coalesced
// load; M is (E, TILES, YC4): four output channels of one tile a float4.
// Tiles past the input's stored rows and columns read zeros (as winograd.cl).
//
// -D constants: the layout ones of kernels/vectorised.cl (N, XC4, XHP, XWP,
// XPT, XPL, PT, PL, YC, YC4, YH, YW, YHP, YWP, YPT, YPL, ACT; RESIDUAL with
// RHP, RWP, RPT, RPL) and WM, the tile's side (2 or 4); PARTS, the GEMM's
// sum in that many parts (M then (PARTS, E, TILES, YC4), added up here);
// POOL 1: a 2x2 stride-2 max pool after the conv, done here (pool_fold.py),
// the conv's activation CONV_ACT applied before the max, the pool's ACT
// after, y the pool's output (YH, YW still the conv's; PHP, PWP, PPT, PPL
// the pool output's stored size and border).

#include "common.h"

#ifndef PARTS
#define PARTS 1
#endif
#ifndef POOL
#define POOL 0
#endif
#define WA (WM + 2)
#define E (WA * WA)
#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define KW 4
#include "kw_store.h"
#include "winograd_lines.h"

#define TILES_H ((YH + WM - 1) / WM)
#define TILES_W ((YW + WM - 1) / WM)
#define TILES (N * TILES_H * TILES_W)
#include "winograd_products.h"

// Tile t's image and its first output row and column (unsigned: see kernels/tiled_conv.cl).
#define TILE_AT(t, n, oy, ox) do { \
        const uint n_ = (t) / (TILES_H * TILES_W), r_ = (t) - n_ * (TILES_H * TILES_W); \
        const uint ty_ = r_ / TILES_W; \
        n = n_; oy = ty_ * WM; ox = (r_ - ty_ * TILES_W) * WM; } while (0)

// One work-item per (tile, four input channels); neighbouring work-items take
// neighbouring tiles, so each of the E stores is coalesced.
__kernel void wg_input(__global const float4* restrict x, __global float4* restrict v)
{
    const uint t = get_global_id(0), q = get_global_id(1);
    if (t >= TILES || q >= XV)
        return;
    uint n, oy, ox;
    TILE_AT(t, n, oy, ox);
    const uint r0 = oy + XPT - PT, c0 = ox + XPL - PL;   // the patch's first stored row and column
    const __global float4* xp = x + ((n * XHP + r0) * XWP + c0) * XV + q;
    float4 d[E];
    for (int i = 0; i < WA; i++)
        for (int j = 0; j < WA; j++)
            d[i * WA + j] = (r0 + i < XHP && c0 + j < XWP) ? xp[(i * XWP + j) * XV] : (float4)(0.0f);
    for (int j = 0; j < WA; j++)
        bt_line(d + j, WA);          // columns
    for (int i = 0; i < WA; i++)
        bt_line(d + i * WA, 1);      // rows
    for (int e = 0; e < E; e++)
        v[((size_t)e * XV + q) * TILES + t] = d[e];
}

// One work-item per (four output channels, tile): the tile's E products in,
// its m x m outputs with the epilogue out.
__kernel void wg_output(__global const float4* restrict mm,
                        __global const float4* restrict b,
#if RESIDUAL
                        __global const float4* restrict res,
#endif
                        __global float4* restrict y)
{
    const uint k4 = get_global_id(0), t = get_global_id(1);
    if (k4 >= YV || t >= TILES)
        return;
    vec out[WM * WM];
    output_tile(mm, t, k4, out);
    uint n, oy, ox;
    TILE_AT(t, n, oy, ox);
    const float4 bias = b[k4];
#if POOL
    // WM is even and tiles start at multiples of it, so each 2x2 window lies in one tile; a window
    // reaching past the conv's output is no pooled pixel (the pool rounds down)
    for (int i = 0; i < WM; i += 2)
        for (int j = 0; j < WM; j += 2) {
            if (oy + i + 1 >= YH || ox + j + 1 >= YW)
                continue;
            float4 m = activation4(out[i * WM + j] + bias, CONV_ACT);
            m = max4_keep_nan(m, activation4(out[i * WM + j + 1] + bias, CONV_ACT));
            m = max4_keep_nan(m, activation4(out[(i + 1) * WM + j] + bias, CONV_ACT));
            m = max4_keep_nan(m, activation4(out[(i + 1) * WM + j + 1] + bias, CONV_ACT));
            const uint yp = ((n * PHP + (oy + i) / 2 + PPT) * PWP + (ox + j) / 2 + PPL) * YV;
            store_kw(m, 4 * k4, y, yp);
        }
#else
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WM; j++) {
            if (oy + i >= YH || ox + j >= YW)
                continue;
            const uint yp = ((n * YHP + oy + i + YPT) * YWP + ox + j + YPL) * YV;
#if RESIDUAL
            const uint rp = ((n * RHP + oy + i + RPT) * RWP + ox + j + RPL) * YV;
#endif
            store_kw(out[i * WM + j] + bias, 4 * k4,
#if RESIDUAL
                     res, rp,
#endif
                     y, yp);
        }
#endif
}
