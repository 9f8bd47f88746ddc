// KW output channels per work-item as one vector (float4 or float8), and
// their store: bias added by the caller, the residual (RESIDUAL) and the
// activation here, channels past YC4 not written.  Shared by the blocked
// 1x1 (pointwise.cl) and Winograd (winograd.cl), whose epilogues are one.
// Needs common.h (activate4, zero_tail) and YV (the output's float4s a pixel).

#if KW == 4
typedef float4 vec;
#define VLOAD vload4
#elif KW == 8
typedef float8 vec;
#define VLOAD vload8
#else
#error "KW is 4 or 8"
#endif

// y[yp + k0/4 ...] = activate(o (+ res[rp + ...])), float4 by float4
inline void store_kw(const vec o, const int k0,
#if RESIDUAL
                     __global const float4* restrict res, const uint rp,
#endif
                     __global float4* restrict y, const uint yp)
{
    for (int h = 0; h < KW / 4; h++) {
        const int k4 = k0 / 4 + h;
        if (k4 >= YV)
            break;
#if KW == 4
        float4 part = o;
#else
        float4 part = h ? o.hi : o.lo;
#endif
#if RESIDUAL
        part += res[rp + k4];
#endif
        y[yp + k4] = zero_tail(activate4(part), k4);
    }
}
