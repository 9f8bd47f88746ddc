"""The one place a dense weight's rows change order.  Our dense layers
flatten a spatial input in C, H, W order; NHWC engines (Keras, our NHWC
kernels) flatten it in H, W, C order, so the rows of a dense weight that
follows a spatial layer are permuted between the two."""
from __future__ import annotations

import numpy as np


def chw_rows_to_hwc(weight: np.ndarray, chw: tuple) -> np.ndarray:
    """(C*H*W, OUT) with rows in C,H,W order -> the same weights, rows in H,W,C order."""
    c, h, w = chw
    return np.ascontiguousarray(np.asarray(weight).reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1))


def hwc_rows_to_chw(weight: np.ndarray, chw: tuple) -> np.ndarray:
    """The inverse of chw_rows_to_hwc."""
    c, h, w = chw
    return np.ascontiguousarray(np.asarray(weight).reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1))
