// im2col of a batch straight into the C_4_2_C layout the Morton GEMM reads
// (study, section 7.3.1 and appendix D, with the index of 7.3.2):
//
//     B[r, col] = x[n, ci, oy*SH + fy, ox*SW + fx]
//     r = (ci*KH + fy)*KW + fx          (0 .. L-1; rows L .. L_PAD-1 are padding)
//     col = n*OH*OW + oy*OW + ox        (image n's pixels are one block of columns)
//
// In C_4_2_C column pair col/2 is one strip of 4x2 tiles, 2*L_PAD floats
// long; inside it row r sits in tile r/4 (8 floats), column col%2 at 4
// floats in, row r%4 within that.  Only the L x N*OH*OW part is written:
// the zero step before (when the plan asks for it) fills the padding.
//
// NDRange (OW, OH, C) rounded up to the work-group; each work-item copies
// one (KH x KW) sub-column for every image.  Indices are built with
// multiplications, shifts and masks only (no division: Oclgrind's
// uninitialised-value check trips over the `freeze` LLVM adds after one).
//
// -D constants: C, HP, WP (input planes, already padded), KH, KW, SH, SW,
//               OH, OW, BATCH, L_PAD

__kernel void im2col(__global const float *x, __global float *B) {
    const int ox = get_global_id(0), oy = get_global_id(1), ci = get_global_id(2);
    if (ox >= OW || oy >= OH || ci >= C) return;
    for (int n = 0; n < BATCH; n++) {
        __global const float *src = x + (size_t)(n * C + ci) * (HP * WP) + (oy * SH) * WP + ox * SW;
        const size_t col = (size_t)n * (OH * OW) + oy * OW + ox;
        __global float *dst = B + (col >> 1) * (2 * L_PAD) + (col & 1) * 4;
        for (int fy = 0; fy < KH; fy++) {
            for (int fx = 0; fx < KW; fx++) {
                const int r = (ci * KH + fy) * KW + fx;
                dst[(r >> 2) * 8 + (r & 3)] = src[fy * WP + fx];
            }
        }
    }
}
