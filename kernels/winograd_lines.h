// The two transforms of Winograd F(m x m, 3 x 3) one line at a time, B^T
// and A^T of backends/handwritten/winograd_math.py written out: shared by
// the one-kernel form (winograd.cl) and the GEMM form's transform kernels
// (winograd_transforms.cl).  Needs WM (2 or 4) and `vec` (kw_store.h).

// One line of the input transform, B^T applied to d[0], d[s], ... d[(a-1)s] in place.
inline void bt_line(float4* d, const int s)
{
#if WM == 2
    const float4 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
    d[0] = d0 - d2;
    d[s] = d1 + d2;
    d[2 * s] = d2 - d1;
    d[3 * s] = d1 - d3;
#else
    const float4 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    d[0] = 4.0f * d0 - 5.0f * d2 + d4;
    d[s] = d3 + d4 - 4.0f * (d1 + d2);
    d[2 * s] = 4.0f * (d1 - d2) + d4 - d3;
    d[3 * s] = 2.0f * (d3 - d1) + d4 - d2;
    d[4 * s] = 2.0f * (d1 - d3) + d4 - d2;
    d[5 * s] = 4.0f * d1 - 5.0f * d3 + d5;
#endif
}

// One line of the output transform, A^T applied to m[0], m[s], ... m[(a-1)s],
// into o[0], o[t], ... o[(m-1)t].
inline void at_line(const vec* m, const int s, vec* o, const int t)
{
#if WM == 2
    const vec m1 = m[s], m2 = m[2 * s];
    o[0] = m[0] + m1 + m2;
    o[t] = m1 - m2 - m[3 * s];
#else
    const vec m1 = m[s], m2 = m[2 * s], m3 = m[3 * s], m4 = m[4 * s];
    const vec p12 = m1 + m2, d12 = m1 - m2, p34 = m3 + m4, d34 = m3 - m4;
    o[0] = m[0] + p12 + p34;
    o[t] = d12 + 2.0f * d34;
    o[2 * t] = p12 + 4.0f * p34;
    o[3 * t] = d12 + 8.0f * d34 + m[5 * s];
#endif
}
