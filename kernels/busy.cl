// Work that holds a few compute units for a while and touches no memory but one write: ITERS dependent
// multiply-adds a work-item (benchmarks/two_queues.py asks whether two such kernels share the GPU).
__kernel void busy(__global float *y, const float a, const int iters) {
    float v = (float)get_global_id(0);
    for (int i = 0; i < iters; i++)
        v = mad(v, a, 1.0f);
    if (v == 12345.0f)   // almost never: keeps the loop from being thrown away
        y[get_global_id(0)] = v;
}
