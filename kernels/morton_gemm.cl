// The Morton 4-2 GEMM (Rovder 2017, appendix 12.7; the study, Rovder 2018, section 7.3),
// with the layer's bias and activation fused into the store:
//
//     C = act(A B + bias)      A: M_PAD x L_PAD in R_2_4_R (the filters)
//                              B: L_PAD x N_PAD in C_4_2_C (the im2col matrix)
//                              C: M_PAD x N_PAD row-major (K feature maps of N_PAD)
//
// Work-item (i, j) computes the 2x2 patch C[2i..2i+1, 2j..2j+1].  In
// R_2_4_R rows 2i and 2i+1 form one strip of 2x4 tiles, so the strip is
// L_PAD/2 float4s from A + i*L_PAD/2 on, quadruplet k of row 2i at 2k and
// of row 2i+1 at 2k+1; C_4_2_C does the same for columns 2j and 2j+1 of B.
// Each step slides both windows by one tile: two float4 loads per matrix,
// four dot products.  The NDRange is (M_PAD/2, N_PAD/2) in work-groups of
// WG0 x WG1 (the study's best 4 x 16 makes C a grid of 8 x 32 blocks), so
// there are no edge work-items: the padding is what keeps every read in range.
//
// -D constants: L_PAD (multiple of 4), N_PAD, ACT (0 none, 1 relu, 2 sigmoid)

#include "common.h"

__kernel void morton_gemm(__global const float4 *A, __global const float4 *B,
                          __global const float *bias, __global float *C) {
    const size_t i = get_global_id(0), j = get_global_id(1);
    __global const float4 *a = A + i * (L_PAD / 2);
    __global const float4 *b = B + j * (L_PAD / 2);
    float4 ab = (float4)(0.0f);
    for (int k = 0; k < L_PAD / 2; k += 2) {
        const float4 a0 = a[k], a1 = a[k + 1], b0 = b[k], b1 = b[k + 1];
        ab += (float4)(dot(a0, b0), dot(a1, b0), dot(a0, b1), dot(a1, b1));
    }
    const float b_top = bias[2 * i], b_bottom = bias[2 * i + 1];
    __global float *c = C + (2 * i) * (size_t)N_PAD + 2 * j;
    vstore2((float2)(activate(ab.s0 + b_top), activate(ab.s2 + b_top)), 0, c);
    vstore2((float2)(activate(ab.s1 + b_bottom), activate(ab.s3 + b_bottom)), 0, c + N_PAD);
}
