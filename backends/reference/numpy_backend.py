"""`numpy`: the CPU reference backend, pure numpy in float32.

Convolution is im2col + one GEMM per layer (what a CPU engine does), unlike
the oracle's shift-and-add, so the two check each other.
"""
from __future__ import annotations

import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nets import TRANSFORMER_KINDS, Feature, LayerKind, Net

from ..base import Backend, Family, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name
from . import transformer_layers


def _activate(y: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        np.maximum(y, 0, out=y)
    elif name == "relu6":
        np.clip(y, 0, 6, out=y)
    elif name == "tanh":
        np.tanh(y, out=y)
    elif name == "sigmoid":
        _sigmoid(y, out=y)
    elif name == "silu":
        y *= _sigmoid(y)
    elif name == "hardsigmoid":
        _hardsigmoid(y, out=y)
    elif name == "hardswish":
        y *= _hardsigmoid(y)
    elif name == "gelu":
        y = transformer_layers.gelu(y)
    elif name == "gelu_tanh":
        y = transformer_layers.gelu_tanh(y)
    return y


def _sigmoid(y, out=None):
    # exp(-y) overflows to inf for y < -88 in float32; clip keeps it quiet and exact enough
    out = np.negative(y, out=out)
    np.clip(out, -80, 80, out=out)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


def _hardsigmoid(y, out=None):
    """clip(y / 6 + 1/2, 0, 1), PyTorch's hardsigmoid (relu6(y + 3) / 6)."""
    out = np.add(y, np.float32(3), out=out)
    np.clip(out, 0, 6, out=out)
    out /= np.float32(6)
    return out


def _pad(x, pad, value=0.0):
    """x padded by (rows, cols) or (top, left, bottom, right)."""
    top, left, bottom, right = tuple(pad) * 2 if len(pad) == 2 else tuple(pad)
    if not (top or left or bottom or right):
        return x
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _conv(x, weight, bias, stride, pad, groups=1, dilation=(1, 1)):
    n, c, h, w = _pad(x, pad).shape
    k, cg, fh, fw = weight.shape
    dh, dw = dilation
    # a dilated filter's window spans (FH-1)*dh+1 rows; its taps are every dh-th of them
    win = sliding_window_view(_pad(x, pad), ((fh - 1) * dh + 1, (fw - 1) * dw + 1), axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1], ::dh, ::dw]   # N,C,OH,OW,FH,FW
    oh, ow = win.shape[2], win.shape[3]
    if groups == 1:
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * fh * fw)   # im2col, a row per output pixel
        y = cols @ weight.reshape(k, -1).T                                          # (N*OH*OW, K)
    else:   # one im2col and GEMM per group, batched: (G, N*OH*OW, C/g*FH*FW) @ (G, C/g*FH*FW, K/g)
        cols = win.reshape(n, groups, cg, oh, ow, fh, fw).transpose(1, 0, 3, 4, 2, 5, 6)
        cols = cols.reshape(groups, n * oh * ow, cg * fh * fw)
        wg = weight.reshape(groups, k // groups, cg * fh * fw).transpose(0, 2, 1)
        y = np.matmul(cols, wg).transpose(1, 0, 2).reshape(n * oh * ow, k)
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


def _avgpool(layer, x):
    """Window sums of the zero-padded input (more zeros for a ceil-mode window past
    the padding), times 1 / the spec's divisor of each output."""
    _, _, h, w = x.shape
    top, left, bottom, right = layer.padding
    more_rows, more_cols = layer.overhang((x.shape[1], h, w))
    y = _pool(_pad(x, (top, left, bottom + more_rows, right + more_cols)), layer.kernel, layer.stride, np.add)
    y *= np.float32(1) / layer.divisors(x.shape[1:])
    return y


def _softmax(x):
    y = x.reshape(len(x), -1) - x.reshape(len(x), -1).max(axis=1, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=1, keepdims=True)
    return y


def _layer(layer, params, xs):
    """Layer `layer` on its inputs `xs` (a list, one array per input)."""
    x = xs[0]
    if layer.kind == LayerKind.CONV:
        y = _conv(x, params["weight"], params["bias"], tuple(layer.stride), tuple(layer.pad), layer.groups,
                  layer.dilation)
    elif layer.kind == LayerKind.SUBSAMPLE:
        y = _pool(x, layer.kernel, layer.stride, np.add)
        y *= (params["coeff"] / np.float32(layer.kernel[0] * layer.kernel[1]))[None, :, None, None]
        y += params["bias"][None, :, None, None]
    elif layer.kind == LayerKind.MAXPOOL:
        y = _pool(_pad(x, layer.pad, -np.inf), layer.kernel, layer.stride, np.maximum)
    elif layer.kind == LayerKind.DENSE:
        y = x.reshape(len(x), -1) @ params["weight"]
        y += params["bias"]
    elif layer.kind == LayerKind.ADD:
        y = np.array(x)
        for other in xs[1:]:
            y += other
    elif layer.kind == LayerKind.GLOBAL_AVGPOOL:
        y = x.mean(axis=(2, 3), keepdims=True, dtype=np.float32)
    elif layer.kind == LayerKind.BATCHNORM:
        s = params["scale"] / np.sqrt(params["var"] + np.float32(layer.eps))
        y = x * s[None, :, None, None] + (params["bias"] - params["mean"] * s)[None, :, None, None]
    elif layer.kind == LayerKind.AVGPOOL:
        y = _avgpool(layer, x)
    elif layer.kind == LayerKind.CONCAT:
        y = np.concatenate(xs, axis=1)
    elif layer.kind == LayerKind.MUL:
        y = x * xs[1]   # an (N, C, 1, 1) gate broadcasts over each channel's plane
    elif layer.kind == LayerKind.CHANNELS:
        y = x[:, np.asarray(layer.order)]
    elif layer.kind == LayerKind.SOFTMAX:
        y = _softmax(x)
    elif layer.kind in TRANSFORMER_KINDS:
        y = transformer_layers.run(layer, params, xs)
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
        self._last_reader = [0] * len(net.layers)
        for i in range(len(net.layers)):
            for s in net.sources(i):
                if s >= 0:
                    self._last_reader[s] = i

    def load_input(self, x):
        self._x = x

    def _walk(self, x, timings=None, keep=False) -> list:
        """Every layer's output, each layer fed the outputs it names; with
        `timings`, each layer timed into it.  Unless `keep`, an output is let
        go once its last reader has run (like the chain before: one or two live)."""
        outs = []
        for i, (layer, params) in enumerate(zip(self.net.layers, self.params)):
            xs = [x if s < 0 else outs[s] for s in self.net.sources(i)]
            t0 = time.perf_counter()
            outs.append(_layer(layer, params, xs))
            if timings is not None:
                ms = (time.perf_counter() - t0) * 1e3
                timings.append(LayerTiming(layer.name, ms, None, [Step(layer.kind.value, ms, "wall")]))
            if not keep:
                for s in self.net.sources(i):
                    if s >= 0 and self._last_reader[s] == i:
                        outs[s] = None
        return outs

    def run(self):
        self._y = self._walk(self._x)[-1]

    def fetch_output(self):
        return self._y

    def run_timed(self):
        timings = []
        self._y = self._walk(self._x, timings)[-1]
        return timings

    def run_layer(self, index, x):
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        return _layer(self.net.layers[index], self.params[index], self.check_inputs(xs, index))

    def layer_outputs(self, x):
        return self._walk(self.check_input(x), keep=True)


class NumpyBackend(Backend):
    name = "numpy"
    family = Family.REFERENCE
    summary = "CPU reference: pure numpy float32, convolution as im2col + GEMM"
    supported_kinds = frozenset(LayerKind)     # the reference runs every net
    supported_features = frozenset(Feature)

    def info(self):
        # numpy's BLAS does the GEMMs, so it is part of what is measured
        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        return {"device": cpu_name(), "kind": "cpu",
                "versions": {"numpy": np.__version__, "blas": f"{blas.get('name', '')} {blas.get('version', '')}".strip()}}

    def prepare(self, net, weights, batch, mode=None):
        return NumpyNet(net, weights, batch)
