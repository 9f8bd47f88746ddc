// The `morton` backend's other layers, on compact NCHW data in the two
// shared buffers (study, section 7.3: max-pooling as in 7.1, dense layers as
// the vectorised GEMV of 7.4).  Activation fused into each.
//
// -D ACT (0 none, 1 relu, 2 sigmoid) and per kernel:
//   maxpool    H, W, OH, OW, KH, KW, SH, SW       NDRange (OW, OH, N*C)
//   subsample  the same + C, BATCH                NDRange (OW, OH, C)
//   dense      D (inputs), F (outputs), BATCH     NDRange (F, BATCH)
// NDRanges are rounded up to the work-group; extra work-items return.
// No index is divided (Oclgrind's uninitialised-value check trips over the
// `freeze` LLVM adds after a division): subsample loops over the batch.

#include "common.h"

#if defined(KH) && !defined(C)
// Windows are never formed past the edge (OH, OW are floor-divided).
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

#if defined(KH) && defined(C)
// LeNet's subsampling: window mean * coeff[c] + bias[c].
__kernel void subsample(__global const float *x, __global float *y,
                        __global const float *coeff, __global const float *bias) {
    const int ox = get_global_id(0), oy = get_global_id(1), c = get_global_id(2);
    if (ox >= OW || oy >= OH || c >= C) return;
    const float scale = coeff[c] / (KH * KW), shift = bias[c];
    for (int n = 0; n < BATCH; n++) {
        const size_t plane = (size_t)n * C + c;
        __global const float *src = x + plane * (H * W) + (oy * SH) * W + ox * SW;
        float sum = 0.0f;
        for (int fy = 0; fy < KH; fy++)
            for (int fx = 0; fx < KW; fx++)
                sum += src[fy * W + fx];
        y[plane * (OH * OW) + oy * OW + ox] = activate(sum * scale + shift);
    }
}
#endif

#ifdef D
// y[n, f] = act(bias[f] + x[n, :] . Wt[f, :]), the weights stored
// transposed (F x D) at prepare so each work-item streams one contiguous
// row as float4 dot products.  At batch 1 this is the GEMV; a tail of D % 4
// inputs is summed one by one (vload4 needs only float alignment).  (A
// float4 accumulator summed at the end crashes Oclgrind 21.10's
// uninitialised-value plugin.)
__kernel void dense(__global const float *x, __global const float *wt,
                    __global const float *bias, __global float *y) {
    const int f = get_global_id(0), n = get_global_id(1);
    if (f >= F || n >= BATCH) return;
    __global const float *w = wt + (size_t)f * D;
    __global const float *v = x + (size_t)n * D;
    float acc = 0.0f;
    for (int k = 0; k < D / 4; k++)
        acc += dot(vload4(k, w), vload4(k, v));
    for (int k = D / 4 * 4; k < D; k++)
        acc += w[k] * v[k];
    y[(size_t)n * F + f] = activate(acc + bias[f]);
}
#endif
