"""Filters and biases as `vectorised`'s depthwise and dense kernels take them,
shared by vectorised.py and cpu_conv.py (which vectorised.py imports)."""
from __future__ import annotations

import numpy as np

from nets.layouts import chw_rows_to_hwc


def depthwise_filters(weight: np.ndarray, c_stored: int) -> np.ndarray:
    """Depthwise weight (C, 1, FH, FW) -> (FH, FW, c_stored), zero where padded."""
    c, _, fh, fw = weight.shape
    out = np.zeros((fh, fw, c_stored), np.float32)
    out[:, :, :c] = np.asarray(weight, np.float32)[:, 0].transpose(1, 2, 0)
    return out


def is_depthwise(layer, in_channels: int) -> bool:
    """One filter per input channel (MobileNet's): the depthwise kernel's case."""
    return layer.groups > 1 and layer.groups == layer.out_channels == in_channels


def pad_to(values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    out[:len(values)] = values
    return out


def dense_rows(weight: np.ndarray, c: int, h: int, w: int, c_stored: int,
               border: tuple = (0, 0, 0, 0)) -> np.ndarray:
    """Dense weight (C*H*W, OUT), rows in the canonical C,H,W flatten order ->
    (OUT, HP*WP*c_stored): row j lists output j's weights in the order the NHWC
    input buffer holds its features, zero for the padding channels and for
    the buffer's border (top, left, bottom, right; a graph's buffer read by a
    conv too may have one)."""
    n_out = weight.shape[1]
    top, left, bottom, right = border
    hp, wp = h + top + bottom, w + left + right
    padded = np.zeros((hp, wp, c_stored, n_out), np.float32)
    padded[top:top + h, left:left + w, :c, :] = chw_rows_to_hwc(weight, (c, h, w)).reshape(h, w, c, n_out)
    return np.ascontiguousarray(padded.reshape(hp * wp * c_stored, n_out).T)
