// Device peak measurement: multiply-add throughput.
// VEC (float4 or float8) and ITERS come as -D defines.  Eight independent
// accumulators per work item keep the FMA pipelines full; the result is
// written only if a lane equals a value it never reaches, so the compiler cannot
// drop the arithmetic while the write almost never happens.
__kernel void mad_chain(__global float *out, float seed)
{
    const VEC b = (VEC)(0.999f);
    const VEC c = (VEC)(0.001f);
    VEC a0 = (VEC)(seed) + (VEC)(get_global_id(0) * 1e-9f);
    VEC a1 = a0 + c, a2 = a1 + c, a3 = a2 + c, a4 = a3 + c, a5 = a4 + c, a6 = a5 + c, a7 = a6 + c;
    for (int i = 0; i < ITERS; i++) {
        a0 = mad(a0, b, c); a1 = mad(a1, b, c); a2 = mad(a2, b, c); a3 = mad(a3, b, c);
        a4 = mad(a4, b, c); a5 = mad(a5, b, c); a6 = mad(a6, b, c); a7 = mad(a7, b, c);
    }
    VEC s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    if (any(s == (VEC)(-1.0f))) out[get_global_id(0)] = s.s0;
}
