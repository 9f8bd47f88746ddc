"""`torch`: the GPU peer, PyTorch on its best device from the same weights.

CUDA with cuDNN where available (the first GPU; --device picks OpenCL
devices and is not used here), else the CPU.  TF32 is switched off for
matmuls and cuDNN, so the GPU computes in float32 like every other backend.
cuDNN's autotuner (benchmark mode) picks each convolution's algorithm on the
first call, which the runner's warm-up absorbs.  Our layouts are PyTorch's
own (NCHW, conv weight (K,C,FH,FW), flatten in C,H,W order); only the dense
weight (in, out) is used as the right operand of addmm.

Timing: on CUDA a pair of CUDA events brackets each layer on the stream (one
or more cuDNN/cuBLAS kernels, hence how='markers'), read only after the
end event has completed; wall time is the host clock around the layer and
its synchronisation.  On the CPU: wall time only.  Weights and activations
stay on the device; the only host copies are in load_input and fetch_output.
"""
from __future__ import annotations

import importlib.util
import time

import numpy as np

from nets import Net

from ..base import Backend, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name


def _torch():
    import torch
    return torch


def _configure(torch) -> None:
    """float32 everywhere (no TF32), and cuDNN's fastest algorithm per shape."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


def _device(torch):
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _layer_fn(torch, layer, params: dict, dev):
    """Layer `layer` as a function of an NCHW (or (N, features)) device tensor."""
    F = torch.nn.functional
    p = {k: torch.from_numpy(np.ascontiguousarray(v)).to(dev) for k, v in params.items()}
    if layer.kind == "conv":
        def op(x):
            return F.conv2d(x, p["weight"], p["bias"], stride=tuple(layer.stride), padding=tuple(layer.pad))
    elif layer.kind == "subsample":
        coeff, bias = p["coeff"].view(1, -1, 1, 1), p["bias"].view(1, -1, 1, 1)

        def op(x):
            return torch.addcmul(bias, F.avg_pool2d(x, tuple(layer.kernel), tuple(layer.stride)), coeff)
    elif layer.kind == "maxpool":
        def op(x):
            return F.max_pool2d(x, tuple(layer.kernel), tuple(layer.stride))
    elif layer.kind == "dense":
        def op(x):
            return torch.addmm(p["bias"], x.reshape(x.shape[0], -1), p["weight"])
    else:
        raise ValueError(f"torch backend: unknown layer kind {layer.kind!r}")
    activate = {"relu": torch.relu_, "sigmoid": torch.sigmoid_}.get(layer.activation)
    nbytes = sum(t.numel() * t.element_size() for t in p.values())
    if activate is None:
        return op, nbytes
    return (lambda x: activate(op(x))), nbytes   # in place on the layer's fresh output


class TorchNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int):
        super().__init__(net, batch)
        torch = self.torch = _torch()
        _configure(torch)
        self.device = _device(torch)
        self.cuda = self.device.type == "cuda"
        with torch.inference_mode():
            fns = [_layer_fn(torch, layer, layer_params(net, weights, i), self.device)
                   for i, layer in enumerate(net.layers)]
            self._fns = [f for f, _ in fns]
            self._x = torch.empty((batch,) + tuple(net.input_shape), dtype=torch.float32, device=self.device)
        self.memory_bytes = sum(n for _, n in fns) + self._x.numel() * 4
        if self.cuda:
            self._events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                            for _ in net.layers]
            torch.cuda.synchronize()
        self._y = None
        self.config = {"device": str(self.device), "layout": "NCHW", "tf32": False,
                       "cudnn_benchmark": bool(torch.backends.cudnn.benchmark) if self.cuda else None,
                       "threads": None if self.cuda else torch.get_num_threads(),
                       "timing": "CUDA events around each layer" if self.cuda else "wall clock only"}

    def _wait(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def load_input(self, x):
        with self.torch.inference_mode():
            self._x.copy_(self.torch.from_numpy(x))
        self._wait()

    def run(self):
        with self.torch.inference_mode():
            x = self._x
            for fn in self._fns:
                x = fn(x)
            self._y = x
        self._wait()

    def fetch_output(self):
        return self._y.cpu().numpy()

    def run_timed(self):
        self._wait()   # nothing of an earlier call may run into the first layer's time
        timings = []
        with self.torch.inference_mode():
            x = self._x
            for i, (layer, fn) in enumerate(zip(self.net.layers, self._fns)):
                t0 = time.perf_counter()
                if self.cuda:
                    start, end = self._events[i]
                    start.record()
                    x = fn(x)
                    end.record()
                    end.synchronize()
                    wall = (time.perf_counter() - t0) * 1e3
                    ms = start.elapsed_time(end)
                    timings.append(LayerTiming(layer.name, wall, ms, [Step(layer.kind, ms, "markers")]))
                else:
                    x = fn(x)
                    wall = (time.perf_counter() - t0) * 1e3
                    timings.append(LayerTiming(layer.name, wall, None, [Step(layer.kind, wall, "wall")]))
            self._y = x
        return timings

    def run_layer(self, index, x):
        x = self.check_input(x, index)
        with self.torch.inference_mode():
            y = self._fns[index](self.torch.from_numpy(x).to(self.device))
        return y.cpu().numpy()

    def close(self):
        self._fns = self._x = self._y = None
        if self.cuda:
            self.torch.cuda.empty_cache()


class TorchBackend(Backend):
    name = "torch"
    summary = "peer: PyTorch on its best device (cuDNN/cuBLAS with TF32 off on CUDA, else CPU)"

    @classmethod
    def unavailable_reason(cls):
        if importlib.util.find_spec("torch") is None:
            return "PyTorch is not installed (pip install 'clblast-compare[torch]')"
        return None

    def info(self):
        torch = _torch()
        _configure(torch)
        cuda = torch.cuda.is_available()
        versions = {"torch": torch.__version__}
        if cuda:
            versions["cuda"] = torch.version.cuda
            versions["cudnn"] = str(torch.backends.cudnn.version())
        return {"device": torch.cuda.get_device_name(0) if cuda else cpu_name(),
                "kind": "cuda" if cuda else "cpu", "versions": versions,
                "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                         "cudnn": torch.backends.cudnn.allow_tf32},
                "threads": None if cuda else torch.get_num_threads()}

    def prepare(self, net, weights, batch):
        return TorchNet(net, weights, batch)
