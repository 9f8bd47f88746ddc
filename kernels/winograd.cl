// Winograd F(m x m, 3 x 3) for a 3x3 stride-1 convolution, in one kernel,
// on `vectorised`'s NHWC float4 buffers with their zero borders
// (backends/handwritten/winograd_math.py has the matrices and the algebra).
//
// The output is cut into m x m tiles, each reading an a x a input patch
// (a = m + 2).  A work-group takes TT = TG * RT tiles and KG * KW output
// channels; over the input channels, a chunk of TC at a time, it
//  1. transforms the chunk's patches, V = B^T d B, float4 over four input
//     channels, into local memory (Vs), the work-items taking the TT x TC/4
//     patches in turn;
//  2. after the barrier, the batched tile products: for each of the a^2
//     positions e, each work-item adds V[e][c] (its RT tiles) times
//     U[e][c][its KW channels] into its accumulators acc[r][e]; U = G g G^T
//     is transformed at prepare (host, float64) and laid out (a^2, XC4, KP);
// and at the end each work-item takes its accumulators through the output
// transform, Y = A^T M A, in registers, with the bias, the residual add
// (RESIDUAL) and the activation, and writes the tile's pixels that lie
// inside the output.  No scratch buffer, one launch.
//
// A patch's rows and columns past the stored input (the last tiles of a
// size that m does not divide) read as zeros: every output of a tile is a
// sum over the whole patch, so a NaN or a neighbour's pixel there would
// reach outputs that are kept.
//
// -D constants, besides the layout ones of kernels/vectorised.cl (N, XC4,
// XHP, XWP, XPT, XPL, PT, PL, YC, YC4, YH, YW, YHP, YWP, YPT, YPL, ACT;
// RESIDUAL with RHP, RWP, RPT, RPL):
//   WM          the output tile's side m: 2 or 4
//   KW          output channels per work-item: 4 (float4) or 8 (float8)
//   KG, TG, PG  the work-group: KG work-items along the channels, TG along the
//               tiles, PG along the a^2 positions (a divisor of a^2)
//   RT          tiles per work-item
//   TC          input channels per chunk (a multiple of 4 that divides XC4)
//   KP          output channels of U and of the bias as stored: a multiple of KG * KW

#include "common.h"

#define WA (WM + 2)                      // the patch's side
#define E (WA * WA)                      // positions: the batch of tile products
#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define TILES_H ((YH + WM - 1) / WM)
#define TILES_W ((YW + WM - 1) / WM)
#define TILES (N * TILES_H * TILES_W)
#define TT (TG * RT)                     // tiles per work-group
#define QC (TC / 4)                      // float4s of input channels per chunk
#define EP (E / PG)                      // positions per work-item
#define THREADS (KG * TG * PG)

#include "kw_store.h"

#include "winograd_lines.h"

// Tile t's image and its first output row and column.
#define TILE_AT(t, n, oy, ox) do { \
        const uint n_ = (t) / (TILES_H * TILES_W), r_ = (t) - n_ * (TILES_H * TILES_W); \
        const uint ty_ = r_ / TILES_W; \
        n = n_; oy = ty_ * WM; ox = (r_ - ty_ * TILES_W) * WM; } while (0)

// 1. The input transform of one chunk (channels c0 .. c0 + TC) of the work-group's
// patches into Vs, float4 over four input channels; the work-items take the
// TT x QC patches in turn, neighbours neighbouring tiles.
inline void transform_chunk(__global const float4* restrict x, __local float4 (*Vs)[QC][TT], const int c0,
                            const uint t0, const uint tid)
{
    // unsigned: LLVM then splits the division from the remainder without a `freeze`,
    // an instruction Oclgrind's uninitialised-value check cannot run (kernels/tiled_conv.cl)
    for (uint task = tid; task < TT * QC; task += THREADS) {
        const uint q = task / TT, tl = task - q * TT;
        const uint t = t0 + tl;
        float4 d[E];
        if (t < TILES) {
            uint n, oy, ox;
            TILE_AT(t, n, oy, ox);
            // the patch's first stored row and column (the border holds the layer's padding)
            const uint r0 = oy + XPT - PT, cc0 = ox + XPL - PL;
            const __global float4* xp = x + ((n * XHP + r0) * XWP + cc0) * XV + c0 / 4 + q;
            for (int i = 0; i < WA; i++)
                for (int j = 0; j < WA; j++)
                    d[i * WA + j] = (r0 + i < XHP && cc0 + j < XWP) ? xp[(i * XWP + j) * XV] : (float4)(0.0f);
            for (int j = 0; j < WA; j++)
                bt_line(d + j, WA);          // columns
            for (int i = 0; i < WA; i++)
                bt_line(d + i * WA, 1);      // rows
        } else {
            for (int e = 0; e < E; e++)
                d[e] = (float4)(0.0f);
        }
        for (int e = 0; e < E; e++)
            Vs[e][q][tl] = d[e];
    }
}

