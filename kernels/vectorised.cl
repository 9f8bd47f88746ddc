// `vectorised` (Rovder 2018, sections 7.2 and 7.4): NHWC, channels padded to
// a multiple of 4 and read as float4, explicit work-group shapes, dense
// layers as a float4 GEMV.
//
// Buffers are NHWC with the zero border their consumer needs (see
// backends/handwritten/layout.py); channel counts are stored rounded up to a
// multiple of 4 and the extra channels hold zeros.  -D constants:
//   N                 batch
//   XC4, XHP, XWP     input channels (multiple of 4), stored height/width
//   XH, XW            input height/width (interior)
//   XPT, XPL          the input buffer's border above / left: in a graph it
//                     may be wider than this layer's padding (another reader
//                     of the buffer wants more), so windows start at an offset
//   PT, PL            the layer's own padding above / left (conv, max-pool)
//   POOL_PAD          max-pool: 1 when it pads (padding never wins: bounds checks)
//   YC, YC4           output channels, and as stored (multiple of 4)
//   YH, YW            output height/width (interior)
//   YHP, YWP, YPT, YPL  stored output height/width, border above / left
//   FH, FW, SH, SW    window and stride
//   IN4, OUT          dense: input features (multiple of 4), outputs
//   ACT               0 none, 1 relu, 2 sigmoid, 3 relu6, 4 tanh
//   ARITY             add: its inputs (2 to 4), each with its own border
//                     X<i>HP, X<i>WP, X<i>PT, X<i>PL
//   DOT_EACH          1: one dot() per float4 (the study's Mali form, where
//                     dot has its own hardware); 0: float4 multiply-adds and
//                     one dot() at the end (the same sum, reassociated; 3x
//                     faster where dot is a horizontal add, e.g. CPUs)
//   MC, DACT          dw_pw: the depthwise's channels (stored: XC4) and activation
//   TP, G, CPS        dw_pw: pixels per work-group, work-items per pixel, groups
//                     of four output channels per work-group
//   YS, YO            the output buffer's float4s per pixel and this layer's first there
//                     (a view of a concatenation's buffer, written in place); default YV, 0
//   XC, COFF          concat_copy: the input's channels, their first channel in the output
//   GATE              mul: 1 when the second input is an (N, C, 1, 1) gate
//   PB, PR, INCLUDE_PAD  avgpool: padding below / right; count the padding in the divisor
//   FEATURES          softmax: the input's C * H * W
//   PACT, LANES, ROWS, JB, NI  head: the pool's activation, work-items sharing a row, rows a
//                     work-group, outputs a work-group, images a work-group
// CONV, DEPTHWISE, DW_PW, SUBSAMPLE, MAXPOOL, ADD, GLOBAL_AVGPOOL, DENSE_GEMV,
// DENSE_BATCHED, HEAD, CONCAT_COPY, GATHER, MUL, AVGPOOL or SOFTMAX picks the kernel.
// Global sizes are rounded up to the work-group shape: every kernel returns
// early for the work-items past the edge.

#include "common.h"

#define XV (XC4 / 4)   // float4s per input pixel
#ifndef DH   // a dilated conv's taps DH rows and DW columns apart (conv, depthwise)
#define DH 1
#endif
#ifndef DW
#define DW 1
#endif
#define YV (YC4 / 4)   // float4s per output pixel

// YS, YO: the output buffer's float4s per pixel and the first one of this layer's (a view of
// a concatenation's buffer, written in place: handwritten/zoo.py); else YV and 0
#ifndef YS
#define YS YV
#endif
#ifndef YO
#define YO 0
#endif
#define Y_PIXEL(n, row, col) ((((n) * YHP + (row) + YPT) * YWP + (col) + YPL) * YS + YO)
// input pixel (row, col) of the interior; rows and columns of the border are -1, -2...
#define X_PIXEL(n, row, col) ((((n) * XHP + (row) + XPT) * XWP + (col) + XPL) * XV)

// RESIDUAL (1, conv and dw_pw): the conv is the last input of an add that
// alone reads it; its epilogue adds the add's other input `res` (border RHP,
// RWP, RPT, RPL) and applies the add's activation (ACT), writing the add's output.
#define R_PIXEL(n, row, col) ((((n) * RHP + (row) + RPT) * RWP + (col) + RPL) * YV)

