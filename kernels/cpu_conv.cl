// A convolution shaped for a CPU's vector units (backends/handwritten/cpu_conv.py):
// one work-item computes a register tile of RP output pixels x NV vectors of
// VW output channels, VW the device's preferred float vector width (8 on
// AVX2, 16 on AVX-512), so each multiply-add is one full-width vector
// instruction and each loaded weight vector feeds RP pixels.  No local
// memory and no barrier: PoCL runs a work-group as a loop over its
// work-items on one core, and a barrier would cut that loop in two with the
// accumulators spilled to memory.  The explicit vectors do what PoCL's
// vectoriser across work-items cannot do for `vectorised`'s float4 kernel.
//
// dw_vec does the same for a depthwise convolution: a work-item computes RP
// neighbouring output pixels of one row x VW channels, loading each input
// vector of a filter row once for the RP windows that overlap there.
//
// dw_pw_vec folds a depthwise convolution into the 1x1 that alone reads it
// (backends/handwritten/cpu_fold.py): a work-item computes the depthwise
// outputs of its RP neighbouring output columns (as dw_vec, a vector of DVW
// channels at a time) into a private buffer (RP x XC4 floats, L1-sized), then
// the 1x1 from there as conv_vec does, for KB blocks of KW output channels,
// so the depthwise output never goes through global memory.
//
// Buffers are `vectorised`'s: NHWC, channels stored in float4s, zero borders.
// CONV_VEC, DW_VEC, DW_PW_VEC or CONV_ROW_VEC (at its kernel below) picks the kernel.  -D constants,
// besides the layout ones of kernels/vectorised.cl's conv (N, XC4,
// XHP, XWP, XPT, XPL, PT, PL, YC, YC4, YH, YW, YHP, YWP, YPT, YPL, FH, FW, SH,
// SW, ACT, YS, YO; RESIDUAL with RHP, RWP, RPT, RPL):
//   XC   the input's real channels: the loop stops there (the padding channels are zero)
//   VW   floats per vector: 4, 8 or 16
//   NV   vectors per work-item along the output channels
//   RP   output pixels per work-item (image, row and column flattened)
//   KP   output channels of the weights as stored, a multiple of VW * NV
// dw_vec: XC4 == YC4, a multiple of VW; NV unused; weights (FH, FW, XC4) and bias (XC4) as
// `vectorised`'s depthwise kernel takes them.
// Weights are reordered at prepare to (KP / KW, FH, FW, XC4, KW), zero-padded, so that a
// work-item's weights are one contiguous stream (the prefetcher follows it; rows KP apart
// cost a TLB miss every page on a layer of 512 channels); bias to KP.
// dw_pw_vec: the depthwise's window constants (X* its input, Y* the 1x1's output, which has the
// depthwise's pixels; FH, FW, SH, SW, PT, PL), ACT the 1x1's (or its add's) activation, and
//   MC, DACT  the depthwise's real channels (stored: XC4) and activation
//   DVW       the depthwise's vector width: 4, 8 or 16, dividing XC4
//   KB        blocks of KW output channels per work-item (KP a multiple of KW * KB)
// depthwise weights (FH, FW, XC4) and bias (XC4) as dw_vec's; the 1x1's weights
// (KP / KW, XC4, KW) and bias (KP) as conv_vec's of a 1x1 window.
//
// head_vec is a net's head, a global average pool and the dense layer that alone reads it
// (backends/handwritten/head_fused.py; vectorised.cl `head` is its float4 form): a work-group
// of BG work-items (id 0) pools NI images' XH x XW maps (id 1: the image group) into local
// memory, then each work-item computes KW outputs from there, one weight stream as conv_vec's
// (KP / KW, XC4, KW), each vector loaded serving the NI images.  One barrier, between the pool
// and the product: no accumulator lives across it.  -D: N, XC4, XC, XHP, XWP, XH, XW, XPT, XPL
// (the pool's input), OUT, YC4 (the dense's outputs, and as stored), PACT (the pool's
// activation), ACT (the dense's), VW, NV, KP, NI, BG.

#include "common.h"
#include "vector_type.h"

