// A kernel that does nothing: what one launch costs the host and the device when the work is none
// (benchmarks/launches.py, the floor under every pass's launches).
__kernel void empty(__global float *x) {
}
