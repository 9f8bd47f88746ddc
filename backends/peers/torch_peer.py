"""`torch`: the GPU peer, PyTorch on its best device from the same weights.

CUDA with cuDNN where available (the first GPU; --device picks OpenCL
devices and is not used here), else the CPU.  TF32 is switched off for
matmuls and cuDNN, so the GPU computes in float32 like every other backend.
cuDNN's autotuner (benchmark mode) picks each convolution's algorithm on the
first call, which the runner's warm-up absorbs.  Each layer is built in
torch_layers.py (our layouts are PyTorch's own); a pass walks the net's
graph (graph_walk.py), each layer fed the outputs it names, in every mode.

Modes (modes() lists those that can run here):

- `eager`: one Python dispatch per layer, NCHW.
- `eager-channels-last`: the same with weights and activations in
  torch.channels_last (NHWC in memory); run() converts the canonical NCHW
  input and converts a spatial output back, so both count as compute.
- `cuda-graph`, `cuda-graph-channels-last` (CUDA only): the whole forward
  captured once at prepare into a CUDA graph and replayed by run(), which
  removes the per-layer launch and dispatch costs.
- `compile`: torch.compile (TorchInductor) of the whole forward.

Processes: each mode runs in a child process of its own (TorchBackend), so
the runner prepares the modes ahead, side by side and beside its own work,
as it does CLBlast's; TorchInProcess is PyTorch in the child.

Timing: on CUDA a pair of CUDA events brackets each layer on the stream (one
or more cuDNN/cuBLAS kernels, hence how='markers'), read only after the
end event has completed; wall time is the host clock around the layer and
its synchronisation.  On the CPU: wall time only.  A graph replays the whole
net, so run_timed() times the layers eagerly in every mode.  Weights and
activations stay on the device; the only host copies are in load_input and
fetch_output.
"""
from __future__ import annotations

import importlib.util
import os
import time

from nets import Feature, LayerKind, Net
from nets.errors import Unsupported, UserError

from ..base import Backend, Family, LayerTiming, PreparedNet, Step, layer_params
from ..host import cpu_name
from ..isolated import IsolatedBackend
from .graph_walk import GraphWalk
from .torch_layers import layer_fn


MODES = ("eager", "eager-channels-last", "cuda-graph", "cuda-graph-channels-last", "compile")
GRAPH_WARMUP = 3   # eager passes on the capture stream before capturing: cuDNN's autotuner, handles, allocator
COMPILE_WARMUP = 2   # calls at prepare: the first compiles, the second checks that nothing recompiles
EAGER_LAYERS = "per-layer times are eager: include Python dispatch"


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


def available_modes(torch) -> list[str]:
    """The modes that can run here, eager first (the default of prepare)."""
    cuda = torch.cuda.is_available()
    modes = ["eager", "eager-channels-last"]
    if cuda:
        modes += ["cuda-graph", "cuda-graph-channels-last"]
    # torch.compile needs Triton on CUDA; on the CPU it builds C++ with the
    # host compiler, which takes minutes for VGG-16 on a small machine, so
    # there it runs only when asked for (COMPARE_TORCH_COMPILE=1).
    if (cuda and importlib.util.find_spec("triton") is not None) or os.environ.get("COMPARE_TORCH_COMPILE") == "1":
        modes.append("compile")
    return modes


def _check_mode(torch, mode: str | None) -> str:
    """`mode` itself (None: eager); a mode this machine lacks is Unsupported."""
    mode = mode or "eager"
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r} of the torch backend; it has {', '.join(MODES)}")
    if mode.startswith("cuda-graph") and not torch.cuda.is_available():
        raise Unsupported(f"torch mode {mode} needs CUDA, and PyTorch sees no CUDA device here")
    return mode


