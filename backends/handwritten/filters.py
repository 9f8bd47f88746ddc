"""Filters and biases as `vectorised`'s depthwise kernels take them, shared by
vectorised.py and cpu_conv.py (which vectorised.py imports)."""
from __future__ import annotations

import numpy as np


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
