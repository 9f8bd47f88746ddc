"""The float vector width a device prefers, as the kernels shaped for a CPU's vector units take it
(cpu_conv.py, cpu_fold.py, head_fused.py, the Winograd GEMM's vector form in winograd_gemm.py)."""
from __future__ import annotations


def vector_width(info: dict) -> int:
    """Floats per vector: the device's preferred width, as a power of two from 4 to 16."""
    w = int(info.get("preferred_vector_width_float") or 4)
    vw = 4
    while vw * 2 <= min(w, 16):
        vw *= 2
    return vw
