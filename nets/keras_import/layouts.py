"""Keras's weight layouts as ours.  Conv2D kernel (FH, FW, C/g, K) -> (K, C/g, FH, FW);
DepthwiseConv2D kernel (FH, FW, C, M) -> (C*M, 1, FH, FW), output channel c*M+m as Keras's;
Keras's Flatten reads an NHWC tensor in H,W,C order, ours in C,H,W order, so the rows of the
Dense weight after a Flatten are permuted."""
from __future__ import annotations

import numpy as np

from ..layouts import hwc_rows_to_chw


def conv_kernel_from_keras(kernel: np.ndarray) -> np.ndarray:
    """Keras Conv2D kernel (FH, FW, C, K) -> ours (K, C, FH, FW)."""
    return np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))


def dense_rows_from_keras(weight: np.ndarray, chw: tuple) -> np.ndarray:
    """The weight of a Dense after a Flatten of an NHWC (C, H, W) tensor: its rows
    come in H,W,C order; ours in C,H,W order."""
    return hwc_rows_to_chw(weight, chw)


def depthwise_weight(kernel: np.ndarray) -> np.ndarray:
    """Keras's depthwise kernel (FH, FW, C, M) -> ours (C*M, 1, FH, FW)."""
    fh, fw, c, m = kernel.shape
    return np.ascontiguousarray(kernel.reshape(fh, fw, c * m).transpose(2, 0, 1)[:, None])
