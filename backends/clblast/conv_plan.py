"""How one convolution maps onto CLBlast's routines, for every composition
of the CLBlast backends: the padding, whether an im2col is needed, and the
GEMMs, one per image and group.

Padding: xIM2COL and xCONVGEMM take one pad per dimension, applied on both
sides.  An asymmetric padding (top != bottom or left != right) is done
explicitly instead: our own kernel copies the input into a zero-padded
buffer (`pad_copy`, step "pad (own kernel)", own_kernels.Padder), and
CLBlast then runs with pad 0 on that buffer.

im2col: the whole batch goes through one xIM2COL as one image of N*C
channels (the study's trick, 5.1.2).  Its rows are (channel, fy, fx), so
the rows of image n, group g are one contiguous block of Cg*KH*KW rows;
the weights (K, Cg, KH, KW) hold group g's Kg filters as one block of rows;
the NCHW output holds image n, group g's Kg channels as one block.  So the
convolution is N*G GEMMs  out[n,g] (Kg x P) = W[g] (Kg x Cg*KH*KW) @ col[n,g]
with every operand at a fixed offset.  A 1x1 convolution with stride 1 and
no padding needs no im2col at all: the NCHW input is already col
(CLBlast's home ground, one plain GEMM per image and group).  A strided
1x1 goes through xIM2COL, which is then a strided copy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConvPlan:
    batch: int
    channels: int          # C of the input
    height: int            # as CLBlast reads it: padded already where the padding is explicit
    width: int
    kernel: tuple          # (KH, KW)
    stride: tuple
    pad: tuple             # the (rows, cols) pad CLBlast applies itself
    explicit_pad: tuple | None   # (top, left, bottom, right) our pad_copy applies first; None: none
    groups: int
    out_channels: int      # K
    out_plane: int         # OH * OW
    dilation: tuple = (1, 1)   # xIM2COL's and xCONVGEMM's: the filter's taps that far apart

    @classmethod
    def of(cls, batch: int, in_shape, out_shape, kernel, stride, padding, groups: int = 1,
           dilation=(1, 1)) -> "ConvPlan":
        """`padding` is (rows, cols) or (top, left, bottom, right), as the spec's."""
        c, h, w = in_shape
        top, left, bottom, right = tuple(padding) * 2 if len(padding) == 2 else tuple(padding)
        explicit = None
        pad = (top, left)
        if (top, left) != (bottom, right):
            explicit, pad = (top, left, bottom, right), (0, 0)
            h, w = h + top + bottom, w + left + right
        return cls(int(batch), int(c), int(h), int(w), tuple(kernel), tuple(stride), pad, explicit, int(groups),
                   int(out_shape[0]), int(out_shape[1] * out_shape[2]), tuple(int(d) for d in dilation))

    # -- the GEMM of one image and group: (Kg x CKK) @ (CKK x P)
    @property
    def kg(self) -> int:
        return self.out_channels // self.groups

    @property
    def cg(self) -> int:
        return self.channels // self.groups

    @property
    def ckk(self) -> int:
        return self.cg * self.kernel[0] * self.kernel[1]

    @property
    def pointwise(self) -> bool:
        """1x1, stride 1, no padding: the input is its own im2col."""
        return (tuple(self.kernel) == (1, 1) and tuple(self.stride) == (1, 1) and self.pad == (0, 0)
                and self.explicit_pad is None)

    @property
    def gemms(self) -> int:
        return self.batch * self.groups

    def col_floats(self) -> int:
        """The im2col buffer's size (0 when none is needed)."""
        return 0 if self.pointwise else self.batch * self.channels * self.kernel[0] * self.kernel[1] * self.out_plane

    def offsets(self) -> tuple[list[int], list[int], list[int]]:
        """The offsets in floats of W, col and out of each GEMM, image-major."""
        a = [g * self.kg * self.ckk for _ in range(self.batch) for g in range(self.groups)]
        b = [i * self.ckk * self.out_plane for i in range(self.gemms)]
        c = [i * self.kg * self.out_plane for i in range(self.gemms)]
        return a, b, c

    def im2col_geometry(self) -> dict:
        """xIM2COL's arguments: the whole batch as one image of N*C channels."""
        return dict(channels=self.batch * self.channels, height=self.height, width=self.width,
                    kernel=tuple(self.kernel), pad=self.pad, stride=tuple(self.stride), dilation=self.dilation)


def group_weights(weight: np.ndarray) -> np.ndarray:
    """(K, Cg, KH, KW) -> (K, Cg*KH*KW): group g's filters are rows g*Kg .. (g+1)*Kg."""
    return np.ascontiguousarray(np.asarray(weight, np.float32).reshape(weight.shape[0], -1))