// Four output channels' sums s0..s3 of float4 products (conv, dw_pw): with
// DOT_EACH a dot() per float4, else float4 accumulators summed once at the
// end; `w` points at the first channel's float4, the others `stride` apart.
#if DOT_EACH
#define ACC4_START float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f
#define ACC4_STEP(v, w, stride) do { s0 += dot(v, (w)[0]); s1 += dot(v, (w)[stride]); \
    s2 += dot(v, (w)[2 * (stride)]); s3 += dot(v, (w)[3 * (stride)]); } while (0)
#define ACC4_END do { } while (0)
#else
#define ACC4_START float4 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f
#define ACC4_STEP(v, w, stride) do { a0 = mad(v, (w)[0], a0); a1 = mad(v, (w)[stride], a1); \
    a2 = mad(v, (w)[2 * (stride)], a2); a3 = mad(v, (w)[3 * (stride)], a3); } while (0)
#define ACC4_END const float4 one = (float4)(1.0f); \
    const float s0 = dot(a0, one), s1 = dot(a1, one), s2 = dot(a2, one), s3 = dot(a3, one)
#endif

#ifdef CONV

// One work-item: one output pixel (global id 0 = image * YH + row, 1 =
// column) and four consecutive output channels (id 2), so each float4 of
// input feeds four filters and the result is one float4 store.  Filters are
// reordered at prepare to (YC4, FH, FW, XC4): within one filter row the
// FW * XV float4s are contiguous in both input and filter.
__kernel void conv(__global const float4* restrict x,
                   __global const float4* restrict w,
                   __global const float4* restrict b,
#if RESIDUAL
                   __global const float4* restrict res,
#endif
                   __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const int FILTER = FH * FW * XV;                 // float4s per filter
    const __global float4* xp = x + X_PIXEL(n, row * SH - PT, col * SW - PL);
    const __global float4* wp = w + 4 * c4 * FILTER;
    ACC4_START;
#if DH > 1 || DW > 1
    // dilated: the taps of a filter row are DW pixels apart, so each is a run of XV float4s
    for (int fy = 0; fy < FH; fy++) {
        const __global float4* xr = xp + fy * DH * XWP * XV;
        const __global float4* wr = wp + fy * FW * XV;
        for (int fx = 0; fx < FW; fx++)
            for (int c = 0; c < XV; c++) {
                const float4 v = xr[fx * DW * XV + c];
                ACC4_STEP(v, wr + fx * XV + c, FILTER);
            }
    }
#else
    for (int fy = 0; fy < FH; fy++) {
        const __global float4* xr = xp + fy * XWP * XV;
        const __global float4* wr = wp + fy * FW * XV;
        for (int i = 0; i < FW * XV; i++) {
            const float4 v = xr[i];
            ACC4_STEP(v, wr + i, FILTER);
        }
    }
#endif
    ACC4_END;
#if RESIDUAL
    // the residual add fused: y = activation of the add (conv + bias + res)
    const float4 out = activate4((float4)(s0, s1, s2, s3) + b[c4] + res[R_PIXEL(n, row, col) + c4]);
#else
    const float4 out = activate4((float4)(s0, s1, s2, s3) + b[c4]);
#endif
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
    const __global float4* xp = x + X_PIXEL(n, row * SH, col * SW) + c4;
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
#if POOL_PAD
    // the window's taps outside the input are skipped, as if they held -inf
    const int y0 = row * SH - PT, x0 = col * SW - PL;
    float4 m = (float4)(-INFINITY);
    for (int fy = max(0, -y0); fy < min(FH, XH - y0); fy++)
        for (int fx = max(0, -x0); fx < min(FW, XW - x0); fx++)
            m = max4_keep_nan(m, x[X_PIXEL(n, y0 + fy, x0 + fx) + c4]);
#else
    const __global float4* xp = x + X_PIXEL(n, row * SH, col * SW) + c4;
    float4 m = xp[0];
    for (int fy = 0; fy < FH; fy++)
        for (int fx = 0; fx < FW; fx++)
            m = max4_keep_nan(m, xp[(fy * XWP + fx) * XV]);
#endif
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(m), c4);
}
#endif

#ifdef DEPTHWISE
// Depthwise convolution (groups = channels, one filter each): a work-item
// computes one output pixel for four channels over its FH x FW window,
// float4 over channels, so neighbouring work-items (id 2) read neighbouring
// float4s of one input pixel.  Weights reordered at prepare to
// (FH, FW, XC4), zero for padding channels; XC4 == YC4.
__kernel void depthwise(__global const float4* restrict x,
                        __global const float4* restrict w,
                        __global const float4* restrict b,
                        __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const __global float4* xp = x + X_PIXEL(n, row * SH - PT, col * SW - PL) + c4;
    float4 acc = b[c4];
    for (int fy = 0; fy < FH; fy++)
        for (int fx = 0; fx < FW; fx++)
            acc = mad(xp[(fy * DH * XWP + fx * DW) * XV], w[(fy * FW + fx) * XV + c4], acc);
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(acc), c4);
}
#endif

