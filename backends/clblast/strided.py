"""xGEMMSTRIDEDBATCHED's calls of a geometry CLBlast gets wrong, found and refused.

Routed to its indirect kernel, CLBlast's xGEMMSTRIDEDBATCHED copies each
matrix into a padded buffer of the kernel's shape, except a matrix that has
that shape already: that one goes to the kernel as it is, and the kernel
reads (writes) batch entry i at i * rows * columns from the buffer's start.
The test for "as it is" leaves out the offset and the stride (CLBlast
1.5.3, and upstream's XgemmStridedBatched::BatchedGemmIndirect unchanged
since; xGEMMBATCHED's test has the offsets), so such a matrix with an
offset, or a stride other than its size, is read in the wrong place with no
error.  Which matrices go as they are depends on the sizes and on the Xgemm
parameters in force (tiles, GEMMK), and CLBlast's C API does not tell its
database's.  So a call whose offsets or strides are not those of packed
matrices is tried once, on random data under the parameters in force, and
refused where it comes out wrong (seen: Swin v2's attention, one call a
head, each head's queries and keys at an offset, 0.25-0.34 off).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl.array as cla

from nets.errors import UserError

from . import overrides
from .library import pyclblast

TOLERANCE = 1e-4   # relative L2 of a tried batch entry against float64


class StridedBatchedWrong(UserError):
    """A strided-batched GEMM that CLBlast computes wrong under the parameters in force."""


@dataclass(frozen=True)
class StridedGemm:
    """One xGEMMSTRIDEDBATCHED call's geometry (row-major, offsets and strides in floats)."""

    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    strides: tuple   # (a, b, c)
    offsets: tuple   # (a, b, c)
    a_transp: bool = False
    b_transp: bool = False

    def shapes(self) -> tuple:
        """Each matrix's stored (rows, columns)."""
        m, n, k = self.m, self.n, self.k
        return ((k, m) if self.a_transp else (m, k)), ((n, k) if self.b_transp else (k, n)), (m, n)

    def packed(self) -> bool:
        """Offsets 0 and each stride the size of its matrix: what CLBlast's kernel assumes."""
        sizes = tuple(r * c for r, c in self.shapes())
        return self.offsets == (0, 0, 0) and tuple(self.strides) == sizes


_VERDICTS: dict[tuple, bool] = {}   # (geometry, overrides in force) -> computed right


def require_right(queue, device, call: StridedGemm) -> None:
    """Raise StridedBatchedWrong where CLBlast computes `call` wrong with the overrides now in force (the
    caller puts its own in force first)."""
    if call.packed():
        return
    forced = overrides.in_force(device)
    key = (call, tuple(sorted((k, tuple(sorted(p.items()))) for k, p in forced.items())))
    if key not in _VERDICTS:
        _VERDICTS[key] = _try(queue, call)
    if not _VERDICTS[key]:
        raise StridedBatchedWrong(
            f"CLBlast's xGEMMSTRIDEDBATCHED computes {call.m}x{call.n}x{call.k} with offsets {call.offsets} and "
            f"strides {call.strides} wrong here (its indirect kernel drops the offset and stride of a matrix it "
            f"takes without a copy)")


def _try(queue, call: StridedGemm, batch: int = 2) -> bool:
    """Whether `call` over `batch` entries of random data matches float64 in every entry."""
    rng = np.random.default_rng(0)
    lds = (call.lda, call.ldb, call.ldc)
    # room as well for where the defect reads and writes (entry i at i * rows * columns)
    spans = [max(off + stride * (batch - 1) + rows * ld, rows * cols * batch)
             for off, stride, (rows, cols), ld in zip(call.offsets, call.strides, call.shapes(), lds)]
    a, b = (rng.standard_normal(s).astype(np.float32) for s in spans[:2])
    dev = [cla.to_device(queue, v.reshape(1, -1)) for v in (a, b, np.zeros(spans[2], np.float32))]
    pyclblast.gemmStridedBatched(queue, call.m, call.n, call.k, batch, *dev, *lds, *call.strides, alpha=1.0,
                                 beta=0.0, a_transp=call.a_transp, b_transp=call.b_transp,
                                 a_offset=call.offsets[0], b_offset=call.offsets[1], c_offset=call.offsets[2])
    c = dev[2].get().reshape(-1)

    def entry(flat, which: int, i: int) -> np.ndarray:
        rows, cols = call.shapes()[which]
        start = call.offsets[which] + i * call.strides[which]
        return np.lib.stride_tricks.as_strided(flat[start:], (rows, cols), (lds[which] * 4, 4))

    for i in range(batch):
        x, y = entry(a, 0, i).astype(np.float64), entry(b, 1, i).astype(np.float64)
        want = (x.T if call.a_transp else x) @ (y.T if call.b_transp else y)
        if np.linalg.norm(entry(c, 2, i) - want) > TOLERANCE * np.linalg.norm(want):
            return False
    return True
