// `vectorised-tiled`: `vectorised`'s NHWC float4 convolution, tiled for GPUs.
//
// The convolution is read as an implicit GEMM (no im2col buffer):
//   out[pixel p][channel k] = sum over r = (fy, fx, c) of in(p, r) * w[r][k]
// with p = (image, output row, output column) and in(p, r) read straight
// from the NHWC input, whose zero border (backends/handwritten/layout.py)
// makes every read in range.  For one filter tap (fy, fx) the channels c are
// contiguous, so a TK-long slice of r (TK divides XC4) is TK/4 float4s.
//
// A work-group of (TN/RN, TM/RM) work-items computes a TM x TN tile of out.
// Per TK-slice it stages TM x TK inputs and TK x TN weights in local memory;
// each work-item then holds an RM x RN block of outputs in registers, so a
// value read from local memory feeds RM or RN multiply-adds.  The next
// slice's global reads are issued before the current slice's arithmetic.
//
// -D constants, besides the layout ones of kernels/vectorised.cl (N, XC4,
// XHP, XWP, YC, YC4, YH, YW, YHP, YWP, YPT, YPL, FH, FW, SH, SW, ACT; and
// XPT, XPL, PT, PL: the input buffer's border may be wider than the layer's
// padding where another reader of it wants more, so windows start at an offset):
//   TM, TN, TK   tile: output pixels, output channels, reduction slice
//   RM, RN       outputs per work-item (multiples of 4)
//   KP           output channels of the reordered weights, a multiple of TN
//   KSPLIT       work-groups sharing one tile's sum (group id 2); > 1 writes
//                partial sums that conv_tiled_reduce adds up, or with
//   LAST_ADDS    1 (and KSPLIT > 1): the work-group of a tile that finishes
//                last adds the parts itself (a count per tile in `count`,
//                zero between passes), so the sum costs no second launch;
//                OpenCL C 1.2 does not promise the other work-groups' parts
//                are visible after their fence and the count (Oclgrind calls
//                it a race): split_choice.py offers it only on platforms that
//                make them so, and checks its output at prepare
//   RESIDUAL     1: a residual add folded in: the kernel that writes the
//                output adds `res` (the add's other input, border RHP, RWP,
//                RPT, RPL) and applies the add's activation (ACT)
//   NCHW_IN      1: x is the net's canonical input (N, XC, XH, XW) of at most
//                4 channels (XC4 4, so TK 4: a slice is one tap), read
//                straight, the window's taps outside it read as zeros, so the
//                net's first conv needs no conversion kernel before it
//                (first_conv.py)
// Weights are reordered at prepare to (FH, FW, XC4, KP), zero-padded; bias to KP.

#include "common.h"

#define TX (TN / RN)                 // work-items along channels
#define TY (TM / RM)                 // work-items along pixels
#define THREADS (TX * TY)
#define RN4 (RN / 4)
#define RM4 (RM / 4)
#define M (N * YH * YW)              // output pixels: the GEMM's rows
#define KRED (FH * FW * XC4)         // the sum's length
#define CHUNKS (KRED / TK)
#define PER_SPLIT ((CHUNKS + KSPLIT - 1) / KSPLIT)
#define A_SLOTS (TM * (TK / 4))      // float4s of one input slice
#define B_SLOTS (TK * (TN / 4))      // float4s of one weight slice
#define A_PER ((A_SLOTS + THREADS - 1) / THREADS)
#define B_PER ((B_SLOTS + THREADS - 1) / THREADS)
#define XV (XC4 / 4)
#define YV (YC4 / 4)
#define KV (KP / 4)
#ifndef YS   // the output buffer's float4s per pixel and the first of this layer's (a concatenation's view)
#define YS YV
#endif
#ifndef YO
#define YO 0
#endif

// Index arithmetic that divides is unsigned: LLVM then needs no `freeze`
// of a possibly-overflowing signed sum before splitting a division from its
// remainder, an instruction Oclgrind's uninitialised-value check cannot run.

// Output pixel p's first float4 in the bordered NHWC output.
inline uint y_pixel(uint p)
{
    const uint n = p / (YH * YW), rem = p - n * (YH * YW);
    const uint oy = rem / YW, ox = rem - oy * YW;
    return ((n * YHP + oy + YPT) * YWP + ox + YPL) * YS + YO;
}

#if RESIDUAL
// Output pixel p's first float4 in the residual input's buffer.
inline uint r_pixel(uint p)
{
    const uint n = p / (YH * YW), rem = p - n * (YH * YW);
    const uint oy = rem / YW, ox = rem - oy * YW;
    return ((n * RHP + oy + RPT) * RWP + ox + RPL) * YV;
}
#define RESIDUAL_AT(p, k4) res[r_pixel(p) + (k4)]
#else
#define RESIDUAL_AT(p, k4) 0.0f
#endif

