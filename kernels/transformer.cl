// The transformer's own kernels (issue 45): what neither CLBlast nor a
// convolution kernel does.  Each reads and writes through strides, so the
// CLBlast backends (NCHW) and the hand-written ones (NHWC) share them.
//
// Compiled once per layer with -D constants (ACT as common.h says):
//   layernorm     C, PIX, CS, PS, IMG, N: N images of PIX pixels (tokens) of C channels, channel c of
//                 pixel p at c * CS + p * PS of image n's IMG floats; one work-item per (pixel, image)
//   tokens        C, HW, T, CLS, POS, ICS, IPS, OCS, OPS: (C, HW) -> (C, T), the class token first when
//                 CLS, the position embedding (C, T) added when POS; input channel c of pixel p at
//                 c * ICS + p * IPS, output token t at c * OCS + t * OPS; one work-item per (element, image)
//   gather_index  OUTN, INN: out[n * OUTN + i] = x[n * INN + index[i]]; one work-item per (element, image)
//   softmax_rows  ROWS, M, ADDED_ROWS: each of ROWS rows of M scores, plus row r % ADDED_ROWS of the added
//                 table where ADDED_ROWS > 0 (a relative position bias, -inf for a key a mask leaves out),
//                 as exp(s - max) / sum, in place; one work-item per row
//   cosine_qk     C, NT, DH, COPY_V: cosine attention (Swin v2's): in each group of 3C rows of NT tokens
//                 (a window's tokens side by side, or an image's map), each head's query and key (DH rows
//                 of one token, NT apart) divided by its L2 norm (at least COSINE_EPS), the query times
//                 its head's scale; the values copied where COPY_V (else x is y: in place); one
//                 work-item per (token, head, group)

#include "common.h"

#ifdef LN
__kernel void layernorm(__global const float *x, __global const float *scale, __global const float *bias,
                        __global float *y, const float eps)
{
    const int p = get_global_id(0), n = get_global_id(1);
    if (p >= PIX || n >= N) return;
    const size_t at = (size_t)n * IMG + (size_t)p * PS;
    float mean = 0.0f;
    for (int c = 0; c < C; c++)
        mean += x[at + (size_t)c * CS];
    mean /= C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) {
        const float d = x[at + (size_t)c * CS] - mean;
        var += d * d;
    }
    const float inv = rsqrt(var / C + eps);
    for (int c = 0; c < C; c++)
        y[at + (size_t)c * CS] = activate((x[at + (size_t)c * CS] - mean) * inv * scale[c] + bias[c]);
}
#endif

#ifdef TOKENS
__kernel void tokens(__global const float *x, __global const float *cls, __global const float *pos,
                     __global float *y)
{
    const int e = get_global_id(0), n = get_global_id(1);
    if (e >= C * T) return;
    const int c = e / T, t = e % T;
    float v = (CLS && t == 0) ? cls[c] : x[(size_t)n * C * HW + (size_t)c * ICS + (size_t)(t - CLS) * IPS];
    if (POS)
        v += pos[e];
    y[(size_t)n * C * T + (size_t)c * OCS + (size_t)t * OPS] = v;
}
#endif

#ifdef GATHER_INDEX
__kernel void gather_index(__global const float *x, __global const int *index, __global float *y)
{
    const int i = get_global_id(0), n = get_global_id(1);
    if (i >= OUTN) return;
    y[(size_t)n * OUTN + i] = activate(x[(size_t)n * INN + index[i]]);
}
#endif

#ifdef COSINE_QK
__kernel void cosine_qk(__global const float *x, __global const float *scale, __global float *y)
{
    const int t = get_global_id(0), h = get_global_id(1), grp = get_global_id(2);
    if (t >= NT) return;
    const size_t token = (size_t)grp * 3 * C * NT + t;
    for (int part = 0; part < 2; part++) {   // the query, then the key
        const size_t at = token + (size_t)(part * C + h * DH) * NT;
        float squares = 0.0f;
        for (int d = 0; d < DH; d++) {
            const float v = x[at + (size_t)d * NT];
            squares += v * v;
        }
        const float f = (part ? 1.0f : scale[h]) / fmax(sqrt(squares), COSINE_EPS);
        for (int d = 0; d < DH; d++)
            y[at + (size_t)d * NT] = x[at + (size_t)d * NT] * f;
    }
#if COPY_V
    const size_t at = token + (size_t)(2 * C + h * DH) * NT;
    for (int d = 0; d < DH; d++)
        y[at + (size_t)d * NT] = x[at + (size_t)d * NT];
#endif
}
#endif

#ifdef SOFTMAX_ROWS
__kernel void softmax_rows(__global float *s, __global const float *added)
{
    const size_t r = get_global_id(0);
    if (r >= ROWS) return;
    __global float *row = s + r * M;
#if ADDED_ROWS > 0
    __global const float *add = added + (r % ADDED_ROWS) * M;
    for (int j = 0; j < M; j++)
        row[j] += add[j];
#endif
    float best = -INFINITY;
    for (int j = 0; j < M; j++)
        best = max_keep_nan(best, row[j]);
    float sum = 0.0f;
    for (int j = 0; j < M; j++) {
        const float e = exp(row[j] - best);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < M; j++)
        row[j] *= inv;
}
#endif
