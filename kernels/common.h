// What our kernels share.  A kernel file takes it with
//     #include "common.h"
// which kernels/__init__.py pastes in on the host, so every driver's
// program cache sees the header's text in the source it hashes.
//
// -D ACT: 0 none, 1 relu, 2 sigmoid, 3 relu6, 4 tanh, 5 hardsigmoid, 6 hardswish, 7 silu, 8 gelu (erf),
// 9 gelu (tanh form) (required).
// hardsigmoid is PyTorch's, relu6(x + 3) / 6; hardswish x times it; silu x * sigmoid(x).  With YC and YC4 defined
// (output channels, and as stored: a multiple of 4), zero_tail too.

#ifndef ACT
#error "ACT must be defined: 0 none, 1 relu, 2 sigmoid, 3 relu6, 4 tanh, 5 hardsigmoid, 6 hardswish, 7 silu, 8 gelu, 9 gelu_tanh"
#endif

// A NaN (an element never written: buffers start poisoned with NaN) passes
// through a ReLU, as in the oracle; fmax would drop it.
inline float relu(float v)
{
    return v < 0.0f ? 0.0f : v;
}

inline float sigmoid(float v)
{
    return 1.0f / (1.0f + exp(-v));   // exp overflows to inf below -88: the result is then 0, as it should be
}

// min(max(v, 0), 6), MobileNet-v2's; a NaN passes through, as in relu
inline float relu6(float v)
{
    return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
}

// relu6(v + 3) / 6: MobileNet-v3's gate
inline float hardsigmoid(float v)
{
    return relu6(v + 3.0f) * (1.0f / 6.0f);
}

// x * Phi(x), the exact gelu (OpenCL's erf), and its tanh form
inline float gelu(float v)
{
    return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
}

inline float gelu_tanh(float v)
{
    return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
}

// The layer's activation (-D ACT).
inline float activate(float v)
{
#if ACT == 1
    return relu(v);
#elif ACT == 2
    return sigmoid(v);
#elif ACT == 3
    return relu6(v);
#elif ACT == 4
    return tanh(v);
#elif ACT == 5
    return hardsigmoid(v);
#elif ACT == 6
    return v * hardsigmoid(v);
#elif ACT == 7
    return v * sigmoid(v);
#elif ACT == 8
    return gelu(v);
#elif ACT == 9
    return gelu_tanh(v);
#else
    return v;
#endif
}

// min(max(v, 0), 6) of four values; a NaN passes through, as in relu6
inline float4 relu6_4(float4 v)
{
    return select(select(v, (float4)(6.0f), isgreater(v, (float4)(6.0f))), (float4)(0.0f), isless(v, (float4)(0.0f)));
}

// Activation `act` (an ACT code) of four values; a constant `act` folds to one case.
// A kernel with two activations (vectorised's dw_pw: the depthwise's, then the 1x1's) names the other's code.
inline float4 activation4(float4 v, const int act)
{
    switch (act) {
    case 1:
        return select(v, (float4)(0.0f), isless(v, (float4)(0.0f)));
    case 2:
        return 1.0f / (1.0f + exp(-v));
    case 3:
        return relu6_4(v);
    case 4:
        return tanh(v);
    case 5:
        return relu6_4(v + 3.0f) * (1.0f / 6.0f);
    case 6:
        return v * relu6_4(v + 3.0f) * (1.0f / 6.0f);
    case 7:
        return v / (1.0f + exp(-v));
    case 8:
        return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
    case 9:
        return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    default:
        return v;
    }
}

// The layer's activation (-D ACT) of four values.
inline float4 activate4(float4 v)
{
    return activation4(v, ACT);
}

// max that keeps a NaN, as numpy's max does, so a poisoned input still shows
inline float max_keep_nan(float m, float v)
{
    return (v > m || isnan(v)) ? v : m;
}

inline float4 max4_keep_nan(float4 m, float4 v)
{
    return select(m, v, isgreater(v, m) | isnan(v));
}

#if defined(YC) && defined(YC4)
// Channels past YC in a pixel's last float4 must stay 0 (the next layer's
// zero weights multiply them): mask them after the activation, which would
// turn 0 into 0.5 for a sigmoid.
inline float4 zero_tail(float4 v, int c4)
{
#if YC % 4
    if (c4 == YC4 / 4 - 1)
        v = select(v, (float4)(0.0f), (int4)(0, 1, 2, 3) >= (int4)(YC % 4));
#endif
    return v;
}
#endif
