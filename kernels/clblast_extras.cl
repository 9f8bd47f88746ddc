// What CLBlast has no routine for, as small kernels of our own (the
// `clblast` and `clblast-convgemm` backends label them "(own kernel)"):
// an activation in place, bias + activation after xCONVGEMM or a GEMM with
// beta = 0 (which overwrite their output and take no bias), max-pooling,
// and (`clblast-best`) subsampling as average pooling with the channel's
// coefficient, bias and activation folded in.  For the graph nets: a copy
// into a zero-padded buffer (asymmetric padding, which xIM2COL and
// xCONVGEMM cannot take), the sum of two layers with the activation fused
// (a residual add), and the global average pool.  For the classification zoo
// (issue 36): a product, elementwise or by a per-channel gate; a selection of
// channels (a shuffle, a slice); an average pool with padding and ceil mode;
// a softmax.
//
// Compiled once per layer with -D constants:
//   ACT      0 none, 1 relu, 2 sigmoid, 3 relu6, 4 tanh
//   COUNT    activate_inplace, bias_activate, add_activate: number of elements
//            (work-items past it return at once)
//   CHANNELS, PLANE       bias_activate: the data is (N, CHANNELS, PLANE)
//   H, W, OH, OW, KH, KW, SH, SW   maxpool, subsample: input (N*C, H, W) -> (N*C, OH, OW)
//   PT, PL                          maxpool: padding on top and left (default 0)
//   CHANNELS                        subsample: C
//   H, W, PH, PW, PT, PL            pad_copy: (N*C, H, W) -> (N*C, PH, PW), placed at row PT, column PL
//   PLANES, PLANE                   global_avgpool: PLANES planes of PLANE elements -> their means
//   COUNT, MUL, GATE_PLANE          mul_activate: y = act(a * b), b one value per plane of
//                                   GATE_PLANE elements (a gate) or, with GATE_PLANE 0, elementwise
//   COUNT, GATHER, CIN, COUT, GPLANE  gather_channels: (N, CIN, GPLANE) -> (N, COUT, GPLANE), channel j
//                                   the input's order[j]
//   H, W, OH, OW, KH, KW, SH, SW, PT, PL, PB, PR, INCLUDE_PAD
//                                   avgpool: padding on each side; INCLUDE_PAD counts it in the
//                                   divisor (never a ceil-mode window's part past it)
//   ROWS, FEATURES                  softmax: ROWS rows of FEATURES, each exp(x - max) / sum

#include "common.h"

#ifdef COUNT
__kernel void activate_inplace(__global float *y) {
    const size_t i = get_global_id(0);
    if (i >= COUNT) return;
    y[i] = activate(y[i]);
}
#endif

#if defined(COUNT) && defined(PLANE)
__kernel void bias_activate(__global float *y, __global const float *bias) {
    const size_t i = get_global_id(0);
    if (i >= COUNT) return;
    y[i] = activate(y[i] + bias[(i / PLANE) % CHANNELS]);
}
#endif

#if defined(COUNT) && defined(ADD)
// y = activation(a + b): a residual add in one pass (y may be a or b).
__kernel void add_activate(__global const float *a, __global const float *b, __global float *y) {
    const size_t i = get_global_id(0);
    if (i >= COUNT) return;
    y[i] = activate(a[i] + b[i]);
}
#endif

#if defined(KH) && !defined(CHANNELS) && !defined(INCLUDE_PAD)
#ifndef PT
#define PT 0
#endif
#ifndef PL
#define PL 0
#endif
// One work-item per output element, NDRange (OW, OH, N*C) rounded up to the
// work-group shape.  Taps in the padding are skipped, so padding never wins
// (as if it held -inf); a window holds at least one real element, as the
// spec asks the padding to be narrower than the window.  No index is
// divided: Oclgrind's uninitialised-value checker cannot run the `freeze`
// that LLVM puts after a division.
__kernel void maxpool(__global const float *x, __global float *y) {
    const int ox = get_global_id(0), oy = get_global_id(1), plane = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int y0 = oy * SH - PT, x0 = ox * SW - PL;
    __global const float *src = x + (size_t)plane * (H * W);
    float best = -INFINITY;
    for (int fy = 0; fy < KH; fy++) {
        const int iy = y0 + fy;
        if (iy < 0 || iy >= H) continue;
        for (int fx = 0; fx < KW; fx++) {
            const int ix = x0 + fx;
            if (ix >= 0 && ix < W)
                best = max_keep_nan(best, src[iy * W + ix]);
        }
    }
    y[(size_t)plane * (OH * OW) + oy * OW + ox] = activate(best);
}
#endif

#if defined(PH) && defined(PW)
// The input placed in a zero-padded buffer, one work-item per padded
// element, NDRange (PW, PH, N*C): the zeros are written on every run, so
// the buffer needs no clearing and a poisoned one is made whole.
__kernel void pad_copy(__global const float *x, __global float *y) {
    const int px = get_global_id(0), py = get_global_id(1), plane = get_global_id(2);
    if (px >= PW || py >= PH) return;
    const int iy = py - PT, ix = px - PL;
    const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
    y[(size_t)plane * (PH * PW) + py * PW + px] = inside ? x[(size_t)plane * (H * W) + iy * W + ix] : 0.0f;
}
#endif