#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define KW (VW * NV)
#define PIXELS (N * YH * YW)
#ifndef YS
#define YS YV
#endif
#ifndef YO
#define YO 0
#endif

// Output pixel p's image, row and column (unsigned: no `freeze` for Oclgrind; kernels/tiled_conv.cl).
#define PIXEL_AT(p, n, row, col) do { \
        n = (p) / (YH * YW); const uint rc_ = (p) - n * (YH * YW); \
        row = rc_ / YW; col = rc_ - row * YW; } while (0)

// One output pixel of a work-item's register tile (ACC_ROW: NV vectors of VW channels from output
// channel k0): bias, the residual add where RESIDUAL, the activation, stored as float4s up to the
// stored channels.  The epilogue of conv_vec and dw_pw_vec; a macro, so it expands as written there.
#if RESIDUAL
#define ADD_RESIDUAL(part, n, row, col, k4) part += res[((n * RHP + row + RPT) * RWP + col + RPL) * YV + k4]
#else
#define ADD_RESIDUAL(part, n, row, col, k4)
#endif
#define STORE_PIXEL(ACC_ROW, BIAS, n, row, col, k0) do { \
        const uint yp_ = ((n * YHP + row + YPT) * YWP + col + YPL) * YS + YO; \
        for (int j_ = 0; j_ < NV; j_++) { \
            float o_[VW]; \
            VSTORE(ACC_ROW[j_] + BIAS[j_], 0, o_); \
            for (int h_ = 0; h_ < VW / 4; h_++) { \
                const int k4_ = (k0) / 4 + j_ * (VW / 4) + h_; \
                if (k4_ >= YV) \
                    break; \
                float4 part_ = vload4(h_, o_); \
                ADD_RESIDUAL(part_, n, row, col, k4_); \
                y[yp_ + k4_] = zero_tail(activate4(part_), k4_); \
            } \
        } } while (0)

#ifdef CONV_VEC
__kernel void conv_vec(__global const float* restrict x,
                       __global const float* restrict w,
                       __global const float* restrict b,
#if RESIDUAL
                       __global const float4* restrict res,
#endif
                       __global float4* restrict y)
{
    const uint k0 = get_global_id(0) * KW;
    const uint p0 = get_global_id(1) * RP;
    if (k0 >= YC4 || p0 >= PIXELS)
        return;
    // each pixel's window, its top-left tap; a pixel past the last reads the last's (never written)
    uint xp[RP];
    for (int r = 0; r < RP; r++) {
        uint n, row, col;
        PIXEL_AT(min(p0 + r, (uint)PIXELS - 1), n, row, col);
        xp[r] = ((n * XHP + row * SH + (XPT - PT)) * XWP + col * SW + (XPL - PL)) * XC4;
    }
    vec acc[RP][NV];
    for (int r = 0; r < RP; r++)
        for (int j = 0; j < NV; j++)
            acc[r][j] = (vec)(0.0f);
    for (int fy = 0; fy < FH; fy++)
        for (int fx = 0; fx < FW; fx++) {
            // this tap's input of each pixel, then its channels at a signed offset: the
            // compiler keeps one pointer a pixel and steps the channel (uint sums may wrap)
            const __global float* xt[RP];
#pragma unroll
            for (int r = 0; r < RP; r++)
                xt[r] = x + xp[r] + (fy * XWP + fx) * XC4;
            const __global float* wr = w + ((k0 / KW * FH + fy) * FW + fx) * XC4 * KW;
            for (int c = 0; c < XC; c++) {
                vec wv[NV];
#pragma unroll
                for (int j = 0; j < NV; j++)
                    wv[j] = VLOAD(0, wr + c * KW + j * VW);
#pragma unroll
                for (int r = 0; r < RP; r++) {
                    const vec v = (vec)(xt[r][c]);
#pragma unroll
                    for (int j = 0; j < NV; j++)
                        acc[r][j] = fma(v, wv[j], acc[r][j]);
                }
            }
        }
    vec bias[NV];
    for (int j = 0; j < NV; j++)
        bias[j] = VLOAD(0, b + k0 + j * VW);
    for (int r = 0; r < RP; r++) {
        if (p0 + r >= PIXELS)
            break;
        uint n, row, col;
        PIXEL_AT(p0 + r, n, row, col);
        STORE_PIXEL(acc[r], bias, n, row, col, k0);
    }
}
#endif

