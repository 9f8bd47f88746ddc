"""The CLBlast problems a net poses, as the tuners and the tuning file name
them: per layer, the GEMM, GEMV or convolution sizes the CLBlast backends
call, and the device-wide jobs that tune every kernel at the tuner's own
sizes (what the study did: `make alltuners`, seed 003 section 4.1.1).

CLBlast computes in column-major order, so a row-major product
C (rows x cols) = A B is its C^T = B^T A^T: the tuners' m is our columns and
their n our rows.  Sizes, per layer kind:

  conv (im2col + GEMM)  C (K x OH*OW) = W (K x C*KH*KW) col (C*KH*KW x OH*OW), one per image
  dense, batch > 1      Y (N x F) = X (N x D) W (D x F)
  dense, batch 1        y (F) = W (F x D) x                     (GEMV)
  conv (xCONVGEMM)      C, H + 2 pad, W + 2 pad, KH, KW, K, N   (the tuner takes no pad or stride)
"""
from __future__ import annotations

from .tuners import Job

DEVICE_JOBS = (  # the tuners' own default sizes, one job each
    "xgemm", "xgemm_direct", "xgemv", "xconvgemm", "copy_fast", "copy_pad", "transpose_fast", "transpose_pad",
    "xaxpy",
)


def _round(n: int, m: int) -> int:
    return -(-int(n) // m) * m


def gemm_dims(kind: str, batch: int, in_shape: tuple, out_shape: tuple, kernel=None) -> dict:
    """The tuners' m, n, k of one layer's GEMM (conv by im2col, or dense at batch > 1)."""
    if kind == "dense":
        d = 1
        for v in in_shape:
            d *= v
        return {"m": out_shape[0], "n": batch, "k": d}
    c = in_shape[0]
    return {"m": out_shape[1] * out_shape[2], "n": out_shape[0], "k": c * kernel[0] * kernel[1]}


def gemv_dims(in_shape: tuple, out_shape: tuple) -> dict:
    d = 1
    for v in in_shape:
        d *= v
    return {"m": out_shape[0], "n": d}


def convgemm_dims(batch: int, in_shape: tuple, out_channels: int, kernel, pad) -> dict:
    c, h, w = in_shape
    return {"channels": c, "height": h + 2 * pad[0], "width": w + 2 * pad[1], "kernelh": kernel[0],
            "kernelw": kernel[1], "num_kernels": out_channels, "batch_num": batch}


def layer_jobs(net, batch: int) -> list[Job]:
    """The shape-scoped jobs of a net: one per distinct problem, naming its layers."""
    jobs: dict[tuple, Job] = {}

    def add(tuner: str, dims: dict, layer: str):
        key = (tuner, tuple(sorted(dims.items())))
        if key in jobs:
            jobs[key].label += f",{layer}"
        else:
            jobs[key] = Job(tuner, dims, f"{net.name}:{layer}", scope="shape")

    for i, layer in enumerate(net.layers):
        src, dst = net.in_shape(i), net.out_shape(i)
        if layer.kind == "conv":
            dims = gemm_dims("conv", batch, src, dst, layer.kernel)
            add("xgemm_direct", dims, layer.name)
            add("xgemm", {"m": _round(dims["m"], 128), "n": _round(dims["n"], 128), "k": _round(dims["k"], 32)},
                layer.name)
            add("xconvgemm", convgemm_dims(batch, src, layer.out_channels, layer.kernel, layer.pad), layer.name)
        elif layer.kind == "dense" and batch == 1:
            add("xgemv", gemv_dims(src, dst), layer.name)
        elif layer.kind == "dense":
            dims = gemm_dims("dense", batch, src, dst)
            add("xgemm_direct", dims, layer.name)
            add("xgemm", {"m": _round(dims["m"], 128), "n": _round(dims["n"], 128), "k": _round(dims["k"], 32)},
                layer.name)
    return list(jobs.values())


def device_jobs() -> list[Job]:
    return [Job(t, {}, "device") for t in DEVICE_JOBS]
