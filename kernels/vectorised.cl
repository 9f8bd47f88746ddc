// `vectorised` (Rovder 2018, sections 7.2 and 7.4): NHWC, channels padded to
// a multiple of 4 and read as float4, explicit work-group shapes, dense
// layers as a float4 GEMV.
//
// Buffers are NHWC with the zero border their consumer needs (see
// backends/handwritten/layout.py); channel counts are stored rounded up to a
// multiple of 4 and the extra channels hold zeros.  -D constants:
//   N                 batch
//   XC4, XHP, XWP     input channels (multiple of 4), stored height/width
//   YC, YC4           output channels, and as stored (multiple of 4)
//   YH, YW            output height/width (interior)
//   YHP, YWP, YPT, YPL  stored output height/width, border above / left
//   FH, FW, SH, SW    window and stride
//   IN4, OUT          dense: input features (multiple of 4), outputs
//   ACT               0 none, 1 relu, 2 sigmoid
//   DOT_EACH          1: one dot() per float4 (the study's Mali form, where
//                     dot has its own hardware); 0: float4 multiply-adds and
//                     one dot() at the end (the same sum, reassociated; 3x
//                     faster where dot is a horizontal add, e.g. CPUs)
// CONV, SUBSAMPLE, MAXPOOL, DENSE_GEMV or DENSE_BATCHED picks the kernel.
// Global sizes are rounded up to the work-group shape: every kernel returns
// early for the work-items past the edge.

#include "common.h"

#define XV (XC4 / 4)   // float4s per input pixel
#define YV (YC4 / 4)   // float4s per output pixel

#define Y_PIXEL(n, row, col) ((((n) * YHP + (row) + YPT) * YWP + (col) + YPL) * YV)

#ifdef CONV
// One work-item: one output pixel (global id 0 = image * YH + row, 1 =
// column) and four consecutive output channels (id 2), so each float4 of
// input feeds four filters and the result is one float4 store.  Filters are
// reordered at prepare to (YC4, FH, FW, XC4): within one filter row the
// FW * XV float4s are contiguous in both input and filter.
__kernel void conv(__global const float4* restrict x,
                   __global const float4* restrict w,
                   __global const float4* restrict b,
                   __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const int FILTER = FH * FW * XV;                 // float4s per filter
    const __global float4* xp = x + ((n * XHP + row * SH) * XWP + col * SW) * XV;
    const __global float4* wp = w + 4 * c4 * FILTER;
#if DOT_EACH
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#else
    float4 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#endif
    for (int fy = 0; fy < FH; fy++) {
        const __global float4* xr = xp + fy * XWP * XV;
        const __global float4* wr = wp + fy * FW * XV;
        for (int i = 0; i < FW * XV; i++) {
            const float4 v = xr[i];
#if DOT_EACH
            s0 += dot(v, wr[i]);
            s1 += dot(v, wr[i + FILTER]);
            s2 += dot(v, wr[i + 2 * FILTER]);
            s3 += dot(v, wr[i + 3 * FILTER]);
#else
            a0 = mad(v, wr[i], a0);
            a1 = mad(v, wr[i + FILTER], a1);
            a2 = mad(v, wr[i + 2 * FILTER], a2);
            a3 = mad(v, wr[i + 3 * FILTER], a3);
#endif
        }
    }
#if !DOT_EACH
    const float4 one = (float4)(1.0f);
    const float s0 = dot(a0, one), s1 = dot(a1, one), s2 = dot(a2, one), s3 = dot(a3, one);
#endif
    const float4 out = activate4((float4)(s0, s1, s2, s3) + b[c4]);
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(out, c4);
}
#endif

#ifdef SUBSAMPLE
// Window mean of each channel times its coefficient plus its bias, four
// channels per work-item (ids as conv's, id 2 = group of four channels).
__kernel void subsample(__global const float4* restrict x,
                        __global const float4* restrict coeff,
                        __global const float4* restrict b,
                        __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const __global float4* xp = x + ((n * XHP + row * SH) * XWP + col * SW) * XV + c4;
    float4 sum = 0.0f;
    for (int fy = 0; fy < FH; fy++)
        for (int fx = 0; fx < FW; fx++)
            sum += xp[(fy * XWP + fx) * XV];
    const float4 out = activate4(sum * (coeff[c4] / (float)(FH * FW)) + b[c4]);
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(out, c4);
}
#endif

#ifdef MAXPOOL
__kernel void maxpool(__global const float4* restrict x, __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const __global float4* xp = x + ((n * XHP + row * SH) * XWP + col * SW) * XV + c4;
    float4 m = xp[0];
    for (int fy = 0; fy < FH; fy++)
        for (int fx = 0; fx < FW; fx++)
            m = max4_keep_nan(m, xp[(fy * XWP + fx) * XV]);
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(m), c4);
}
#endif

// Dense weights are reordered at prepare to (OUT, IN4): row j holds output
// j's weights in the order the input buffer stores its features (H, W, C4),
// zero where the input holds padding channels.
#define INV (IN4 / 4)

#ifdef DENSE_GEMV
// Batch 1: y = W x as a GEMV.  A work-group of (LANES, ROWS) work-items
// computes ROWS outputs; the LANES work-items of one output split its row
// (strided float4 loads, so neighbours read neighbouring memory on a GPU)
// and add their partial sums in local memory.  LANES = 1 on CPUs: one
// work-item streams a whole row.
__kernel void dense_gemv(__global const float4* restrict x,
                         __global const float4* restrict w,
                         __global const float* restrict b,
                         __global float* restrict y)
{
    const int lane = get_local_id(0), j = get_global_id(1);
    float4 acc = 0.0f;
    if (j < OUT) {
        const __global float4* wj = w + (size_t)j * INV;
        for (int i = lane; i < INV; i += LANES)
#if DOT_EACH
            acc.x += dot(x[i], wj[i]);
#else
            acc = mad(x[i], wj[i], acc);
#endif
    }
    float s = dot(acc, (float4)(1.0f));
#if LANES > 1
    __local float part[ROWS][LANES];
    const int row = get_local_id(1);
    part[row][lane] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = LANES / 2; stride > 0; stride /= 2) {
        if (lane < stride)
            part[row][lane] += part[row][lane + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    s = part[row][0];
#endif
    if (lane == 0 && j < OUT)
        y[j] = activate(s + b[j]);
}
#endif

#ifdef DENSE_BATCHED
// Batch > 1: one work-item per (output j = id 0, image n = id 1), a float4
// dot of the image's features with row j.  Neighbouring work-items share
// the image's features and read neighbouring weight rows.
__kernel void dense_batched(__global const float4* restrict x,
                            __global const float4* restrict w,
                            __global const float* restrict b,
                            __global float* restrict y)
{
    const int j = get_global_id(0), n = get_global_id(1);
    if (j >= OUT || n >= N)
        return;
    const __global float4* xn = x + n * INV;
    const __global float4* wj = w + (size_t)j * INV;
    float4 acc = 0.0f;
    for (int i = 0; i < INV; i++)
#if DOT_EACH
        acc.x += dot(xn[i], wj[i]);
#else
        acc = mad(xn[i], wj[i], acc);
#endif
    y[n * YC4 + j] = activate(dot(acc, (float4)(1.0f)) + b[j]);
}
#endif
