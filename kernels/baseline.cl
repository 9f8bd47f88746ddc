// `baseline` (Rovder 2018, chapter 6, section 7.1, appendices B and C):
// one kernel per layer with bias and activation fused, NCHW, one work-item
// per output element mapped as the study did (global id 0 = output row,
// 1 = output column, 2 = output channel), the batch looped inside.
//
// Every shape is a -D constant, so each layer gets its own build, compiled
// once at prepare; CONV, SUBSAMPLE, MAXPOOL, ADD, GLOBAL_AVGPOOL or DENSE
// picks the kernel built:
//   N                 batch
//   XC, XHP, XWP      input channels and stored height/width (border included)
//   XH, XW            input height/width (the interior)
//   XPT, XPL          the input buffer's border above / left of the interior:
//                     in a graph it may be wider than this layer's padding
//                     (another reader of the buffer wants more), so a window
//                     starts at an offset into it
//   PT, PL            the layer's own padding above / left (conv, max-pool)
//   XCG, YCG          conv: input and output channels per group (XC and YC
//                     ungrouped; 1 and 1 depthwise)
//   POOL_PAD          max-pool: 1 when it pads (bounds-checked: padding never wins)
//   YC, YHP, YWP      output channels and stored height/width
//   YPT, YPL          output border above / left of the interior (table 7.1)
//   FH, FW, SH, SW    window and stride
//   ARITY             add: its inputs (2 to 4), each read through its own
//                     border X<i>HP, X<i>WP, X<i>PT, X<i>PL
//   IN, OUT           dense: input elements as stored (border included), outputs
//   ACT               0 none, 1 relu, 2 sigmoid, 3 relu6, 4 tanh
// A conv's input buffer already holds the zero border the conv needs, so no
// read is bounds-checked; the output is written into the interior of a
// buffer padded for the next layer, whose border no kernel ever writes.
// The study accumulated in double; float keeps this working on devices
// without fp64 and stays well inside the float32 tolerance.

#include "common.h"

// element (row, col) of the input's interior; the border's rows and columns are -1, -2...
#define X_AT(n, c, row, col) ((((n) * XC + (c)) * XHP + (row) + XPT) * XWP + (col) + XPL)
#define Y_AT(n, c, row, col) (((n) * YC + (c)) * YHP * YWP + ((row) + YPT) * YWP + (col) + YPL)

#ifdef CONV
// RESIDUAL (1): the conv is the last input of an add that alone reads it;
// its epilogue adds the add's other input `res` (border RHP, RWP, RPT,
// RPL) and applies the add's activation (ACT), writing the add's output.
#define R_AT(n, c, row, col) ((((n) * YC + (c)) * RHP + (row) + RPT) * RWP + (col) + RPL)

// Source B.1 / C.1: loop-based convolution.  The window loops have -D
// bounds, so they unroll fully (LeNet's C1 ran 1.4x faster so on PoCL).
// A grouped conv is the same loop over its filter's group of channels
// only: filters are (YC, XCG, FH, FW), as the net gives them.
__kernel void conv(__global const float* restrict x,
                   __global const float* restrict w,      // (YC, XCG, FH, FW)
                   __global const float* restrict b,
#if RESIDUAL
                   __global const float* restrict res,
#endif
                   __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), k = get_global_id(2);
    const __global float* wk = w + k * (XCG * FH * FW);
    const int c0 = (k / YCG) * XCG;   // the group's first input channel
    const float bias = b[k];
    for (int n = 0; n < N; n++) {
        const __global float* xn = x + X_AT(n, c0, row * SH - PT, col * SW - PL);
        float acc = 0.0f;
        for (int c = 0; c < XCG; c++) {
            #pragma unroll
            for (int fy = 0; fy < FH; fy++) {
                #pragma unroll
                for (int fx = 0; fx < FW; fx++)
                    acc += xn[(c * XHP + fy) * XWP + fx] * wk[(c * FH + fy) * FW + fx];
            }
        }
#if RESIDUAL
        y[Y_AT(n, k, row, col)] = activate(acc + bias + res[R_AT(n, k, row, col)]);
#else
        y[Y_AT(n, k, row, col)] = activate(acc + bias);
#endif
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
        const __global float* xn = x + X_AT(n, c, row * SH, col * SW);
        float sum = 0.0f;
        for (int fy = 0; fy < FH; fy++)
            for (int fx = 0; fx < FW; fx++)
                sum += xn[fy * XWP + fx];
        y[Y_AT(n, c, row, col)] = activate(sum * scale + bias);
    }
}
#endif

