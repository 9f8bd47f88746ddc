// The tile products of Winograd F(m x m, 3 x 3) as one batched GEMM
// (backends/handwritten/winograd_gemm.py; the transforms around it are
// kernels/winograd_transforms.cl).  For each of the E positions e (group
// id 2):
//     M[e] (GM x GN) = V[e]^T (GM x GC) x U[e] (GC x GN)
// rows the layer's tiles (GM), columns its output channels (GN, stored: a
// multiple of 4), summed over its input channels (GC, stored).
//   V: (E, GC/4, GM) float4s, four channels of one tile each (wg_input's)
//   U: (E, GC, GN) floats, the filters transformed once at prepare
//   M: (E, GM, GN) floats
//
// A work-group of (TN/RN, TM/RM) work-items computes a TM x TN tile of M[e],
// each work-item an RM x RN block of it in registers (float4 over columns);
// the sum goes TK channels at a time through local memory (V's slice
// transposed to scalars, so a float4 read gives four rows), the next slice's
// global loads issued before the current one's multiply-adds.  Rows and
// columns past GM and GN are loaded as zeros and not stored, so no buffer
// is padded beyond four channels.
//
// -D constants: E, GM, GN, GC; TM, TN, TK (a multiple of 4 dividing GC),
// RM, RN (multiples of 4 dividing TM and TN); STAGED 1: wg_gemm, 0:
// wg_gemm_global (below: a CPU's); PARTS (wg_gemm only, TK dividing
// GC / PARTS): the sum over channels cut in PARTS, each part's products a
// work-group of its own (group id 2: e + E * part) written to M's part
// (PARTS, E, GM, GN), which the output transform adds up.  A layer of few
// tiles and many channels (VGG-16's conv4 and conv5 at batch 1: 16-49 rows)
// gives too few work-groups to hide the loads' latency otherwise.

#ifndef PARTS
#define PARTS 1
#endif
#define TX (TN / RN)
#define TY (TM / RM)
#define THREADS (TX * TY)
#define RN4 (RN / 4)
#define RM4 (RM / 4)
#define GQ (GC / 4)
#define GV (GN / 4)
#define A_SLOTS (TM * (TK / 4))
#define B_SLOTS (TK * (TN / 4))
#define A_PER ((A_SLOTS + THREADS - 1) / THREADS)
#define B_PER ((B_SLOTS + THREADS - 1) / THREADS)

#if STAGED
__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void wg_gemm(__global const float4* restrict v,
             __global const float4* restrict u,
             __global float4* restrict mm)
{
    // one float4 of padding per row spreads the transposing stores over the banks
    __local float4 As[TK][TM / 4 + 1];
    __local float4 Bs[TK][TN / 4];
    __local float* As1 = (__local float*)As;

    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint tid = ty * TX + tx;
    const uint m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    // the remainder as a difference: a `%` beside the `/` makes LLVM freeze the group id (see tiled_conv.cl)
    const uint g2 = get_group_id(2), part = g2 / E, e = g2 - part * E;
    const uint c_first = part * (GC / PARTS), c_end = c_first + GC / PARTS;
    const __global float4* ve = v + (size_t)e * GQ * GM;
    const __global float4* ue = u + (size_t)e * GC * GV;

    float4 acc[RM][RN4];
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN4; j++)
            acc[i][j] = (float4)(0.0f);

    float4 ra[A_PER], rb[B_PER];
    // slot s of a slice: A's row m (fastest: coalesced along the tiles) of float4 q;
    // B's float4 j4 (fastest) of channel kk