class TorchNet(PreparedNet):
    def __init__(self, net: Net, weights, batch: int, mode: str | None = None):
        super().__init__(net, batch)
        torch = self.torch = _torch()
        _configure(torch)
        self.mode = _check_mode(torch, mode)
        self.device = _device(torch)
        self.cuda = self.device.type == "cuda"
        self.channels_last = self.mode.endswith("channels-last")
        with torch.inference_mode():
            fns = [layer_fn(torch, layer, layer_params(net, weights, i), self.device, self.channels_last,
                            net.in_shape(i)) for i, layer in enumerate(net.layers)]
            self._fns = [f for f, _ in fns]
            self._x = torch.zeros((batch,) + tuple(net.input_shape), dtype=torch.float32, device=self.device)
        self.memory_bytes = sum(n for _, n in fns) + self._x.numel() * 4
        self._walk = GraphWalk(net)
        if self.cuda:
            self._events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                            for _ in net.layers]
        self._y = None
        self._graph = None          # the captured CUDA graph, in the cuda-graph modes
        self._compiled = None       # the torch.compile'd forward, in the compile mode
        if self.mode.startswith("cuda-graph"):
            self._capture()
        elif self.mode == "compile":
            self._compile()
        self._wait()
        self.config = self._describe()

    # -- the forward pass, canonical NCHW in and out
    def _enter(self, x):
        """The canonical input as the layers take it: channels_last in that mode."""
        if self.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=self.torch.channels_last)
        return x

    def _leave(self, y):
        """A layer's output in the canonical layout (a no-op but in channels_last)."""
        return y.contiguous() if self.channels_last else y

    def _forward(self, x):
        """Every layer on `x`, each fed the outputs it names, with the layout
        conversions at the two ends."""
        fns = self._fns
        return self._leave(self._walk.run(self._enter(x), lambda i, xs: fns[i](xs))[-1])

    def _capture(self):
        """Capture the whole forward on the static input self._x into a CUDA
        graph.  As PyTorch's CUDA Graphs notes require, warm-up passes run
        first on the same side stream that then captures (cuDNN's autotuner,
        cuBLAS's handle and workspace, the allocator all settle outside the
        capture), and the graph's output tensor is kept for run()."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(GRAPH_WARMUP):
                self._forward(self._x)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self._graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(self._graph, stream=stream):
            self._static_y = self._forward(self._x)
        torch.cuda.synchronize()

    def _compile(self):
        """torch.compile of the whole forward, compiled here by calling it:
        static shapes, one graph (fullgraph), Inductor's default mode."""
        torch = self.torch
        self._compiled = torch.compile(self._forward, fullgraph=True, dynamic=False)
        with torch.inference_mode():
            for _ in range(COMPILE_WARMUP):
                self._compiled(self._x)

    def _describe(self) -> dict:
        torch = self.torch
        cuda = self.cuda
        if self._graph is not None:
            graph = f"CUDA graph of the whole forward, captured at prepare after {GRAPH_WARMUP} warm-up passes"
        elif self._compiled is not None:
            graph = "torch.compile (Inductor, default mode, fullgraph, static shapes)"
        else:
            graph = "none: one Python dispatch per layer"
        timing = "CUDA events around each layer" if cuda else "wall clock only"
        return {"mode": self.mode, "device": str(self.device),
                "layout": ("NHWC inside (torch.channels_last); NCHW in and out, converted in run()"
                           if self.channels_last else "NCHW"),
                "graph": graph, "tf32": False,
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark) if cuda else None,
                "threads": None if cuda else torch.get_num_threads(),
                "timing": timing if self.mode.startswith("eager") else f"{timing}; {EAGER_LAYERS}"}

    def _wait(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    # -- the PreparedNet interface
    def load_input(self, x):
        """A plain copy into the preallocated input tensor (the graph's static input)."""
        with self.torch.inference_mode():
            self._x.copy_(self.torch.from_numpy(x))
        self._wait()

    def run(self):
        with self.torch.inference_mode():
            if self._graph is not None:
                self._graph.replay()
                self._y = self._static_y
            elif self._compiled is not None:
                self._y = self._compiled(self._x)
            else:
                self._y = self._forward(self._x)
        self._wait()

    def fetch_output(self):
        return self._y.cpu().numpy()

    def run_timed(self):
        """Each layer eagerly, synchronised after each; the first layer's time
        includes the input's layout conversion, the last's the output's."""
        self._wait()   # nothing of an earlier call may run into the first layer's time
        timings = []
        last = len(self._fns) - 1
        entered = []   # the input as the layers take it, converted in the first layer's time

        def timed(i, xs):
            layer, fn = self.net.layers[i], self._fns[i]
            t0 = time.perf_counter()
            if self.cuda:
                start, end = self._events[i]
                start.record()
            if i == 0:
                entered.append(self._enter(xs[0]))
            y = fn([entered[0] if s < 0 else x for s, x in zip(self._walk.sources[i], xs)])
            if i == last:
                y = self._leave(y)
            if self.cuda:
                end.record()
                end.synchronize()
                wall = (time.perf_counter() - t0) * 1e3
                ms = start.elapsed_time(end)
                timings.append(LayerTiming(layer.name, wall, ms, [Step(layer.kind, ms, "markers")]))
            else:
                wall = (time.perf_counter() - t0) * 1e3
                timings.append(LayerTiming(layer.name, wall, None, [Step(layer.kind, wall, "wall")]))
            return y

        with self.torch.inference_mode():
            self._y = self._walk.run(self._x, timed)[-1]
        return timings

    def _device_input(self, x, index: int, which: int = 0):
        """A canonical host input `which` of layer `index` on the device, in this mode's memory format."""
        return self._enter(self.torch.from_numpy(self.check_input(x, index, which)).to(self.device))

    def run_layer(self, index, x):
        """Layer `index` eagerly, in this mode's memory format; an add takes the list of its inputs."""
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        with self.torch.inference_mode():
            y = self._leave(self._fns[index]([self._device_input(a, index, k) for k, a in enumerate(xs)]))
        return y.cpu().numpy()

    def layer_outputs(self, x):
        """Every layer's output of one eager pass on `x`, canonical layout."""
        fns = self._fns
        with self.torch.inference_mode():
            outs = self._walk.run(self._device_input(x, 0), lambda i, xs: fns[i](xs), keep=True)
            return [self._leave(y).cpu().numpy() for y in outs]

    def close(self):
        if self._compiled is not None:
            # Dynamo's caches hold this net's graph (and its weights) per code
            # object, shared by every TorchNet: reset them, or later nets pile
            # up recompilations until the recompile limit.  The runner holds
            # one prepared net at a time.
            self.torch.compiler.reset()
        self._fns = self._x = self._y = self._graph = self._static_y = self._compiled = None
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()


SUMMARY = "peer: PyTorch on its best device (cuDNN/cuBLAS with TF32 off on CUDA, else CPU)"
# every kind a loaded net can hold (batch norms are folded by then), in graphs
KINDS = frozenset(LayerKind) - {LayerKind.BATCHNORM}   # batch norms are folded on loading


def _unavailable() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (pip install 'clblast-compare[torch]')"
    return None


class TorchBackend(IsolatedBackend):
    """PyTorch in child processes, each mode in one of its own (TorchInProcess there): the modes prepare ahead,
    side by side and beside the runner's own work (compare/ahead.py), as CLBlast's do.  On the H200 its five
    modes took 18 of the first VGG-16 answer's 72 s one after another in the runner (the H200 notes, step 39);
    and each of its processes is screened and drawn as every other side's (backends/screen.py, --draws)."""
    name = "torch"
    family = Family.PEER
    summary = SUMMARY
    supported_kinds = KINDS
    supported_features = frozenset(Feature)
    inner = "backends.peers.torch_peer:TorchInProcess"
    child_per_mode = True

    def __init__(self, runtime=None, options=None):
        super().__init__(runtime, options)
        self._deterministic: bool | None = None

    @classmethod
    def unavailable_reason(cls):
        return _unavailable()

    def _inner(self) -> tuple:
        return "backends.isolated", "inner_backend", (self.inner, None, self.options)   # no OpenCL device there

    @property
    def deterministic(self) -> bool:
        """As the child tells it (TorchInProcess.deterministic): bit for bit on the CPU, not on CUDA.  Asked once:
        the device does not change under a backend."""
        if self._deterministic is None:
            self._deterministic = self.info()["kind"] == "cpu"
        return self._deterministic


class TorchInProcess(Backend):
    """PyTorch in this process: what TorchBackend's children run, and what its tests reach into."""
    name = "torch"
    family = Family.PEER
    summary = SUMMARY
    supported_kinds = KINDS
    supported_features = frozenset(Feature)

    @classmethod
    def unavailable_reason(cls):
        return _unavailable()

    @property
    def deterministic(self) -> bool:
        """Per instance, since it depends on the device.  On CUDA, cuDNN's
        autotuner picks each convolution's algorithm by timing it, so two
        preparations (two modes, or the runner's measuring then running) may
        use different algorithms and differ in the last bits; and
        cudnn.deterministic stays off, as a user would have it for speed.
        On the CPU the kernels (oneDNN, OpenMP with a fixed thread count)
        repeat bit for bit (tested)."""
        return not _torch().cuda.is_available()

    def info(self):
        torch = _torch()
        _configure(torch)
        cuda = torch.cuda.is_available()
        versions = {"torch": str(torch.__version__)}   # a TorchVersion would import torch where unpickled (the runner)
        if cuda:
            versions["cuda"] = torch.version.cuda
            versions["cudnn"] = str(torch.backends.cudnn.version())
        return {"device": torch.cuda.get_device_name(0) if cuda else cpu_name(),
                "kind": "cuda" if cuda else "cpu", "versions": versions,
                "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                         "cudnn": torch.backends.cudnn.allow_tf32},
                "threads": None if cuda else torch.get_num_threads()}

    def modes(self):
        return available_modes(_torch())

    def prepare(self, net, weights, batch, mode=None):
        return TorchNet(net, weights, batch, mode)
