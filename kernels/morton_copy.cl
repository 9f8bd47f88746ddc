// The infrastructure around the Morton GEMM (study, section 7.3.1):
// zeroing a buffer's prefix, and a box copy that is both the padding and
// the unpadding step.
//
// zero: -D COUNT.  Each work-item clears 4 floats (the last one fewer).
//
// copy_box: copies PLANES x ROWS x COLS from src to dst, each side with its
// own plane and row strides and offset (all in floats):
//   pad    (N*C, H, W) compact -> the interior of (N*C, H+2ph, W+2pw) maps;
//          the zero step before it gives the border.
//   unpad  the GEMM's K x N_PAD output, image n in columns n*OH*OW .. ->
//          (N, K, OH*OW): at batch 1 this is the study's trick of passing
//          the output as one feature map of K rows and cutting the
//          trailing columns.
// NDRange (COLS, ROWS, PLANES) rounded up to the work-group.
// -D constants: PLANES, ROWS, COLS, SRC_OFF, SRC_PLANE, SRC_ROW,
//               DST_OFF, DST_PLANE, DST_ROW

#ifdef COUNT
__kernel void zero(__global float *x) {
    const size_t i = get_global_id(0) * 4;
    if (i + 4 <= COUNT) {
        vstore4((float4)(0.0f), 0, x + i);
    } else {
        for (size_t k = i; k < COUNT; k++) x[k] = 0.0f;
    }
}
#endif

#ifdef PLANES
__kernel void copy_box(__global const float *src, __global float *dst) {
    const size_t c = get_global_id(0), r = get_global_id(1), p = get_global_id(2);
    if (c >= COLS || r >= ROWS || p >= PLANES) return;
    dst[DST_OFF + p * DST_PLANE + r * DST_ROW + c] = src[SRC_OFF + p * SRC_PLANE + r * SRC_ROW + c];
}
#endif