#define FETCH(c0) {                                                                         \
        for (int s = 0; s < A_PER; s++) {                                                   \
            const uint slot = tid + s * THREADS, q = slot / TM, m = slot - q * TM;          \
            ra[s] = (slot < A_SLOTS && m0 + m < GM) ? ve[((c0) / 4 + q) * GM + m0 + m]      \
                                                    : (float4)(0.0f);                       \
        }                                                                                   \
        for (int s = 0; s < B_PER; s++) {                                                   \
            const uint slot = tid + s * THREADS, kk = slot / (TN / 4), j4 = slot - kk * (TN / 4); \
            rb[s] = (slot < B_SLOTS && n0 / 4 + j4 < GV) ? ue[((c0) + kk) * GV + n0 / 4 + j4] \
                                                         : (float4)(0.0f);                  \
        }                                                                                   \
    }

    FETCH(c_first)
    for (uint c0 = c_first; c0 < c_end; c0 += TK) {
        for (int s = 0; s < A_PER; s++) {
            const uint slot = tid + s * THREADS;
            if (slot < A_SLOTS) {
                const uint q = slot / TM, m = slot - q * TM, at = 4 * q * (TM + 4) + m;
                As1[at] = ra[s].x;
                As1[at + (TM + 4)] = ra[s].y;
                As1[at + 2 * (TM + 4)] = ra[s].z;
                As1[at + 3 * (TM + 4)] = ra[s].w;
            }
        }
        for (int s = 0; s < B_PER; s++) {
            const uint slot = tid + s * THREADS;
            if (slot < B_SLOTS)
                Bs[slot / (TN / 4)][slot % (TN / 4)] = rb[s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (c0 + TK < c_end)
            FETCH(c0 + TK)
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

    // work-item (tx, ty) holds rows (g * TY + ty) * 4 + i and column float4s j * TX + tx of the tile
    __global float4* me = mm + ((size_t)part * E + e) * GM * GV;
    for (int g = 0; g < RM4; g++)
        for (int i = 0; i < 4; i++) {
            const uint r = m0 + (g * TY + ty) * 4 + i;
            if (r >= GM)
                continue;
            for (int j = 0; j < RN4; j++) {
                const uint k4 = n0 / 4 + j * TX + tx;
                if (k4 < GV)
                    me[r * GV + k4] = acc[4 * g + i][j];
            }
        }
}
#elif PARTS > 1
#error "PARTS > 1 is wg_gemm's alone"
#elif VEC

// The same product shaped for a CPU's vector units, as kernels/cpu_conv.cl's conv_vec: a work-item
// computes RP rows (tiles) x NV vectors of VW columns (VW the device's preferred float width, 16 on
// AVX-512), each multiply-add one full-width vector instruction, each loaded U vector feeding RP rows.
// No local memory, no barrier.  -D VEC 1, VW (8 or 16), NV, RP; GN a multiple of KW = VW * NV.  U is
// reordered at prepare to (E, GN / KW, GC, KW), so that a work-item's filters are one contiguous stream
// (rows GN apart cost a TLB miss a page: cpu_conv.cl's weights are reordered so for that).
#include "vector_type.h"
__kernel void wg_gemm_vec(__global const float4* restrict v,
                          __global const float* restrict u,
                          __global float* restrict mm)
{
    const uint k0 = get_global_id(0) * (VW * NV);
    const uint r0 = get_global_id(1) * RP;
    const uint e = get_global_id(2);
    if (k0 >= GN || r0 >= GM)
        return;
    const __global float4* ve = v + (size_t)e * GQ * GM;
    const __global float* ue = u + ((size_t)e * (GN / (VW * NV)) + k0 / (VW * NV)) * GC * (VW * NV);
    vec acc[RP][NV];
    uint rows[RP];   // a row past the last reads the last's (never stored)
    for (int r = 0; r < RP; r++) {
        rows[r] = min(r0 + r, (uint)GM - 1);
        for (int j = 0; j < NV; j++)
            acc[r][j] = (vec)(0.0f);
    }
    for (uint q = 0; q < GQ; q++) {
        float a[RP][4];   // four channels of each row
#pragma unroll
        for (int r = 0; r < RP; r++)
            vstore4(ve[q * GM + rows[r]], 0, a[r]);
        const __global float* uq = ue + (size_t)4 * q * (VW * NV);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            vec w[NV];
#pragma unroll
            for (int j = 0; j < NV; j++)
                w[j] = VLOAD(0, uq + i * (VW * NV) + j * VW);
#pragma unroll
            for (int r = 0; r < RP; r++) {
                const vec b = (vec)(a[r][i]);
#pragma unroll
                for (int j = 0; j < NV; j++)
                    acc[r][j] = fma(b, w[j], acc[r][j]);
            }
        }
    }
    __global float* me = mm + (size_t)e * GM * GN + k0;
    for (int r = 0; r < RP; r++) {
        if (r0 + r >= GM)
            break;
        for (int j = 0; j < NV; j++)
            VSTORE(acc[r][j], 0, me + (size_t)(r0 + r) * GN + j * VW);
    }
}
#else

// The same product without local memory, for a CPU (PoCL), where a work-group
// runs as loops over its work-items cut at each barrier, so that wg_gemm's
// accumulators would live in memory across the cuts: each work-item reads
// its RM rows of V and RN columns of U straight from global memory (the
// caches serve the neighbours' reuse) and keeps its block in registers.
// Work-item (tx, ty) of the group holds rows m0 + ty * RM + i, column
// float4s n0 / 4 + tx * RN4 + j.
__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void wg_gemm_global(__global const float4* restrict v,
                    __global const float4* restrict u,
                    __global float4* restrict mm)
{
    const uint e = get_group_id(2);
    const uint r0 = get_group_id(1) * TM + get_local_id(1) * RM;
    const uint k0 = get_group_id(0) * (TN / 4) + get_local_id(0) * RN4;
    const __global float4* ve = v + (size_t)e * GQ * GM;
    const __global float4* ue = u + (size_t)e * GC * GV;
    float4 acc[RM][RN4];
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN4; j++)
            acc[i][j] = (float4)(0.0f);
    for (uint q = 0; q < GQ; q++) {
        float4 a[RM], b0[RN4], b1[RN4], b2[RN4], b3[RN4];
        for (int i = 0; i < RM; i++)
            a[i] = r0 + i < GM ? ve[q * GM + r0 + i] : (float4)(0.0f);
        for (int j = 0; j < RN4; j++) {
            const bool in = k0 + j < GV;
            const __global float4* uc = ue + (size_t)4 * q * GV + k0 + j;
            b0[j] = in ? uc[0] : (float4)(0.0f);
            b1[j] = in ? uc[GV] : (float4)(0.0f);
            b2[j] = in ? uc[2 * GV] : (float4)(0.0f);
            b3[j] = in ? uc[3 * GV] : (float4)(0.0f);
        }
        for (int i = 0; i < RM; i++)
            for (int j = 0; j < RN4; j++) {
                acc[i][j] = mad((float4)(a[i].x), b0[j], acc[i][j]);
                acc[i][j] = mad((float4)(a[i].y), b1[j], acc[i][j]);
                acc[i][j] = mad((float4)(a[i].z), b2[j], acc[i][j]);
                acc[i][j] = mad((float4)(a[i].w), b3[j], acc[i][j]);
            }
    }
    __global float4* me = mm + (size_t)e * GM * GV;
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN4; j++)
            if (r0 + i < GM && k0 + j < GV)
                me[(r0 + i) * GV + k0 + j] = acc[i][j];
}
#endif
