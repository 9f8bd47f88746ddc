// A Winograd GEMM form's output transform of one tile (backends/handwritten/
// winograd_gemm.py): shared by wg_output (winograd_transforms.cl) and
// wg_output_input (winograd_chain.cl).  Needs WM, WA, E, TILES, YV, PARTS,
// `vec` (kw_store.h) and at_line (winograd_lines.h).

// out = A^T M_t A for tile t and output channels 4 k4 .. 4 k4 + 3, M's
// PARTS parts added up first: (PARTS, E, TILES, YV) float4s.
inline void output_tile(__global const float4* restrict mm, const size_t t, const uint k4, vec* out)
{
    vec p[E], cols[WM * WA];
    for (int e = 0; e < E; e++)
        p[e] = mm[((size_t)e * TILES + t) * YV + k4];
    for (int s = 1; s < PARTS; s++)
        for (int e = 0; e < E; e++)
            p[e] += mm[(((size_t)s * E + e) * TILES + t) * YV + k4];
    for (int j = 0; j < WA; j++)
        at_line(p + j, WA, cols + j, WA);            // columns: (m x a)
    for (int i = 0; i < WM; i++)
        at_line(cols + i * WA, 1, out + i * WM, 1);   // rows: (m x m)
}