#ifdef MAXPOOL
// Section 7.1: max-pool; writes into a buffer padded for its consumer
// (keeps the padding) or an unpadded one (strips it).
__kernel void maxpool(__global const float* restrict x, __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), c = get_global_id(2);
    for (int n = 0; n < N; n++) {
#if POOL_PAD
        // the window's taps outside the input are skipped, as if they held
        // -inf (the buffer's border holds zeros for its conv readers); a
        // padding narrower than the window leaves every window an input
        const int y0 = row * SH - PT, x0 = col * SW - PL;
        float m = -INFINITY;
        for (int fy = max(0, -y0); fy < min(FH, XH - y0); fy++)
            for (int fx = max(0, -x0); fx < min(FW, XW - x0); fx++)
                m = max_keep_nan(m, x[X_AT(n, c, y0 + fy, x0 + fx)]);
#else
        const __global float* xn = x + X_AT(n, c, row * SH, col * SW);
        float m = xn[0];
        for (int fy = 0; fy < FH; fy++)
            for (int fx = 0; fx < FW; fx++)
                m = max_keep_nan(m, xn[fy * XWP + fx]);
#endif
        y[Y_AT(n, c, row, col)] = activate(m);
    }
}
#endif

#ifdef ADD
// The residual add: the sum of ARITY inputs of one shape, then the
// activation; one work-item per output element, each input read through
// its own border (its other readers may want different ones).
#define AT(i, n, c, row, col) \
    ((((n) * YC + (c)) * X##i##HP + (row) + X##i##PT) * X##i##WP + (col) + X##i##PL)

__kernel void add(__global const float* restrict x0,
                  __global const float* restrict x1,
#if ARITY > 2
                  __global const float* restrict x2,
#endif
#if ARITY > 3
                  __global const float* restrict x3,
#endif
                  __global float* restrict y)
{
    const int row = get_global_id(0), col = get_global_id(1), c = get_global_id(2);
    for (int n = 0; n < N; n++) {
        float s = x0[AT(0, n, c, row, col)] + x1[AT(1, n, c, row, col)];
#if ARITY > 2
        s += x2[AT(2, n, c, row, col)];
#endif
#if ARITY > 3
        s += x3[AT(3, n, c, row, col)];
#endif
        y[Y_AT(n, c, row, col)] = activate(s);
    }
}
#endif

#ifdef GLOBAL_AVGPOOL
// The mean of each channel over the XH x XW interior: the output is
// (C, 1, 1), so one work-item per channel (id 2), ids 0 and 1 of size 1.
__kernel void global_avgpool(__global const float* restrict x, __global float* restrict y)
{
    const int c = get_global_id(2);
    for (int n = 0; n < N; n++) {
        float sum = 0.0f;
        for (int row = 0; row < XH; row++)
            for (int col = 0; col < XW; col++)
                sum += x[X_AT(n, c, row, col)];
        y[Y_AT(n, c, 0, 0)] = activate(sum * (1.0f / (XH * XW)));
    }
}
#endif

#ifdef DENSE
// Source 6.1: fully connected, y = x W + b, W (IN, OUT) row-major; one
// work-item per output element (image, feature).  The input is read as
// stored, one flat vector per image: where it carries a border (a conv
// reads it too), W has zero rows there (backends/handwritten/baseline.py).
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
