// A 1x1 stride-1 unpadded convolution (MobileNet-v2's expands and projects,
// ResNet-18's nothing: its 1x1s have stride 2) as a GEMM with register
// blocks and no local memory (backends/handwritten/pointwise.py): each
// work-item computes RP output pixels x KW output channels, so each weight
// vector it loads feeds RP pixels and each input float4 KW channels, where
// `vectorised`'s conv kernel computes one pixel x four channels.  No
// barrier: on a CPU (PoCL) a work-group runs as a loop over its work-items,
// and a barrier would cut it in two with the accumulators kept in memory.
//
// Buffers are `vectorised`'s: NHWC, channels stored in float4s, zero borders.
// -D constants, besides the layout ones of kernels/vectorised.cl (N, XC4,
// XHP, XWP, XPT, XPL, YC, YC4, YH, YW, YHP, YWP, YPT, YPL, ACT; RESIDUAL with
// RHP, RWP, RPT, RPL):
//   KW   output channels per work-item: 4 (float4) or 8 (float8)
//   RP   output pixels per work-item (image, row and column flattened)
//   KP   output channels of the weights (XC4 rows of KP) and bias as stored: a multiple of KW
//   YS, YO  the output buffer's float4s per pixel and this layer's first there (a slice of a
//           concatenation's buffer, written in place: handwritten/zoo.py); else YV and 0
//   LNORM, LC, LN_EPS  (handwritten/layernorm_fused.py) the layernorm that alone feeds this 1x1 done
//           here: x is the layernorm's input (LC channels), the weights and bias have its scale and
//           shift folded in (W diag(scale), b + W shift), so a pixel's output is
//           rstd * (W' (x - mean)) + b'.  Each work-item works out its pixels' mean and 1/std itself
//           in two passes over their channels before the product (no E[x^2] - mean^2: it cancels
//           where the mean is large against the spread), then multiplies by the centred input.
//   NB     blocks of KW output channels per work-item, one after the other (default 1; LNORM: so that
//          the work-items of a pixel work out its statistics fewer times)
//   LN_COPY (LNORM, a CPU) the centred pixels written to private memory once, the product reading them

#include "common.h"

#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define PIXELS (N * YH * YW)
#ifndef YS
#define YS YV
#endif
#ifndef YO
#define YO 0
#endif
#ifndef NB
#define NB 1
#endif

#include "kw_store.h"

// Output pixel p's image, row and column (unsigned: no `freeze` for Oclgrind; kernels/tiled_conv.cl).
#define PIXEL_AT(p, n, row, col) do { \
        n = (p) / (YH * YW); const uint rc_ = (p) - n * (YH * YW); \
        row = rc_ / YW; col = rc_ - row * YW; } while (0)

__kernel void pointwise(__global const float4* restrict x,
                        __global const float* restrict w,
                        __global const float* restrict b,
#if RESIDUAL
                        __global const float4* restrict res,
#endif
                        __global float4* restrict y)
{
    const uint p0 = get_global_id(1) * RP;
    if (get_global_id(0) * NB * KW >= YC4 || p0 >= PIXELS)
        return;
    // each pixel's input; a pixel past the last reads the last (its sums are never written)
    const __global float4* xp[RP];
    for (int r = 0; r < RP; r++) {
        uint n, row, col;
        PIXEL_AT(min(p0 + r, (uint)PIXELS - 1), n, row, col);
        xp[r] = x + ((n * XHP + row + XPT) * XWP + col + XPL) * XV;
    }
#if LNORM
    // each pixel's mean over its LC channels (those past LC are stored as zeros), then its variance
    // from the centred values; scalar sums and scalar loads past the last whole float4 (float4 sums
    // and a float4 of the last channels crashed Oclgrind's --uninitialized check)
    float mean[RP], rstd[RP];
    for (int r = 0; r < RP; r++) {
        float m = 0.0f;
        for (int i = 0; i < XV; i++) {
            const float4 v = xp[r][i];
            m += (v.x + v.y) + (v.z + v.w);
        }
        m *= 1.0f / LC;
        float q = 0.0f;
        for (int i = 0; i < LC / 4; i++) {
            const float4 d = xp[r][i] - m;
            q += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
        }
        // the last float4's channels up to LC, one by one (those past LC left out)
        for (int c = LC / 4 * 4; c < LC; c++) {
            const float d = ((const __global float*)xp[r])[c] - m;
            q += d * d;
        }
        mean[r] = m;
        rstd[r] = rsqrt(q * (1.0f / LC) + LN_EPS);
    }
#if LN_COPY
    // the centred pixels in private memory (a CPU's stack, in its cache), so that the product
    // broadcasts each value straight from memory, as it does from x: centring in the product
    // itself cost the broadcasts a shuffle each
    float4 xc[RP][XV];
    for (int r = 0; r < RP; r++)
        for (int i = 0; i < XV; i++)
            xc[r][i] = xp[r][i] - mean[r];
#endif
#endif
    for (int kb = 0; kb < NB; kb++) {   // NB blocks of KW channels, the statistics shared
        const int k0 = (get_global_id(0) * NB + kb) * KW;
        if (k0 >= YC4)
            break;
        vec acc[RP];
        for (int r = 0; r < RP; r++)
            acc[r] = (vec)(0.0f);
        const __global float* wr = w + k0;
        for (int i = 0; i < XV; i++, wr += 4 * KP) {
            const vec w0 = VLOAD(0, wr), w1 = VLOAD(0, wr + KP), w2 = VLOAD(0, wr + 2 * KP), w3 = VLOAD(0, wr + 3 * KP);
            for (int r = 0; r < RP; r++) {
#if LN_COPY
                const float4 v = xc[r][i];
#elif LNORM
                // centred: a channel past LC gives -mean, against a zero row of the weights
                const float4 v = xp[r][i] - mean[r];
#else
                const float4 v = xp[r][i];
#endif
                acc[r] = mad((vec)(v.x), w0, acc[r]);
                acc[r] = mad((vec)(v.y), w1, acc[r]);
                acc[r] = mad((vec)(v.z), w2, acc[r]);
                acc[r] = mad((vec)(v.w), w3, acc[r]);
            }
        }
        const vec bias = VLOAD(0, b + k0);
        for (int r = 0; r < RP; r++) {
            if (p0 + r >= PIXELS)
                break;
            uint n, row, col;
            PIXEL_AT(p0 + r, n, row, col);
            const uint yp = ((n * YHP + row + YPT) * YWP + col + YPL) * YS + YO;
#if RESIDUAL
            const uint rp = ((n * RHP + row + RPT) * RWP + col + RPL) * YV;
#endif
#if LNORM
            const vec o = mad(acc[r], (vec)(rstd[r]), bias);
#else
            const vec o = acc[r] + bias;
#endif
            store_kw(o, k0,
#if RESIDUAL
                     res, rp,
#endif
                     y, yp);
        }
    }
}