#if defined(PLANES) && defined(PLANE) && !defined(COUNT)
// The mean of each plane (one channel of one image), then the activation:
// one work-item per plane, summing in order.
__kernel void global_avgpool(__global const float *x, __global float *y) {
    const size_t plane = get_global_id(0);
    if (plane >= PLANES) return;
    __global const float *src = x + plane * PLANE;
    float sum = 0.0f;
    for (int i = 0; i < PLANE; i++)
        sum += src[i];
    y[plane] = activate(sum * (1.0f / PLANE));
}
#endif

#if defined(KH) && defined(CHANNELS)
// The window mean of one channel times its coefficient, plus its bias, then
// the activation: LeNet's subsampling in one pass (NDRange as maxpool's).
__kernel void subsample(__global const float *x, __global float *y,
                        __global const float *coeff, __global const float *bias) {
    const int ox = get_global_id(0), oy = get_global_id(1);
    const uint plane = get_global_id(2), c = plane % CHANNELS;   // unsigned: see maxpool
    if (ox >= OW || oy >= OH) return;
    __global const float *src = x + (size_t)plane * (H * W) + (oy * SH) * W + ox * SW;
    float sum = 0.0f;
    for (int fy = 0; fy < KH; fy++)
        for (int fx = 0; fx < KW; fx++)
            sum += src[fy * W + fx];
    y[(size_t)plane * (OH * OW) + oy * OW + ox] = activate(sum * (coeff[c] / (float)(KH * KW)) + bias[c]);
}
#endif

#if defined(COUNT) && defined(MUL)
// y = activation(a * b): b elementwise (GATE_PLANE 0), or one value per plane of
// GATE_PLANE elements, the (N, C, 1, 1) gate of a squeeze-and-excitation block.
__kernel void mul_activate(__global const float *a, __global const float *b, __global float *y) {
    const size_t i = get_global_id(0);
    if (i >= COUNT) return;
#if GATE_PLANE
    y[i] = activate(a[i] * b[i / GATE_PLANE]);
#else
    y[i] = activate(a[i] * b[i]);
#endif
}
#endif

#if defined(COUNT) && defined(GATHER)
// Output channel j of each image is input channel order[j] (a shuffle or a slice), then the activation.
__kernel void gather_channels(__global const float *x, __global const int *order, __global float *y) {
    const size_t i = get_global_id(0);
    if (i >= COUNT) return;
    const size_t p = i % GPLANE, j = (i / GPLANE) % COUT, n = i / ((size_t)GPLANE * COUT);
    y[i] = activate(x[(n * CIN + order[j]) * GPLANE + p]);
}
#endif

#if defined(INCLUDE_PAD)
// The mean of each window (NDRange as maxpool's): the sum of the taps inside the
// input over the divisor, the window's rows and columns inside the input (and its
// padding, with INCLUDE_PAD); a ceil-mode window's part past the padding never counts.
__kernel void avgpool(__global const float *x, __global float *y) {
    const int ox = get_global_id(0), oy = get_global_id(1), plane = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int y0 = oy * SH - PT, x0 = ox * SW - PL;
    __global const float *src = x + (size_t)plane * (H * W);
    float sum = 0.0f;
    for (int fy = 0; fy < KH; fy++) {
        const int iy = y0 + fy;
        if (iy < 0 || iy >= H) continue;
        for (int fx = 0; fx < KW; fx++) {
            const int ix = x0 + fx;
            if (ix >= 0 && ix < W)
                sum += src[iy * W + ix];
        }
    }
#if INCLUDE_PAD
    const int rows = min(y0 + KH, H + PB) - y0, cols = min(x0 + KW, W + PR) - x0;
#else
    const int rows = min(y0 + KH, H) - max(y0, 0), cols = min(x0 + KW, W) - max(x0, 0);
#endif
    y[(size_t)plane * (OH * OW) + oy * OW + ox] = activate(sum / (float)(rows * cols));
}
#endif

#if defined(ROWS) && defined(FEATURES)
// One work-item per row (an image's features): exp(x - max) / sum, in three passes.
__kernel void softmax(__global const float *x, __global float *y) {
    const size_t r = get_global_id(0);
    if (r >= ROWS) return;
    __global const float *src = x + r * FEATURES;
    __global float *dst = y + r * FEATURES;
    float m = -INFINITY;
    for (int i = 0; i < FEATURES; i++)
        m = max_keep_nan(m, src[i]);
    float sum = 0.0f;
    for (int i = 0; i < FEATURES; i++) {
        dst[i] = exp(src[i] - m);
        sum += dst[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < FEATURES; i++)
        dst[i] *= inv;
}
#endif
