// What CLBlast has no routine for, as small kernels of our own (the
// `clblast` and `clblast-convgemm` backends label them "(own kernel)"):
// an activation in place, bias + activation after xCONVGEMM or a GEMM with
// beta = 0 (which overwrite their output and take no bias), max-pooling,
// and (`clblast-best`) subsampling as average pooling with the channel's
// coefficient, bias and activation folded in.
//
// Compiled once per layer with -D constants:
//   ACT      0 none, 1 relu, 2 sigmoid
//   COUNT    activate_inplace, bias_activate: number of elements
//            (work-items past it return at once)
//   CHANNELS, PLANE       bias_activate: the data is (N, CHANNELS, PLANE)
//   H, W, OH, OW, KH, KW, SH, SW   maxpool, subsample: input (N*C, H, W) -> (N*C, OH, OW)
//   CHANNELS                        subsample: C

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

#ifdef KH
// One work-item per output element, NDRange (OW, OH, N*C) rounded up to the
// work-group shape.  Windows that would pass the edge are never formed (OH,
// OW are floor-divided), so every read is in range.  No index is divided:
// Oclgrind's uninitialised-value checker cannot run the `freeze` that LLVM
// puts after a division.
__kernel void maxpool(__global const float *x, __global float *y) {
    const int ox = get_global_id(0), oy = get_global_id(1), plane = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    __global const float *src = x + (size_t)plane * (H * W) + (oy * SH) * W + ox * SW;
    float best = src[0];
    for (int fy = 0; fy < KH; fy++)
        for (int fx = 0; fx < KW; fx++)
            best = max_keep_nan(best, src[fy * W + fx]);
    y[(size_t)plane * (OH * OW) + oy * OW + ox] = activate(best);
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