#ifdef DW_PW
// A depthwise convolution and the 1x1 stride-1 unpadded convolution that
// alone reads it, as one kernel: the depthwise results stay in local memory
// and never make the round trip through global memory that two kernels
// (or two library calls) need.
//
// -D constants: the input's and the depthwise's window as DEPTHWISE's (X*,
// PT, PL, FH, FW, SH, SW), its channels MC (stored XC4, which the 1x1 reads)
// and its activation DACT; the output's as CONV's (Y*, ACT, RESIDUAL and
// R*).  Both outputs are YH x YW: the 1x1 keeps the depthwise's pixels.
//
// A work-group (TP, G) takes TP consecutive output pixels (image, row and
// column flattened, so a tile may span rows) and, on id 1, the CPS groups
// of four output channels [s * CPS, s * CPS + CPS) of its group s.
//  1. the TP x XV float4s of depthwise output for its pixels into local
//     memory, the work-group's work-items taking them in turn so that
//     neighbours compute neighbouring float4s of one pixel (they read
//     neighbouring input and weights, as the depthwise kernel's id 2);
//     padding channels masked to 0 after the activation (a sigmoid would
//     make them 0.5; the 1x1's weights there are 0 anyway); stored
//     channel-major, mid[m * TP + t], so that in 2 the work-items of one
//     channel group (a tile's pixels, id 0) read neighbouring float4s;
//  2. after the barrier, work-item (p, g) computes pixel p's output
//     channels c4 = s * CPS + g, + G, ... four at a time as the conv kernel
//     does (weights (YC4, XC4): each float4 of the local row feeds four
//     filters), then bias, activation and, with RESIDUAL, the add.
// With more than one group along id 1 each recomputes the tile's depthwise
// results: a GPU with few pixels to share out trades that for busy units.
// Pixels past N * YH * YW (the last tile) compute nothing and write
// nothing, but still meet the barrier.
__kernel void dw_pw(__global const float4* restrict x,
                    __global const float4* restrict dw,
                    __global const float4* restrict db,
                    __global const float4* restrict w,
                    __global const float4* restrict b,
#if RESIDUAL
                    __global const float4* restrict res,
#endif
                    __global float4* restrict y)
{
    __local float4 mid[TP * XV];
    const int p = get_local_id(0), g = get_local_id(1);
    const int first = get_group_id(0) * TP, s = get_group_id(1);
    const int PIXELS = N * YH * YW;

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
            acc = activation4(acc, DACT);
#if MC % 4
            if (m == XV - 1)
                acc = select(acc, (float4)(0.0f), (int4)(0, 1, 2, 3) >= (int4)(MC % 4));
#endif
        }
        mid[m * TP + t] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int pix = first + p;
    if (pix >= PIXELS)
        return;
    const int n = pix / (YH * YW), rc = pix - n * (YH * YW), row = rc / YW, col = rc - row * YW;
    const __local float4* xr = mid + p;
    const int end = min(s * CPS + CPS, YV);
    for (int c4 = s * CPS + g; c4 < end; c4 += G) {
        const __global float4* wr = w + 4 * c4 * XV;
        ACC4_START;
        for (int i = 0; i < XV; i++) {
            const float4 v = xr[i * TP];
            ACC4_STEP(v, wr + i, XV);
        }
        ACC4_END;
#if RESIDUAL
        const float4 out = activate4((float4)(s0, s1, s2, s3) + b[c4] + res[R_PIXEL(n, row, col) + c4]);
#else
        const float4 out = activate4((float4)(s0, s1, s2, s3) + b[c4]);
#endif
        y[Y_PIXEL(n, row, col) + c4] = zero_tail(out, c4);
    }
}
#endif