// acc[r] += V[e][q] (tile r * TG + tg) x U[e][c0 + 4q .. c0 + 4q + 3][k0 .. k0 + KW], over the
// RT tiles; `ue` points at U[e][c0 + 4q][k0].  Each U vector loaded once for RT tiles.
#define PRODUCT(acc, e, q, ue) do { \
        const vec u0_ = VLOAD(0, ue), u1_ = VLOAD(0, (ue) + KP), u2_ = VLOAD(0, (ue) + 2 * KP), \
                  u3_ = VLOAD(0, (ue) + 3 * KP); \
        for (int r_ = 0; r_ < RT; r_++) { \
            const float4 v_ = Vs[e][q][r_ * TG + tg]; \
            acc[r_] = mad((vec)(v_.x), u0_, acc[r_]); \
            acc[r_] = mad((vec)(v_.y), u1_, acc[r_]); \
            acc[r_] = mad((vec)(v_.z), u2_, acc[r_]); \
            acc[r_] = mad((vec)(v_.w), u3_, acc[r_]); \
        } } while (0)

// The output transform of one tile's M (the a^2 positions of KW channels), its
// bias, residual and activation, written where the tile lies inside the output.
inline void output_tile(const vec* mm, const uint t, const int k0, const vec bias,
#if RESIDUAL
                        __global const float4* restrict res,
#endif
                        __global float4* restrict y)
{
    uint n, oy, ox;
    TILE_AT(t, n, oy, ox);
    vec cols[WM * WA], out[WM * WM];
    for (int j = 0; j < WA; j++)
        at_line(mm + j, WA, cols + j, WA);            // columns: (m x a)
    for (int i = 0; i < WM; i++)
        at_line(cols + i * WA, 1, out + i * WM, 1);   // rows: (m x m)
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WM; j++) {
            if (oy + i >= YH || ox + j >= YW)
                continue;
            const uint yp = ((n * YHP + oy + i + YPT) * YWP + ox + j + YPL) * YV;
#if RESIDUAL
            const uint rp = ((n * RHP + oy + i + RPT) * RWP + ox + j + RPL) * YV;
#endif
            const vec o = out[i * WM + j] + bias;
            store_kw(o, k0,
#if RESIDUAL
                     res, rp,
#endif
                     y, yp);
        }
}

#if RESIDUAL
#define RES_ARG res,
#else
#define RES_ARG
#endif

__kernel __attribute__((reqd_work_group_size(KG, TG, PG)))
void winograd(__global const float4* restrict x,
              __global const float* restrict u,
              __global const float* restrict b,
#if RESIDUAL
              __global const float4* restrict res,
#endif
              __global float4* restrict y)
{
    __local float4 Vs[E][QC][TT];

    const int kx = get_local_id(0), tg = get_local_id(1), pg = get_local_id(2);
    const uint tid = (pg * TG + tg) * KG + kx;
    const uint t0 = get_group_id(1) * TT;
    const int k0 = (get_group_id(0) * KG + kx) * KW;   // this work-item's first output channel
    const vec bias = VLOAD(0, b + k0);

#if TC == XC4 && PG == 1
    // One chunk, one work-item for all positions (a CPU's plan): position by position, RT
    // accumulators at a time over all the channels (a CPU has too few registers for all
    // a^2 x RT at once); no accumulator lives across the barrier (a CPU's work-group runs
    // as loops over its work-items between barriers, and so keeps them in registers).
    transform_chunk(x, Vs, 0, t0, tid);
    barrier(CLK_LOCAL_MEM_FENCE);
    vec mm[RT][E];
    for (int e = 0; e < E; e++) {
        vec acc[RT];
        for (int r = 0; r < RT; r++)
            acc[r] = (vec)(0.0f);
        const __global float* ue = u + (size_t)e * XC4 * KP + k0;
        for (int q = 0; q < QC; q++, ue += 4 * KP)
            PRODUCT(acc, e, q, ue);
        for (int r = 0; r < RT; r++)
            mm[r][e] = acc[r];
    }
#else
    // Chunk by chunk, each work-item's EP positions' accumulators for its RT tiles kept
    // throughout (a GPU's registers).
    vec acc[EP][RT];
    for (int i = 0; i < EP; i++)
        for (int r = 0; r < RT; r++)
            acc[i][r] = (vec)(0.0f);
    for (int c0 = 0; c0 < XC4; c0 += TC) {
        if (c0 > 0)
            barrier(CLK_LOCAL_MEM_FENCE);   // the previous chunk's products have read Vs
        transform_chunk(x, Vs, c0, t0, tid);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int q = 0; q < QC; q++) {
            const __global float* up = u + (size_t)(c0 + 4 * q) * KP + k0;
            for (int i = 0; i < EP; i++) {
                const int e = pg * EP + i;
                PRODUCT(acc[i], e, q, up + (size_t)e * XC4 * KP);
            }
        }
    }
#if PG == 1
    vec mm[RT][E];
    for (int e = 0; e < E; e++)
        for (int r = 0; r < RT; r++)
            mm[r][e] = acc[e][r];
#endif
#endif

#if PG == 1
    for (int r = 0; r < RT; r++) {
        const uint t = t0 + r * TG + tg;
        if (t < TILES)
            output_tile(mm[r], t, k0, bias, RES_ARG y);
    }
#else
    // the positions of each tile meet in local memory; the work-items then take the
    // TT tiles' output transforms in turn along PG
    __local vec Ms[E][TT][KG];
    for (int i = 0; i < EP; i++)
        for (int r = 0; r < RT; r++)
            Ms[pg * EP + i][r * TG + tg][kx] = acc[i][r];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = pg; r < RT; r += PG) {
        const uint t = t0 + r * TG + tg;
        if (t >= TILES)
            continue;
        vec mm[E];
        for (int e = 0; e < E; e++)
            mm[e] = Ms[e][r * TG + tg][kx];
        output_tile(mm, t, k0, bias, RES_ARG y);
    }
#endif
}