#ifdef DW_VEC
// POOL_MAX (1): a max-pool instead, the same work-items and loads with max for
// multiply-add, no weights; taps in the padding never win (skipped, or -inf), a NaN does.
#define BLOCKS ((YW + RP - 1) / RP)    // blocks of RP output columns a row
#define IW ((RP - 1) * SW + FW)        // input columns the block's windows span
#ifndef POOL_MAX
#define POOL_MAX 0
#endif

inline vec vmax_keep_nan(const vec m, const vec v)
{
    return select(m, v, isgreater(v, m) | isnan(v));
}

__kernel void dw_vec(__global const float* restrict x,
#if !POOL_MAX
                     __global const float* restrict w,
                     __global const float* restrict b,
#endif
                     __global float4* restrict y)
{
    const uint k0 = get_global_id(0) * VW;
    const uint q = get_global_id(1);
    if (k0 >= YC4 || q >= N * YH * BLOCKS)
        return;
    const uint nrow = q / BLOCKS, col0 = (q - nrow * BLOCKS) * RP;
    const uint n = nrow / YH, row = nrow - n * YH;
    const int valid = min(RP, (int)(YW - col0));
    const int last = (valid - 1) * SW + FW - 1;   // the last input column this block's windows read
    vec acc[RP];
#pragma unroll
    for (int r = 0; r < RP; r++)
        acc[r] = (vec)(POOL_MAX ? -INFINITY : 0.0f);
    for (int fy = 0; fy < FH; fy++) {
#if POOL_MAX
        const int iy = (int)(row * SH) + fy - PT;
        if (iy < 0 || iy >= XH)
            continue;
#endif
        // signed: a max-pool's padding is no border of its input (its offsets go below 0, its loads never)
        const int px = ((int)(n * XHP + row * SH) + fy + (XPT - PT)) * XWP + (int)(col0 * SW) + (XPL - PL);
        const __global float* xr = x + px * XC4 + (int)k0;
        vec in[IW];
#pragma unroll
        for (int i = 0; i < IW; i++) {
#if POOL_MAX
            const int ix = (int)(col0 * SW) + i - PL;
            const bool inside = ix >= 0 && ix < XW && i <= last;
            in[i] = VLOAD(0, xr + (inside ? i : PL) * XC4);   // a tap outside loads the first inside, then
            in[i] = inside ? in[i] : (vec)(-INFINITY);         // counts as -inf (no load out of bounds)
#else
            in[i] = VLOAD(0, xr + min(i, last) * XC4);
#endif
        }
#pragma unroll
        for (int fx = 0; fx < FW; fx++) {
#if POOL_MAX
#pragma unroll
            for (int r = 0; r < RP; r++)
                acc[r] = vmax_keep_nan(acc[r], in[r * SW + fx]);
#else
            const vec wv = VLOAD(0, w + (fy * FW + fx) * XC4 + k0);
#pragma unroll
            for (int r = 0; r < RP; r++)
                acc[r] = fma(in[r * SW + fx], wv, acc[r]);
#endif
        }
    }
#if POOL_MAX
    const vec bias = (vec)(0.0f);
#else
    const vec bias = VLOAD(0, b + k0);
#endif
    for (int r = 0; r < valid; r++) {
        const uint yp = ((n * YHP + row + YPT) * YWP + col0 + r + YPL) * YS + YO;
        float o[VW];
        VSTORE(acc[r] + bias, 0, o);
        for (int h = 0; h < VW / 4; h++) {
            const int k4 = k0 / 4 + h;
            y[yp + k4] = zero_tail(activate4(vload4(h, o)), k4);
        }
    }
}
#endif