#ifdef ADD
// The residual add: the sum of ARITY inputs of one shape, then the
// activation; one work-item per (pixel, four channels), ids as conv's.
// Each input is read through its own border.
#define AT(i, n, row, col) \
    ((((n) * X##i##HP + (row) + X##i##PT) * X##i##WP + (col) + X##i##PL) * YV)

__kernel void add(__global const float4* restrict x0,
                  __global const float4* restrict x1,
#if ARITY > 2
                  __global const float4* restrict x2,
#endif
#if ARITY > 3
                  __global const float4* restrict x3,
#endif
                  __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    float4 s = x0[AT(0, n, row, col) + c4] + x1[AT(1, n, row, col) + c4];
#if ARITY > 2
    s += x2[AT(2, n, row, col) + c4];
#endif
#if ARITY > 3
    s += x3[AT(3, n, row, col) + c4];
#endif
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(s), c4);
}
#endif

#ifdef GLOBAL_AVGPOOL
// The mean of each channel over the XH x XW interior: one work-item per
// (image = id 0, four channels = id 2); id 1 has one work-item.
__kernel void global_avgpool(__global const float4* restrict x, __global float4* restrict y)
{
    const int n = get_global_id(0), c4 = get_global_id(2);
    if (n >= N || get_global_id(1) > 0 || c4 >= YV)
        return;
    float4 sum = 0.0f;
    for (int row = 0; row < XH; row++)
        for (int col = 0; col < XW; col++)
            sum += x[X_PIXEL(n, row, col) + c4];
    y[Y_PIXEL(n, 0, 0) + c4] = zero_tail(activate4(sum * (1.0f / (XH * XW))), c4);
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

#ifdef HEAD
// A net's head, the global average pool and the dense layer that alone reads it, in one launch
// (backends/handwritten/head_fused.py).  A work-group of (LANES, ROWS) work-items takes NI images
// (id 2) and JB of the OUT outputs (group id 0): it first pools its images' XH x XW maps into
// local memory (each work-item some of the XV float4s, with the pool's activation PACT), then
// computes its outputs from there as dense_gemv does: ROWS rows at a time, the LANES work-items
// of a row splitting it (strided float4 loads: neighbours read neighbouring weights on a GPU)
// and adding their parts in local memory; each weight loaded serves the NI images.  The work-
// groups along the outputs each redo the pool: it is XH x XW reads a channel, the dense XV x JB.
// Weights: (OUT, XC4) rows in the pooled vector's order, zero for its padding channels.
__kernel __attribute__((reqd_work_group_size(LANES, ROWS, 1)))
void head(__global const float4* restrict x,
          __global const float4* restrict w,
          __global const float* restrict b,
          __global float* restrict y)
{
    __local float4 pooled[NI][XV];
#if LANES > 1
    __local float part[NI][ROWS][LANES];
#endif
    const int lane = get_local_id(0), row = get_local_id(1);
    const int n0 = get_group_id(2) * NI;
    for (int k = row * LANES + lane; k < NI * XV; k += LANES * ROWS) {
        const int m = k / XV, c4 = k - m * XV;
        const int n = min(n0 + m, N - 1);   // past the batch: the last image again, never written
        float4 sum = 0.0f;
        for (int r = 0; r < XH; r++)
            for (int col = 0; col < XW; col++)
                sum += x[X_PIXEL(n, r, col) + c4];
        pooled[m][c4] = activation4(sum * (1.0f / (XH * XW)), PACT);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int first = get_group_id(0) * JB, end = min(OUT, first + JB);
    for (int j0 = first; j0 < end; j0 += ROWS) {   // the same trips for every work-item: barriers inside
        const int j = j0 + row;
        float4 acc[NI];
        for (int m = 0; m < NI; m++)
            acc[m] = 0.0f;
        if (j < end) {
            const __global float4* wj = w + (size_t)j * XV;
            for (int i = lane; i < XV; i += LANES) {
                const float4 wv = wj[i];
                for (int m = 0; m < NI; m++)
#if DOT_EACH
                    acc[m].x += dot(pooled[m][i], wv);
#else
                    acc[m] = mad(pooled[m][i], wv, acc[m]);
#endif
            }
        }
        for (int m = 0; m < NI; m++) {
            float s = dot(acc[m], (float4)(1.0f));
#if LANES > 1
            part[m][row][lane] = s;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int stride = LANES / 2; stride > 0; stride /= 2) {
                if (lane < stride)
                    part[m][row][lane] += part[m][row][lane + stride];
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            s = part[m][row][0];
#endif
            if (lane == 0 && j < end && n0 + m < N)
                y[(n0 + m) * YC4 + j] = activate(s + b[j]);
        }
    }
}
#endif

// ---- the classification zoo's layers (issue 36; backends/handwritten/zoo.py)

#if defined(CONCAT_COPY) || defined(GATHER) || defined(SOFTMAX)
// float views of the buffers, for kernels that move single channels
#define XF_PIXEL(n, row, col) (X_PIXEL(n, row, col) * 4)
#define YF_PIXEL(n, row, col) (Y_PIXEL(n, row, col) * 4)
#endif

#ifdef CONCAT_COPY
// One input of a concatenation that its producer did not write in place, copied into
// its slice (channels COFF .. COFF + XC - 1 of each output pixel), with the activation.
// One work-item per (image * row, column, channel).
__kernel void concat_copy(__global const float* restrict x, __global float* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c = get_global_id(2);
    if (r >= N * YH || col >= YW || c >= XC)
        return;
    const int n = r / YH, row = r - n * YH;
    y[YF_PIXEL(n, row, col) + COFF + c] = activate(x[XF_PIXEL(n, row, col) + c]);
}
#endif

#ifdef GATHER
// A selection of channels: output channel j is input channel order[j] (a shuffle, a slice),
// then the activation; one work-item per (image * row, column, output channel).
__kernel void gather(__global const float* restrict x, __global const int* restrict order,
                     __global float* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), j = get_global_id(2);
    if (r >= N * YH || col >= YW || j >= YC)
        return;
    const int n = r / YH, row = r - n * YH;
    y[YF_PIXEL(n, row, col) + j] = activate(x[XF_PIXEL(n, row, col) + order[j]]);
}
#endif

#ifdef MUL
// The product of two inputs, each read through its own border (X<i>HP...), or of the
// first by a per-channel gate (GATE: the second is (N, C, 1, 1)); then the activation.
#define M_AT(i, n, row, col) \
    ((((n) * X##i##HP + (row) + X##i##PT) * X##i##WP + (col) + X##i##PL) * YV)

__kernel void mul(__global const float4* restrict x0, __global const float4* restrict x1,
                  __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
#if GATE
    const float4 g = x1[M_AT(1, n, 0, 0) + c4];
#else
    const float4 g = x1[M_AT(1, n, row, col) + c4];
#endif
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(x0[M_AT(0, n, row, col) + c4] * g), c4);
}
#endif

#ifdef AVGPOOL
// The mean of each window over the taps inside the input; the divisor counts the window's
// rows and columns inside the input, and its padding too with INCLUDE_PAD (never a
// ceil-mode window's part past the padding).  Four channels per work-item, ids as conv's.
__kernel void avgpool(__global const float4* restrict x, __global float4* restrict y)
{
    const int r = get_global_id(0), col = get_global_id(1), c4 = get_global_id(2);
    if (r >= N * YH || col >= YW || c4 >= YV)
        return;
    const int n = r / YH, row = r - n * YH;
    const int y0 = row * SH - PT, x0 = col * SW - PL;
    float4 sum = 0.0f;
    for (int fy = max(0, -y0); fy < min(FH, XH - y0); fy++)
        for (int fx = max(0, -x0); fx < min(FW, XW - x0); fx++)
            sum += x[X_PIXEL(n, y0 + fy, x0 + fx) + c4];
#if INCLUDE_PAD
    const int rows = min(y0 + FH, XH + PB) - y0, cols = min(x0 + FW, XW + PR) - x0;
#else
    const int rows = min(y0 + FH, XH) - max(y0, 0), cols = min(x0 + FW, XW) - max(x0, 0);
#endif
    y[Y_PIXEL(n, row, col) + c4] = zero_tail(activate4(sum / (float)(rows * cols)), c4);
}
#endif

#ifdef SOFTMAX
// exp(x - max) / sum over each image's features in C, H, W order: one work-item per image.
__kernel void softmax(__global const float* restrict x, __global float* restrict y)
{
    const int n = get_global_id(0);
    if (n >= N)
        return;
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < XC; c++)
        for (int row = 0; row < XH; row++)
            for (int col = 0; col < XW; col++)
                m = max_keep_nan(m, x[XF_PIXEL(n, row, col) + c]);
    for (int c = 0; c < XC; c++)
        for (int row = 0; row < XH; row++)
            for (int col = 0; col < XW; col++)
                sum += exp(x[XF_PIXEL(n, row, col) + c] - m);
    const float inv = 1.0f / sum;
    for (int c = 0; c < XC; c++)
        for (int row = 0; row < XH; row++)
            for (int col = 0; col < XW; col++)
                y[YF_PIXEL(n, 0, 0) + (c * XH + row) * XW + col] = exp(x[XF_PIXEL(n, row, col) + c] - m) * inv;
}
#endif
