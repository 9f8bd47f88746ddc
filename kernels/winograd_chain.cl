// Winograd F(m x m, 3 x 3) as a batched GEMM (backends/handwritten/
// winograd_gemm.py): one conv's output transform that also does the input
// transform of the 3x3 conv after it (transform_chain.py), one launch for
// two, where the second conv alone reads the first and pads by one on
// every side (so both have the same tiles).
//
// A next tile's input window (a x a, a = m + 2) starts one pixel before the
// tile and ends one past it: it reaches into the eight tiles around it.  So a
// work-group takes a block of BT x BT tiles for KC float4s of channels:
//   1. each tile of the first conv's output that the block's windows reach
//      ((BT + 2)^2, those of the block and a ring around it, the ring's
//      computed here again) in: M's E products (adding up PARTS), out:
//      act(A^T M A + bias) into local memory, the pixels the windows read;
//      pixels outside the image stay 0, the second conv's zero padding;
//   2. each tile of the block: its window from local memory, V = B^T d B,
//      the E float4s stored as wg_input stores them.
// The first conv's output is not written: the second conv alone read it.
//
// -D constants: the first conv's N, YC, YC4, YH, YW, ACT (kernels/
// vectorised.cl's names); WM, the tile's side; PARTS as wg_output's; BT, the
// block's side in tiles; KC, the channel float4s a work-group; G, its
// work-items (a multiple of nothing: each phase loops over its items).
// M is (PARTS, E, TILES, YC4 / 4) float4s, V (E, YC4 / 4, TILES).

#include "common.h"

#ifndef PARTS
#define PARTS 1
#endif
#define WA (WM + 2)
#define E (WA * WA)
#define YV (YC4 / 4)
#define KW 4
#include "kw_store.h"
#include "winograd_lines.h"

#define TILES_H ((YH + WM - 1) / WM)
#define TILES_W ((YW + WM - 1) / WM)
#define TILES (N * TILES_H * TILES_W)
#include "winograd_products.h"
#define BLOCKS_H ((TILES_H + BT - 1) / BT)
#define BLOCKS_W ((TILES_W + BT - 1) / BT)
#define RT (BT + 2)        // the first conv's tiles the block's windows reach, a side
#define RS (WM * BT + 2)   // the pixels they read, a side: from one before the block to one past it

__kernel void wg_output_input(__global const float4* restrict mm,
                              __global const float4* restrict b,
                              __global float4* restrict v)
{
    __local float4 y[KC * RS * RS];
    const int lid = get_local_id(0), blk = get_group_id(0), cg = get_group_id(1);
    const int n = blk / (BLOCKS_H * BLOCKS_W), rb = blk - n * (BLOCKS_H * BLOCKS_W);
    const int by = rb / BLOCKS_W, bx = rb - by * BLOCKS_W;
    const int py0 = by * BT * WM - 1, px0 = bx * BT * WM - 1;   // the image's pixel at y[c][0][0]
    for (int i = lid; i < KC * RS * RS; i += G)
        y[i] = (float4)(0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int i = lid; i < KC * RT * RT; i += G) {
        const int r = i / KC, c = i - r * KC;   // channels fastest: one tile's are one coalesced load
        const int ry = r / RT, rx = r - ry * RT;
        const int ty = by * BT - 1 + ry, tx = bx * BT - 1 + rx;
        if (ty < 0 || tx < 0 || ty >= TILES_H || tx >= TILES_W)
            continue;
        const int k4 = cg * KC + c;
        const size_t t = ((size_t)n * TILES_H + ty) * TILES_W + tx;
        vec out[WM * WM];
        output_tile(mm, t, k4, out);
        const float4 bias = b[k4];
        for (int u = 0; u < WM; u++)
            for (int w = 0; w < WM; w++) {
                const int oy = ty * WM + u, ox = tx * WM + w;
                const int ly = oy - py0, lx = ox - px0;
                if (ly >= 0 && lx >= 0 && ly < RS && lx < RS && oy < YH && ox < YW)
                    y[(c * RS + ly) * RS + lx] = zero_tail(activate4(out[u * WM + w] + bias), k4);
            }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int i = lid; i < KC * BT * BT; i += G) {
        const int c = i / (BT * BT), s = i - c * (BT * BT);   // tiles fastest: each store coalesced
        const int sy = s / BT, sx = s - sy * BT;
        const int ty = by * BT + sy, tx = bx * BT + sx;
        if (ty >= TILES_H || tx >= TILES_W)
            continue;
        float4 d[E];
        for (int u = 0; u < WA; u++)
            for (int w = 0; w < WA; w++)
                d[u * WA + w] = y[(c * RS + sy * WM + u) * RS + sx * WM + w];
        for (int j = 0; j < WA; j++)
            bt_line(d + j, WA);          // columns
        for (int j = 0; j < WA; j++)
            bt_line(d + j * WA, 1);      // rows
        const size_t t = ((size_t)n * TILES_H + ty) * TILES_W + tx, q = cg * KC + c;
        for (int e = 0; e < E; e++)
            v[((size_t)e * YV + q) * TILES + t] = d[e];
    }
}