#ifndef LAST_ADDS
#define LAST_ADDS 0
#endif
#ifndef NCHW_IN
#define NCHW_IN 0
#endif
#if NCHW_IN
#if XC4 != 4 || TK != 4
#error "NCHW_IN reads at most 4 channels, one tap a slice"
#endif
typedef float x_t;
#else
typedef float4 x_t;
#endif
#define ADDS_HERE (KSPLIT == 1 || LAST_ADDS)   // this kernel writes the output (its epilogue: bias, residual, act)

__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void conv_tiled(__global const x_t* restrict x,
                __global const float4* restrict w,
                __global const float4* restrict b,
#if KSPLIT > 1 && LAST_ADDS
                __global float4* part,          // (KSPLIT, M, KP): read by another work-group, so not restrict
                __global int* count,            // per tile: the work-groups of its sum that are done
#endif
#if RESIDUAL && ADDS_HERE
                __global const float4* restrict res,
#endif
                __global float4* restrict y)
{
    // inputs transposed (slice step, pixel); one float4 of padding per row
    // spreads the transposing stores over the local-memory banks
    __local float4 As[TK][TM / 4 + 1];
    __local float4 Bs[TK][TN / 4];
    __local float* As1 = (__local float*)As;

    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * TX + tx;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;

    // each work-item copies A_PER input float4s and B_PER weight float4s of
    // every slice; where its input float4s start, -1 past the last pixel
    int a_base[A_PER], a_dst[A_PER];
#if NCHW_IN
    int a_y[A_PER], a_x[A_PER];   // the window's first row and column, outside the image where padded
#endif
    for (int s = 0; s < A_PER; s++) {
        const uint slot = tid + s * THREADS;
        const uint m = slot / (TK / 4), q = slot - m * (TK / 4);
        const uint p = m0 + m;
        a_dst[s] = 4 * q * (TM + 4) + m;
        a_base[s] = -1;
        if (slot < A_SLOTS && p < M) {
            const uint n = p / (YH * YW), rem = p - n * (YH * YW);
            const uint oy = rem / YW, ox = rem - oy * YW;
#if NCHW_IN
            a_base[s] = n * (XC * XH * XW);
            a_y[s] = (int)(oy * SH) - PT;
            a_x[s] = (int)(ox * SW) - PL;
#else
            a_base[s] = ((n * XHP + oy * SH + (XPT - PT)) * XWP + ox * SW + (XPL - PL)) * XV + q;
#endif
        }
    }

    float4 acc[RM][RN4];
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN4; j++)
            acc[i][j] = (float4)(0.0f);

    const int t_begin = get_group_id(2) * PER_SPLIT;
    const int t_end = min(CHUNKS, t_begin + PER_SPLIT);
    float4 ra[A_PER], rb[B_PER];

#if NCHW_IN
#define FETCH_A(fy, fx, c0) {   /* c0 0: the slice is the tap's channels */      \
        for (int s = 0; s < A_PER; s++) {                                       \
            const int iy = a_y[s] + (int)(fy), ix = a_x[s] + (int)(fx);         \
            float4 v = (float4)(0.0f);                                          \
            if (a_base[s] >= 0 && iy >= 0 && iy < XH && ix >= 0 && ix < XW) {   \
                const __global float* px = x + a_base[s] + iy * XW + ix;        \
                v.x = px[0];                                                    \
                if (XC > 1) v.y = px[XH * XW];                                  \
                if (XC > 2) v.z = px[2 * XH * XW];                              \
                if (XC > 3) v.w = px[3 * XH * XW];                              \
            }                                                                   \
            ra[s] = v;                                                          \
        }                                                                       \
    }
#else
#define FETCH_A(fy, fx, c0) {                                                   \
        const int off = ((fy) * XWP + (fx)) * XV + (c0) / 4;                    \
        for (int s = 0; s < A_PER; s++)                                         \
            ra[s] = a_base[s] >= 0 ? x[a_base[s] + off] : (float4)(0.0f);       \
    }
#endif

