// `vec`: VW floats, the device's preferred float vector width (4, 8 or 16), with its load and store, for the
// kernels shaped for a CPU's vector units (cpu_conv.cl, winograd_gemm.cl's wg_gemm_vec).
#if VW == 4
typedef float4 vec;
#define VLOAD vload4
#define VSTORE vstore4
#elif VW == 8
typedef float8 vec;
#define VLOAD vload8
#define VSTORE vstore8
#elif VW == 16
typedef float16 vec;
#define VLOAD vload16
#define VSTORE vstore16
#else
#error "VW is 4, 8 or 16"
#endif