#ifdef DW_PW_VEC
#if DVW == 4
typedef float4 dvec;
#define DVLOAD vload4
#define DVSTORE vstore4
#elif DVW == 8
typedef float8 dvec;
#define DVLOAD vload8
#define DVSTORE vstore8
#elif DVW == 16
typedef float16 dvec;
#define DVLOAD vload16
#define DVSTORE vstore16
#else
#error "DVW is 4, 8 or 16"
#endif
#define BLOCKS ((YW + RP - 1) / RP)    // blocks of RP output columns a row
#define IW ((RP - 1) * SW + FW)        // input columns the block's windows span
#define SPLITS (KP / (KW * KB))        // work-items along the output channels

__kernel void dw_pw_vec(__global const float* restrict x,
                        __global const float* restrict dw,
                        __global const float* restrict db,
                        __global const float* restrict w,
                        __global const float* restrict b,
#if RESIDUAL
                        __global const float4* restrict res,
#endif
                        __global float4* restrict y)
{
    const uint s = get_global_id(0);
    const uint q = get_global_id(1);
    if (s >= SPLITS || q >= N * YH * BLOCKS)
        return;
    const uint nrow = q / BLOCKS, col0 = (q - nrow * BLOCKS) * RP;
    const uint n = nrow / YH, row = nrow - n * YH;
    const int valid = min(RP, (int)(YW - col0));
    const int last = (valid - 1) * SW + FW - 1;   // the last input column this block's windows read
    // the depthwise outputs of the RP pixels, activated: the 1x1's input (columns past `valid`
    // repeat the last's loads, computed and never stored)
    float d[RP][XC4];
    for (int c0 = 0; c0 < MC; c0 += DVW) {
        dvec acc[RP];
#pragma unroll
        for (int r = 0; r < RP; r++)
            acc[r] = (dvec)(0.0f);
        for (int fy = 0; fy < FH; fy++) {
            const int px = ((int)(n * XHP + row * SH) + fy + (XPT - PT)) * XWP + (int)(col0 * SW) + (XPL - PL);
            const __global float* xr = x + px * XC4 + c0;
            dvec in[IW];
#pragma unroll
            for (int i = 0; i < IW; i++)
                in[i] = DVLOAD(0, xr + min(i, last) * XC4);
#pragma unroll
            for (int fx = 0; fx < FW; fx++) {
                const dvec wv = DVLOAD(0, dw + (fy * FW + fx) * XC4 + c0);
#pragma unroll
                for (int r = 0; r < RP; r++)
                    acc[r] = fma(in[r * SW + fx], wv, acc[r]);
            }
        }
        const dvec bias = DVLOAD(0, db + c0);
#pragma unroll
        for (int r = 0; r < RP; r++) {
            DVSTORE(acc[r] + bias, 0, &d[r][c0]);
#pragma unroll
            for (int h = 0; h < DVW / 4; h++)
                vstore4(activation4(vload4(h, &d[r][c0]), DACT), h, &d[r][c0]);
        }
    }
    for (int kb = 0; kb < KB; kb++) {
        const uint k0 = (s * KB + kb) * KW;
        if (k0 >= YC4)
            break;
        const __global float* wr = w + k0 * XC4;   // block k0 / KW: XC4 x KW floats
        vec acc[RP][NV];
#pragma unroll
        for (int r = 0; r < RP; r++)
#pragma unroll
            for (int j = 0; j < NV; j++)
                acc[r][j] = (vec)(0.0f);
        for (int c = 0; c < MC; c++) {
            vec wv[NV];
#pragma unroll
            for (int j = 0; j < NV; j++)
                wv[j] = VLOAD(0, wr + c * KW + j * VW);
#pragma unroll
            for (int r = 0; r < RP; r++) {
                const vec v = (vec)(d[r][c]);
#pragma unroll
                for (int j = 0; j < NV; j++)
                    acc[r][j] = fma(v, wv[j], acc[r][j]);
            }
        }
        vec bias[NV];
        for (int j = 0; j < NV; j++)
            bias[j] = VLOAD(0, b + k0 + j * VW);
        for (int r = 0; r < valid; r++) {
            const uint col = col0 + r;
            STORE_PIXEL(acc[r], bias, n, row, col, k0);
        }
    }
}
#endif

