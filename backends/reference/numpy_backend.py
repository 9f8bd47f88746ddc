"""`numpy`: the CPU reference backend, pure numpy in float32.

Convolution is im2col + one GEMM per layer (what a CPU engine does), unlike
the oracle's shift-and-add, so the two check each other.
"""
from __future__ import annotations

import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nets import Net

from ..base import Backend, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name


def _activate(y: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        np.maximum(y, 0, out=y)
    elif name == "sigmoid":
        # exp(-y) overflows to inf for y < -88 in float32; clip keeps it quiet and exact enough
        np.negative(y, out=y)
        np.clip(y, -80, 80, out=y)
        np.exp(y, out=y)
        y += 1
        np.reciprocal(y, out=y)
    return y


def _conv(x, weight, bias, stride, pad):
    n, c, h, w = x.shape
    k, _, fh, fw = weight.shape
    if pad != (0, 0):
        x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    win = sliding_window_view(x, (fh, fw), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]  # N,C,OH,OW,FH,FW
    oh, ow = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * fh * fw)   # im2col, one row per output pixel
    y = cols @ weight.reshape(k, -1).T                                          # (N*OH*OW, K)
    y += bias
    return np.ascontiguousarray(y.reshape(n, oh, ow, k).transpose(0, 3, 1, 2))


def _taps(x, kernel, stride):
    """Each window offset (dy, dx) as a strided (N,C,OH,OW) view: pooling
    then takes k*k elementwise maxima or sums instead of a window reduction."""
    n, c, h, w = x.shape
    oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    for dy in range(kernel[0]):
        for dx in range(kernel[1]):
            yield x[:, :, dy:dy + stride[0] * (oh - 1) + 1:stride[0], dx:dx + stride[1] * (ow - 1) + 1:stride[1]]


def _pool(x, kernel, stride, combine):
    taps = _taps(x, kernel, stride)
    y = np.array(next(taps))
    for tap in taps:
        combine(y, tap, out=y)
    return y


def _layer(layer, params, x):
    if layer.kind == "conv":
        y = _conv(x, params["weight"], params["bias"], tuple(layer.stride), tuple(layer.pad))
    elif layer.kind == "subsample":
        y = _pool(x, layer.kernel, layer.stride, np.add)
        y *= (params["coeff"] / np.float32(layer.kernel[0] * layer.kernel[1]))[None, :, None, None]
        y += params["bias"][None, :, None, None]
    elif layer.kind == "maxpool":
        y = _pool(x, layer.kernel, layer.stride, np.maximum)
    elif layer.kind == "dense":
        y = x.reshape(len(x), -1) @ params["weight"]
        y += params["bias"]
    else:
        raise ValueError(f"numpy backend: unknown layer kind {layer.kind!r}")
    return _activate(y, layer.activation)


class NumpyNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int):
        super().__init__(net, batch)
        self.params = [layer_params(net, weights, i) for i in range(len(net.layers))]
        self.memory_bytes = sum(a.nbytes for p in self.params for a in p.values())
        self._x = None
        self._y = None

    def load_input(self, x):
        self._x = x

    def run(self):
        x = self._x
        for layer, params in zip(self.net.layers, self.params):
            x = _layer(layer, params, x)
        self._y = x

    def fetch_output(self):
        return self._y

    def run_timed(self):
        x = self._x
        timings = []
        for layer, params in zip(self.net.layers, self.params):
            t0 = time.perf_counter()
            x = _layer(layer, params, x)
            ms = (time.perf_counter() - t0) * 1e3
            timings.append(LayerTiming(layer.name, ms, None, [Step(layer.kind, ms, "wall")]))
        self._y = x
        return timings

    def run_layer(self, index, x):
        x = self.check_input(x, index)
        return _layer(self.net.layers[index], self.params[index], x)


class NumpyBackend(Backend):
    name = "numpy"
    summary = "CPU reference: pure numpy float32, convolution as im2col + GEMM"

    def info(self):
        # numpy's BLAS does the GEMMs, so it is part of what is measured
        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        return {"device": cpu_name(), "kind": "cpu",
                "versions": {"numpy": np.__version__, "blas": f"{blas.get('name', '')} {blas.get('version', '')}".strip()}}

    def prepare(self, net, weights, batch, mode=None):
        return NumpyNet(net, weights, batch)
