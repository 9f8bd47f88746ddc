// The hand-written backends' conversions between the canonical host layout
// (NCHW, or (N, C) for a dense output) and a stored activation buffer
// (backends/handwritten/layout.py: NCHW or NHWC, a zero border, channels
// padded).  They run on the device as the first and last steps of a
// forward pass, so that its timed compute holds all of its work and the
// host's copies in and out are plain copies, as every other backend's.
//
// Every shape is a -D constant (one build per buffer, at prepare):
//   N, C, H, W    the canonical shape (a flat (N, C) array: H = W = 1)
//   CS            channels as stored (C, or more: padding channels)
//   PH, PW        the stored border: rows above, columns on the left
//   PB, PR        rows below, columns on the right
//   NHWC          1: stored NHWC, 0: stored NCHW
// One work-item per canonical element, in canonical order; the NDRange is
// rounded up to the work-group, so work-items past the end return at once.
// Only the interior's C real channels are read or written: the border and
// the padding channels hold the zeros written at prepare, and no kernel
// ever writes them.

#define HP (H + PH + PB)
#define WP (W + PW + PR)
#define COUNT ((uint)N * C * H * W)

// Index arithmetic that divides is unsigned (see kernels/tiled_conv.cl):
// Oclgrind's uninitialised-value check cannot run the `freeze` LLVM adds
// before splitting a signed division from its remainder.

// Where canonical element i lies in the stored buffer.
inline uint stored_at(uint i)
{
    const uint nc = i / (H * W), pixel = i - nc * (H * W);
    const uint row = pixel / W, col = pixel - row * W;
    const uint n = nc / C, c = nc - n * C;
#if NHWC
    return ((n * HP + row + PH) * WP + col + PW) * CS + c;
#else
    return ((n * CS + c) * HP + row + PH) * WP + col + PW;
#endif
}

// canonical -> stored: the net's input, before its first layer
__kernel void pack(__global const float* restrict canonical, __global float* restrict stored)
{
    const uint i = get_global_id(0);
    if (i >= COUNT)
        return;
    stored[stored_at(i)] = canonical[i];
}

// stored -> canonical: the net's output, after its last layer
__kernel void unpack(__global const float* restrict stored, __global float* restrict canonical)
{
    const uint i = get_global_id(0);
    if (i >= COUNT)
        return;
    canonical[i] = stored[stored_at(i)];
}
