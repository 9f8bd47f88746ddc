// The transformer's kernels of the hand-written backends (issue 45), on their NHWC buffers with a zero
// border and channels stored in fours (backends/handwritten/layout.py).  A pixel's address is given by the
// host as an offset into its image's stored buffer (so a border, a channel pitch or a view cost nothing
// here); channels are contiguous from there.
//
//   layernorm   C, PIXELS, XIMG, YIMG: over the C channels of each of PIXELS pixels of an image (XIMG,
//               YIMG floats an image), addresses xpix[p], ypix[p]; one work-item per (pixel, image)
//   gather      COUNT, XIMG, YIMG: y[yaddr[i]] = act(x[xaddr[i]]) (with CLS: a negative xaddr -1 - c
//               reads the class token's channel c; with POS: plus pos[i]); one work-item per (element, image)
//   attention   the fused attention: DH (a multiple of 4), NT tokens a window, WINDOWS, HEADS, C (channels
//               of the output; the input holds 3C: q, k, v), QT queries a work-group (its local size), KT keys
//               a tile, XIMG, YIMG, ADDED (0: nothing added to the scores; else the table's windows, 1 or
//               WINDOWS), SCALE.  Work-group (query tile, window * HEADS + head, image).  Each work-item
//               holds one query's DH values and its running max, sum and weighted sum (online softmax),
//               the work-group loads each tile of KT keys' and values' DH channels into local memory,
//               so the score matrix is never written anywhere.  COSINE (Swin v2's cosine attention): each
//               query and key divided by its L2 norm (at least COSINE_EPS), the query times its head's
//               scale (the argument `cosine`) instead of SCALE; each key's inverse norm is worked out once
//               per tile, in local memory beside it.

#include "common.h"

#ifdef LAYERNORM
__kernel void layernorm(__global const float *x, __global const int *xpix, __global const int *ypix,
                        __global const float *scale, __global const float *bias, __global float *y,
                        const float eps)
{
    const int p = get_global_id(0), n = get_global_id(1);
    if (p >= PIXELS) return;
    __global const float *src = x + (size_t)n * XIMG + xpix[p];
    __global float *dst = y + (size_t)n * YIMG + ypix[p];
    float mean = 0.0f;
    for (int c = 0; c < C; c++)
        mean += src[c];
    mean /= C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) {
        const float d = src[c] - mean;
        var += d * d;
    }
    const float inv = rsqrt(var / C + eps);
    for (int c = 0; c < C; c++)
        dst[c] = activate((src[c] - mean) * inv * scale[c] + bias[c]);
}
#endif

#ifdef GATHER
__kernel void gather(__global const float *x, __global const int *xaddr, __global const int *yaddr,
                     __global const float *cls, __global const float *pos, __global float *y)
{
    const int i = get_global_id(0), n = get_global_id(1);
    if (i >= COUNT) return;
    const int a = xaddr[i];
#ifdef CLS
    float v = a < 0 ? cls[-1 - a] : x[(size_t)n * XIMG + a];
#else
    float v = x[(size_t)n * XIMG + a];
#endif
#ifdef POS
    v += pos[i];
#endif
    y[(size_t)n * YIMG + yaddr[i]] = activate(v);
}
#endif

#ifdef ATTENTION
__kernel __attribute__((reqd_work_group_size(QT, 1, 1)))
void attention(__global const float *x, __global const int *xpix, __global const int *ypix,
               __global const float *added,
#if COSINE
               __global const float *cosine,
#endif
               __global float *y)
{
    const int lid = get_local_id(0);
    const int i = get_group_id(0) * QT + lid;            // the query's token in its window
    const int wh = get_global_id(1), n = get_global_id(2);
    const int win = wh / HEADS, head = wh % HEADS;
    const bool live = i < NT;
    __global const float *img = x + (size_t)n * XIMG;
    __local float4 ks[KT * DH / 4], vs[KT * DH / 4];
#if COSINE
    __local float kinv[KT];   // each key's 1 / norm
#endif

    float4 q[DH / 4], acc[DH / 4];
    if (live) {
        __global const float4 *qp = (__global const float4 *)(img + xpix[win * NT + i] + head * DH);
        float4 squares = (float4)(0.0f);
        for (int d = 0; d < DH / 4; d++) {
            q[d] = qp[d];
            squares += q[d] * q[d];
            acc[d] = (float4)(0.0f);
        }
#if COSINE
        const float f = cosine[head] / fmax(sqrt(squares.x + squares.y + squares.z + squares.w), COSINE_EPS);
#else
        const float f = SCALE;
#endif
        for (int d = 0; d < DH / 4; d++)
            q[d] *= f;
    }
    float best = -INFINITY, sum = 0.0f;
#if ADDED
    __global const float *add = added + ((size_t)((ADDED > 1 ? win : 0) * HEADS + head) * NT + (live ? i : 0)) * NT;
#endif
    for (int t0 = 0; t0 < NT; t0 += KT) {
        // the work-group loads KT keys and values (DH channels each) into local memory
        for (int e = lid; e < KT * DH / 4; e += QT) {
            const int j = t0 + e / (DH / 4), d = e % (DH / 4);
            float4 kv = (float4)(0.0f), vv = (float4)(0.0f);
            if (j < NT) {
                __global const float4 *kp = (__global const float4 *)(img + xpix[win * NT + j] + C + head * DH);
                kv = kp[d];
                vv = kp[C / 4 + d];
            }
            ks[e] = kv;
            vs[e] = vv;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#if COSINE
        for (int j = lid; j < KT; j += QT) {
            float4 squares = (float4)(0.0f);
            for (int d = 0; d < DH / 4; d++)
                squares += ks[j * (DH / 4) + d] * ks[j * (DH / 4) + d];
            kinv[j] = 1.0f / fmax(sqrt(squares.x + squares.y + squares.z + squares.w), COSINE_EPS);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
        if (live) {
            const int stop = min(KT, NT - t0);
            for (int jj = 0; jj < stop; jj++) {
                float4 s4 = (float4)(0.0f);
                for (int d = 0; d < DH / 4; d++)
                    s4 += q[d] * ks[jj * (DH / 4) + d];
                float s = s4.x + s4.y + s4.z + s4.w;
#if COSINE
                s *= kinv[jj];
#endif
#if ADDED
                s += add[t0 + jj];
                if (s == -INFINITY)   // a key the shift's mask leaves out
                    continue;
#endif
                if (s > best) {   // a new maximum: what was summed so far shrinks by exp(old - new)
                    const float shrink = exp(best - s);
                    sum *= shrink;
                    for (int d = 0; d < DH / 4; d++)
                        acc[d] *= shrink;
                    best = s;
                }
                const float p = exp(s - best);
                sum += p;
                for (int d = 0; d < DH / 4; d++)
                    acc[d] += p * vs[jj * (DH / 4) + d];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (live) {
        __global float4 *out = (__global float4 *)(y + (size_t)n * YIMG + ypix[win * NT + i] + head * DH);
        const float inv = 1.0f / sum;
        for (int d = 0; d < DH / 4; d++)
            out[d] = acc[d] * inv;
    }
}
#endif