#ifdef HEAD_VEC
__kernel __attribute__((reqd_work_group_size(BG, 1, 1)))
void head_vec(__global const float4* restrict x,
              __global const float* restrict w,
              __global const float* restrict b,
              __global float* restrict y)
{
    __local float pooled[NI][XC4];
    const uint lid = get_local_id(0), n0 = get_group_id(1) * NI;
    for (uint k = lid; k < NI * XV; k += BG) {
        const uint m = k / XV, c4 = k - m * XV;
        const uint n = min(n0 + m, (uint)N - 1);   // past the batch: the last image again, never written
        float4 sum = 0.0f;
        for (int r = 0; r < XH; r++)
            for (int col = 0; col < XW; col++)
                sum += x[((n * XHP + r + XPT) * XWP + col + XPL) * XV + c4];
        vstore4(activation4(sum * (1.0f / (XH * XW)), PACT), c4, pooled[m]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint k0 = get_global_id(0) * KW;
    if (k0 >= OUT)
        return;
    vec acc[NI][NV];
    for (int m = 0; m < NI; m++)
        for (int j = 0; j < NV; j++)
            acc[m][j] = (vec)(0.0f);
    const __global float* wr = w + (size_t)(k0 / KW) * XC4 * KW;
    for (int c = 0; c < XC; c++) {
        vec wv[NV];
#pragma unroll
        for (int j = 0; j < NV; j++)
            wv[j] = VLOAD(0, wr + c * KW + j * VW);
#pragma unroll
        for (int m = 0; m < NI; m++) {
            const vec p = (vec)(pooled[m][c]);
#pragma unroll
            for (int j = 0; j < NV; j++)
                acc[m][j] = mad(p, wv[j], acc[m][j]);
        }
    }
    for (int m = 0; m < NI; m++) {
        if (n0 + m >= N)
            break;
        for (int j = 0; j < NV; j++) {
            float o[VW];
            VSTORE(acc[m][j] + VLOAD(0, b + k0 + j * VW), 0, o);
            for (int h = 0; h < VW; h++) {
                const uint k = k0 + j * VW + h;
                if (k < OUT)
                    y[(n0 + m) * YC4 + k] = activate(o[h]);
            }
        }
    }
}
#endif

#ifdef CONV_ROW_VEC
// conv_row_vec: a conv of fewer output channels than the vector width, where conv_vec's lanes past the channels idle (LeNet's C1: 6 of 16).  Here the
// vector runs along the output row instead: a work-item computes VW neighbouring output columns of RY
// rows for all YC output channels (RY x YC accumulators), each input row it reads gathered once into
// a private row (SW phases, so a tap of any stride is one unaligned vector load) and each weight a
// broadcast scalar.  The last block of a row starts VW columns before the row's end (where the row is
// that wide) and stores only the columns the block before left; a row narrower than VW clamps its
// loads to the last column its windows read.  Host side: YH >= RY.
// -D, besides the window ones: XC (the input's real channels), VW, RY; weights (XC, FH, FW, YC), bias (YC).
#define BX ((YW + VW - 1) / VW)        // blocks of VW output columns a row
#define BY ((YH + RY - 1) / RY)        // blocks of RY output rows an image
#define SEG (VW + (FW - 1) / SW)       // input columns of one phase the block's windows read
#define TY ((RY - 1) * SH + FH)        // input rows the block's windows read
#define RG (RY % 2 ? 1 : 2)            // rows whose taps share a weight's broadcast

// min(max(v, 0), 6) of a vector; a NaN passes through, as in relu6_4
inline vec relu6_vec(const vec v)
{
    return select(select(v, (vec)(6.0f), isgreater(v, (vec)(6.0f))), (vec)(0.0f), isless(v, (vec)(0.0f)));
}

// The layer's activation (-D ACT) of a vector, as activation4 computes it of four values: a whole
// vector's exp is a quarter of the instructions of four float4s' (C1's sigmoid cost more than its sums)
inline vec activate_vec(const vec v)
{
#if ACT == 1
    return select(v, (vec)(0.0f), isless(v, (vec)(0.0f)));
#elif ACT == 2
    return 1.0f / (1.0f + exp(-v));
#elif ACT == 3
    return relu6_vec(v);
#elif ACT == 4
    return tanh(v);
#elif ACT == 5
    return relu6_vec(v + 3.0f) * (1.0f / 6.0f);
#elif ACT == 6
    return v * relu6_vec(v + 3.0f) * (1.0f / 6.0f);
#elif ACT == 7
    return v / (1.0f + exp(-v));
#elif ACT == 8
    return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
#elif ACT == 9
    return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
#else
    return v;
#endif
}

__kernel void conv_row_vec(__global const float* restrict x,
                           __global const float* restrict w,
                           __global const float* restrict b,
                           __global float4* restrict y)
{
    const uint bx = get_global_id(0), q = get_global_id(1);
    if (bx >= BX || q >= N * BY)
        return;
    const uint n = q / BY, by = q - n * BY;
    const int col0 = min((int)(bx * VW), max(YW - VW, 0)), row0 = min((int)(by * RY), YH - RY);
    const int skip_col = bx * VW - col0, skip_row = by * RY - row0;   // the block before's
    const int cols = min(VW, YW - col0);
    const int last = (cols - 1) * SW + FW - 1;   // the last input column (from the block's first) read
    // the block's top-left input (in the border where the layer pads)
    const int x0 = ((int)(n * XHP) + row0 * SH + (XPT - PT)) * XWP + col0 * SW + (XPL - PL);
    vec acc[RY][YC];
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
        for (int k = 0; k < YC; k++)
            acc[r][k] = (vec)(0.0f);
    // the input rows the block's windows read, each gathered once (a channel's columns are XC4 apart)
    float seg[TY][SW][SEG];
    for (int c = 0; c < XC; c++) {
        for (int t = 0; t < TY; t++) {
            const __global float* xr = x + (x0 + t * XWP) * XC4 + c;
#pragma unroll
            for (int p = 0; p < SW; p++)
#pragma unroll
                for (int j = 0; j < SEG; j++)
                    seg[t][p][j] = xr[min(j * SW + p, last) * XC4];
        }
        // a row's accumulators at a time, each tap's input vector loaded where it is used: the
        // compiler's schedule then holds few registers besides them (no spills)
#pragma unroll
        for (int r0 = 0; r0 < RY; r0 += RG)
            for (int fy = 0; fy < FH; fy++)
#pragma unroll
                for (int fx = 0; fx < FW; fx++) {
                    vec v[RG];
#pragma unroll
                    for (int r = 0; r < RG; r++)
                        v[r] = VLOAD(0, &seg[(r0 + r) * SH + fy][fx % SW][fx / SW]);
                    const __global float* wt = w + ((c * FH + fy) * FW + fx) * YC;
#pragma unroll
                    for (int k = 0; k < YC; k++) {
                        const vec wk = (vec)(wt[k]);
#pragma unroll
                        for (int r = 0; r < RG; r++)
                            acc[r0 + r][k] = fma(v[r], wk, acc[r0 + r][k]);
                    }
                }
    }
    // each channel's row activated, then stored a pixel at a time as float4s (padding channels 0)
    float o[YC4][VW];
#pragma unroll
    for (int k = YC; k < YC4; k++)
        VSTORE((vec)(0.0f), 0, o[k]);
#pragma unroll
    for (int r = 0; r < RY; r++) {
        if (r < skip_row)
            continue;
#pragma unroll
        for (int k = 0; k < YC; k++)
            VSTORE(activate_vec(acc[r][k] + (vec)(b[k])), 0, o[k]);
        const uint yp = ((n * YHP + row0 + r + YPT) * YWP + col0 + YPL) * YS + YO;
        for (int i = skip_col; i < cols; i++)
#pragma unroll
            for (int k4 = 0; k4 < YC4 / 4; k4++)
                y[yp + i * YS + k4] = (float4)(o[4 * k4][i], o[4 * k4 + 1][i], o[4 * k4 + 2][i], o[4 * k4 + 3][i]);
    }
}
#endif
