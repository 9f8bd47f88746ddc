// `baseline` (Rovder 2018, chapter 6, section 7.1, appendices B and C):
// one kernel per layer with bias and activation fused, NCHW, one work-item
// per output element mapped as the study did (global id 0 = output row,
// 1 = output column, 2 = output channel), the batch looped inside.
//
// Every shape is a -D constant, so each layer gets its own build, compiled
// once at prepare; CONV, SUBSAMPLE, MAXPOOL or DENSE picks the kernel built:
//   N                 batch
//   XC, XHP, XWP      input channels and stored height/width (border included)
//   YC, YHP, YWP      output channels and stored height/width
//   YPT, YPL          output border above / left of the interior (table 7.1)
//   FH, FW, SH, SW    window and stride
//   IN, OUT           dense: input and output features
//   ACT               0 none, 1 relu, 2 sigmoid
// A conv's input buffer already holds the zero border the conv needs, so no
// read is bounds-checked; the output is written into the interior of a
// buffer padded for the next layer, whose border no kernel ever writes.
// The study accumulated in double; float keeps this working on devices
// without fp64 and stays well inside the float32 tolerance.

#include "common.h"

#define X_IMAGE (XC * XHP * XWP)
#define Y_AT(n, c, row, col) (((n) * YC + (c)) * YHP * YWP + ((row) + YPT) * YWP + (col) + YPL)

#ifdef CONV
// Source B.1 / C.1: loop-based convolution.  The window loops have -D
// bounds, so they unroll fully (LeNet's C1 ran 1.4x faster so on PoCL).
__kernel void conv(__global const float* restrict x,
                   __global const float* restrict w,      // (YC, XC, FH, FW)
                   __global const float* restrict b,
                   __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), k = get_global_id(2);
    const __global float* wk = w + k * (XC * FH * FW);
    const float bias = b[k];
    for (int n = 0; n < N; n++) {
        const __global float* xn = x + n * X_IMAGE + row * SH * XWP + col * SW;
        float acc = 0.0f;
        for (int c = 0; c < XC; c++) {
            #pragma unroll
            for (int fy = 0; fy < FH; fy++) {
                #pragma unroll
                for (int fx = 0; fx < FW; fx++)
                    acc += xn[(c * XHP + fy) * XWP + fx] * wk[(c * FH + fy) * FW + fx];
            }
        }
        y[Y_AT(n, k, row, col)] = activate(acc + bias);
    }
}
#endif

#ifdef SUBSAMPLE
// Section 6.1.3: a real subsampling kernel (mean of a window of one channel,
// times the channel's coefficient, plus its bias), not a sparse convolution.
__kernel void subsample(__global const float* restrict x,
                        __global const float* restrict coeff,
                        __global const float* restrict b,
                        __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), c = get_global_id(2);
    const float scale = coeff[c] / (float)(FH * FW), bias = b[c];
    for (int n = 0; n < N; n++) {
        const __global float* xn = x + n * X_IMAGE + c * XHP * XWP + row * SH * XWP + col * SW;
        float sum = 0.0f;
        for (int fy = 0; fy < FH; fy++)
            for (int fx = 0; fx < FW; fx++)
                sum += xn[fy * XWP + fx];
        y[Y_AT(n, c, row, col)] = activate(sum * scale + bias);
    }
}
#endif

#ifdef MAXPOOL
// Section 7.1: max-pool; reads an unpadded buffer and writes into one padded
// for its consumer (keeps the padding) or an unpadded one (strips it).
__kernel void maxpool(__global const float* restrict x, __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), c = get_global_id(2);
    for (int n = 0; n < N; n++) {
        const __global float* xn = x + n * X_IMAGE + c * XHP * XWP + row * SH * XWP + col * SW;
        float m = xn[0];
        for (int fy = 0; fy < FH; fy++)
            for (int fx = 0; fx < FW; fx++)
                m = max_keep_nan(m, xn[fy * XWP + fx]);
        y[Y_AT(n, c, row, col)] = activate(m);
    }
}
#endif

#ifdef DENSE
// Source 6.1: fully connected, y = x W + b, W (IN, OUT) row-major; one
// work-item per output element (image, feature).
__kernel void dense(__global const float* restrict x,
                    __global const float* restrict w,
                    __global const float* restrict b,
                    __global float* restrict y)
{
    const int n = get_global_id(0), j = get_global_id(1);
    const __global float* xn = x + n * IN;
    float acc = 0.0f;
    for (int i = 0; i < IN; i++)
        acc += xn[i] * w[i * OUT + j];
    y[n * OUT + j] = activate(acc + b[j]);
}
#endif
