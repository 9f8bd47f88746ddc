// MobileNet-v2's inverted residuals chained into one kernel a block
// (backends/handwritten/blocks.py): block i's depthwise 3x3, its project
// 1x1 (with the residual add where the block has one) and block i+1's
// expand 1x1, so that neither the depthwise's output nor the block's output
// makes a round trip through global memory before the next layer reads it,
// and three or four launches become one.  The block's output is still
// written (the next block's add reads it); the expand's output is what the
// next block's kernel reads, its depthwise needing neighbouring pixels that
// other work-groups compute.
//
// Buffers are `vectorised`'s: NHWC, channels stored in float4s, zero borders
// (backends/handwritten/layout.py).  -D constants:
//   N, XC4, XHP, XWP, XPT, XPL   the depthwise's input (stored channels, size, border)
//   PT, PL, FH, FW, SH, SW       the depthwise's padding, window and stride
//   MC, DACT                     its channels (stored: XC4) and activation
//   YC, YC4, YH, YW, YHP, YWP, YPT, YPL, ACT
//                                the block's output (the project's, or the add's) and its activation
//   RESIDUAL, RHP, RWP, RPT, RPL the add's other input, where the block has an add
//   ZC, ZC4, ZHP, ZWP, ZPT, ZPL, ZACT
//                                the expand's output (YH x YW pixels) and its activation
//   TP, G                        pixels per work-group, work-items per pixel
//
// A work-group (TP, G) takes TP consecutive output pixels (image, row and
// column flattened):
//  1. the depthwise results of its pixels, all channels, into local memory
//     (mid, channel-major: neighbouring work-items read neighbouring float4s);
//  2. after the barrier, work-item (p, g) computes pixel p's block output,
//     four channels at a time from g on in steps of G: bias, the add,
//     activation; written to global memory and to local memory (out);
//  3. after the barrier, the expand from `out`, four channels at a time,
//     bias and activation, into the next block's input.
// Pixels past N * YH * YW (the last work-group) compute nothing and write
// nothing, but meet every barrier.

#include "common.h"

#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define ZV (ZC4 / 4)
#define PIXELS (N * YH * YW)

#define X_PIXEL(n, row, col) ((((n) * XHP + (row) + XPT) * XWP + (col) + XPL) * XV)
#define Y_PIXEL(n, row, col) ((((n) * YHP + (row) + YPT) * YWP + (col) + YPL) * YV)
#define R_PIXEL(n, row, col) ((((n) * RHP + (row) + RPT) * RWP + (col) + RPL) * YV)
#define Z_PIXEL(n, row, col) ((((n) * ZHP + (row) + ZPT) * ZWP + (col) + ZPL) * ZV)

// Four output channels' sums over `len` float4s of a local row `v` (stride TP) and
// filters w[0], w[len], w[2 len], w[3 len]: float4 multiply-adds, one dot at the end.
inline float4 four_sums(const __local float4* v, const __global float4* w, const int len)
{
    float4 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int i = 0; i < len; i++) {
        const float4 x = v[i * TP];
        a0 = mad(x, w[i], a0);
        a1 = mad(x, w[len + i], a1);
        a2 = mad(x, w[2 * len + i], a2);
        a3 = mad(x, w[3 * len + i], a3);
    }
    const float4 one = (float4)(1.0f);
    return (float4)(dot(a0, one), dot(a1, one), dot(a2, one), dot(a3, one));
}

// channels past `c` in float4 `v4` of `c4s` set to 0 (after the activation: a sigmoid makes 0.5)
#define MASK_TAIL(v, v4, c, c4s) \
    ((c) % 4 && (v4) == (c4s) - 1 ? select(v, (float4)(0.0f), (int4)(0, 1, 2, 3) >= (int4)((c) % 4)) : (v))

__kernel __attribute__((reqd_work_group_size(TP, G, 1)))
void block(__global const float4* restrict x,
           __global const float4* restrict dw,
           __global const float4* restrict db,
           __global const float4* restrict w,
           __global const float4* restrict b,
#if RESIDUAL
           __global const float4* restrict res,
#endif
           __global const float4* restrict we,
           __global const float4* restrict be,
           __global float4* restrict y,
           __global float4* restrict z)
{
    __local float4 mid[XV * TP];
    __local float4 out[YV * TP];
    const int p = get_local_id(0), g = get_local_id(1);
    const int first = get_group_id(0) * TP;

    // 1. the depthwise, the work-items taking the TP x XV float4s in turn
    for (int q = g * TP + p; q < TP * XV; q += TP * G) {
        const int t = q / XV, m = q - t * XV, pix = first + t;
        float4 acc = 0.0f;
        if (pix < PIXELS) {
            const int n = pix / (YH * YW), rc = pix - n * (YH * YW), row = rc / YW, col = rc - row * YW;
            const __global float4* xp = x + X_PIXEL(n, row * SH - PT, col * SW - PL) + m;
            acc = db[m];
            for (int fy = 0; fy < FH; fy++)
                for (int fx = 0; fx < FW; fx++)
                    acc = mad(xp[(fy * XWP + fx) * XV], dw[(fy * FW + fx) * XV + m], acc);
            acc = MASK_TAIL(activation4(acc, DACT), m, MC, XV);
        }
        mid[m * TP + t] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int pix = first + p;
    const int n = pix / (YH * YW), rc = pix - n * (YH * YW), row = rc / YW, col = rc - row * YW;
    // 2. the project 1x1, its bias, the add and the activation: the block's output
    if (pix < PIXELS)
        for (int c4 = g; c4 < YV; c4 += G) {
            float4 o = four_sums(mid + p, w + 4 * c4 * XV, XV) + b[c4];
#if RESIDUAL
            o += res[R_PIXEL(n, row, col) + c4];
#endif
            o = zero_tail(activate4(o), c4);
            y[Y_PIXEL(n, row, col) + c4] = o;
            out[c4 * TP + p] = o;
        }
    barrier(CLK_LOCAL_MEM_FENCE);

    // 3. the next block's expand 1x1, its bias and activation
    if (pix < PIXELS)
        for (int z4 = g; z4 < ZV; z4 += G) {
            const float4 o = four_sums(out + p, we + 4 * z4 * YV, YV) + be[z4];
            z[Z_PIXEL(n, row, col) + z4] = MASK_TAIL(activation4(o, ZACT), z4, ZC, ZV);
        }
}