#define FETCH(t) {                                                              \
        const uint r0 = (t) * TK, tap = r0 / XC4, c0 = r0 - tap * XC4;         \
        const uint fy = tap / FW, fx = tap - fy * FW;                           \
        FETCH_A(fy, fx, c0)                                                     \
        for (int s = 0; s < B_PER; s++) {   /* a slot past the slice reads */  \
            const uint slot = min(tid + s * THREADS, B_SLOTS - 1); /* the last */ \
            const uint kk = slot / (TN / 4), j4 = slot - kk * (TN / 4);         \
            rb[s] = w[(r0 + kk) * KV + n0 / 4 + j4];                            \
        }                                                                       \
    }

    if (t_begin < t_end)
        FETCH(t_begin)
    for (int t = t_begin; t < t_end; t++) {
        for (int s = 0; s < A_PER; s++) {
            if (tid + s * THREADS < A_SLOTS) {
                As1[a_dst[s]] = ra[s].x;
                As1[a_dst[s] + (TM + 4)] = ra[s].y;
                As1[a_dst[s] + 2 * (TM + 4)] = ra[s].z;
                As1[a_dst[s] + 3 * (TM + 4)] = ra[s].w;
            }
        }
        for (int s = 0; s < B_PER; s++) {
            const uint slot = tid + s * THREADS;
            if (slot < B_SLOTS)
                Bs[slot / (TN / 4)][slot % (TN / 4)] = rb[s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < t_end)
            FETCH(t + 1)
        for (int kk = 0; kk < TK; kk++) {
            float4 a[RM4], bv[RN4];
            for (int g = 0; g < RM4; g++)
                a[g] = As[kk][g * TY + ty];
            for (int g = 0; g < RN4; g++)
                bv[g] = Bs[kk][g * TX + tx];
            for (int g = 0; g < RM4; g++)
                for (int j = 0; j < RN4; j++) {
                    acc[4 * g][j] = mad((float4)(a[g].x), bv[j], acc[4 * g][j]);
                    acc[4 * g + 1][j] = mad((float4)(a[g].y), bv[j], acc[4 * g + 1][j]);
                    acc[4 * g + 2][j] = mad((float4)(a[g].z), bv[j], acc[4 * g + 2][j]);
                    acc[4 * g + 3][j] = mad((float4)(a[g].w), bv[j], acc[4 * g + 3][j]);
                }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    // work-item (tx, ty) holds pixels (g * TY + ty) * 4 + e and channel
    // float4s g * TX + tx of the tile
    for (int g = 0; g < RM4; g++)
        for (int e = 0; e < 4; e++) {
            const uint p = m0 + (g * TY + ty) * 4 + e;
            if (p >= M)
                continue;
#if KSPLIT == 1
            const int yp = y_pixel(p);
            for (int j = 0; j < RN4; j++) {
                const int k4 = n0 / 4 + j * TX + tx;
                if (k4 < YV)
                    y[yp + k4] = zero_tail(activate4(acc[4 * g + e][j] + b[k4] + RESIDUAL_AT(p, k4)), k4);
            }
#elif LAST_ADDS
            for (int j = 0; j < RN4; j++)
                part[(get_group_id(2) * M + p) * KV + n0 / 4 + j * TX + tx] = acc[4 * g + e][j];
#else
            // partial sums: y is the (KSPLIT, M, KP) scratch buffer here
            for (int j = 0; j < RN4; j++)
                y[(get_group_id(2) * M + p) * KV + n0 / 4 + j * TX + tx] = acc[4 * g + e][j];
#endif
        }
#if KSPLIT > 1 && LAST_ADDS
    // each work-item's parts made visible to the device before the tile's count goes up; the work-group that
    // brings it to KSPLIT saw every other part written, adds them all in the adding kernel's order (bias, then
    // part 0, 1, ...: the same sum whichever finished last) and sets the count back to 0 for the next pass
    __local int last;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    const int tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
    if (tid == 0)
        last = atomic_inc(&count[tile]) == KSPLIT - 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last)
        return;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    if (tid == 0)
        count[tile] = 0;
    volatile __global const float4* parts = part;   // past any cache of this compute unit's
    for (int g = 0; g < RM4; g++)
        for (int e = 0; e < 4; e++) {
            const uint p = m0 + (g * TY + ty) * 4 + e;
            if (p >= M)
                continue;
            const int yp = y_pixel(p);
            for (int j = 0; j < RN4; j++) {
                const int k4 = n0 / 4 + j * TX + tx;
                if (k4 >= YV)
                    continue;
                float4 s = b[k4];
                for (int i = 0; i < KSPLIT; i++)
                    s += parts[(i * M + p) * KV + k4];
                y[yp + k4] = zero_tail(activate4(s + RESIDUAL_AT(p, k4)), k4);
            }
        }
#endif
}

#if KSPLIT > 1
// The parts of a split sum added up, plus bias and activation: one work-item
// per (channel float4, output pixel).
__kernel void conv_tiled_reduce(__global const float4* restrict part,
                                __global const float4* restrict b,
#if RESIDUAL
                                __global const float4* restrict res,
#endif
                                __global float4* restrict y)
{
    const int k4 = get_global_id(0);
    const uint p = get_global_id(1);
    if (k4 >= YV || p >= M)
        return;
    float4 s = b[k4];
    for (int i = 0; i < KSPLIT; i++)
        s += part[(i * M + p) * KV + k4];
    y[y_pixel(p) + k4] = zero_tail(activate4(s + RESIDUAL_AT(p, k4)), k4);
}
#endif
