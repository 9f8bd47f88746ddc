"""`opencv`: OpenCV's DNN module on the same OpenCL device, a library engine
with its own OpenCL kernels (ocl4dnn) and auto-tuning of its convolutions.

The net goes in as an ONNX model, read by OpenCV's classic engine and run
with DNN_BACKEND_OPENCV on DNN_TARGET_OPENCL: for a net imported from an
ONNX file, the user's file as given (where the run's weights are the
file's own); for any other net, our graph written as ONNX
(opencv_onnx.py).  It runs in a child process on the run's device, one per
mode (opencv_device.py), since OpenCV reads its tuning folder from the
environment.

Modes:
- `opencl`: ocl4dnn's convolution kernels as configured by its heuristics.
- `opencl-tuned`: each convolution's kernel as `compare tune --scope opencv`
  auto-tuned it on this device (OPENCV_OCL4DNN_CONFIG_PATH: a folder per
  device in the cache, opencv_tuning.py); nothing is tuned at run time, and
  the depth (convolutions tuned of the net's) is in the result.  Listed
  where the folder holds a tuning.

OpenCV runs a layer it has no OpenCL kernel for (or whose kernel failed to
build) on the host.  Which layers did is found by OpenCV's own trace in a
pass of its own (opencv_fallback.py); they are named in the result and the
mode is labelled "partly on the CPU".

Timing: the whole pass is one forward() on an input already on the device
(a UMat) into an output left there, then clFinish (cv2.ocl.finish); the
input's upload and the output's download are the load and fetch phases.
Per layer: each layer alone as its own OpenCV net (our graph's writing of
it) on the device, synchronised, wall clock only (OpenCV keeps no device
events), so its kernels are those of the layer alone, without the fusions
of the whole pass.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from nets import Feature, LayerKind, Net
from nets.spec import TRANSFORMER_KINDS
from nets.errors import Unsupported, UserError

from ..base import Backend, Family, LayerTiming, PreparedNet, Step
from ..isolated import IsolatedBackend, IsolatedNet, Worker
from . import onnx_transformer_writer, opencv_onnx
from .graph_walk import GraphWalk
from .opencv_device import Child, CvTarget, OpenedDevice, open_device, opencv_version, tuning_folder
from .opencv_fallback import failed_programs, layer_places, trace_environment
from .opencv_read import first_line, read_net
from .opencv_tuning import Tuning, tuning_line

OPENCL, TUNED = "opencl", "opencl-tuned"
MODES = (OPENCL, TUNED)
# what opencv_onnx can write (ViT's layers, not Swin's): the rest refused before a child starts
KINDS = frozenset(LayerKind) - (TRANSFORMER_KINDS - onnx_transformer_writer.KINDS)
FEATURES = frozenset(Feature) - {Feature.COSINE_ATTENTION}
PARTLY = "partly on the CPU"
TIMING = ("whole pass: one forward() of OpenCV's net from a UMat input into a UMat output, then clFinish; "
          "per layer: each layer alone as an OpenCV net of its own, synchronised, wall clock only")


def survey_pass(model: str, inputs: list[tuple[str, tuple]], log: str) -> list[str]:
    """In a traced child of its own: two passes of the model on the device (the second is the one read),
    OpenCV's log into `log`; OpenCV's layer names in the order of their ids."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import cv2
    net = read_net(cv2, model)
    for name, shape in inputs:
        net.setInput(np.zeros(shape, np.float32), name)
    for _ in range(2):
        net.forward()
    cv2.ocl.finish()
    return list(net.getLayerNames())


class _Model:
    """An ONNX model file read by OpenCV: its net, and the names of its inputs."""

    def __init__(self, cv2, path: Path, inputs: list[tuple[str, tuple]], what: str):
        self.path, self.inputs, self.what = path, inputs, what
        self.net = read_net(cv2, str(path))

    def run(self, cv2, xs: list) -> object:
        """One forward of the inputs `xs` (UMats or arrays), synchronised: the first output, a UMat."""
        for (name, _), x in zip(self.inputs, xs):
            self.net.setInput(x, name)
        try:
            out = self.net.forward([cv2.UMat()])[0]
        except cv2.error as exc:
            raise Unsupported(f"OpenCV could not run {self.what}: {first_line(exc)}") from None
        cv2.ocl.finish()
        return out


class OpencvNet(PreparedNet):
    """In the child: the net read by OpenCV from an ONNX model, compiled by a first pass."""

    def __init__(self, net: Net, weights, batch: int, owner: "OpencvInChild", mode: str):
        super().__init__(net, batch)
        import cv2
        if mode == TUNED and not (owner.tuning.depth(net, batch) or (0,))[0]:
            raise Unsupported(owner.tuning.refusal(net, batch))   # before any work: nothing of it was tuned
        self._cv2, self._owner, self._weights = cv2, owner, weights
        self.mode = mode
        self._folder = Path(tempfile.mkdtemp(prefix="net-", dir=owner.folder))
        self._walk = GraphWalk(net)
        self._ours: _Model | None = None
        self._layers: dict[int, _Model] = {}
        given, why = _users_file(net, weights)
        if given:
            self._pass = _Model(cv2, Path(net.model_file), [("", (batch,) + tuple(net.input_shape))],
                                f"the user's ONNX file {Path(net.model_file).name} as given")
            source = f"the user's ONNX file {net.model_file} as given"
        else:
            self._pass = self._our_graph()
            source = f"our graph written as ONNX (opset {opencv_onnx.OPSET}){why}"
        self._in = cv2.UMat(np.zeros((batch,) + tuple(net.input_shape), np.float32))
        self._out = self._pass.run(cv2, [self._in])    # compiles every kernel
        self._check_shape(self._out)
        places = owner.placement(self._pass, net, batch, given)
        self.config = {"mode": mode, "mode_label": mode + (f", {PARTLY}" if places["host_layers"] else ""),
                       "engine": "classic", "model": source, "device": owner.device.name,
                       "per_layer_model": f"our graph written as ONNX (opset {opencv_onnx.OPSET}), each layer alone",
                       "placement": places["placement"], "host_layers": places["host_layers"],
                       "opencl_build_failures": places["build_failures"],
                       "search_depth": tuning_line(owner.tuning, net, batch, mode == TUNED),
                       "timing": TIMING}

    def _our_graph(self) -> _Model:
        if self._ours is None:
            path = self._folder / "net.onnx"
            path.write_bytes(opencv_onnx.net_model(self.net, self._weights, self.batch))
            self._ours = _Model(self._cv2, path, [(opencv_onnx.INPUT, (self.batch,) + tuple(self.net.input_shape))],
                                f"our graph of {self.net.name} as ONNX")
        return self._ours

    def _layer(self, index: int) -> _Model:
        if index not in self._layers:
            data, names = opencv_onnx.layer_model(self.net, self._weights, self.batch, index)
            path = self._folder / f"layer{index}.onnx"
            path.write_bytes(data)
            shapes = [(self.batch,) + tuple(s) for s in self.net.in_shapes(index)]
            self._layers[index] = _Model(self._cv2, path, list(zip(names, shapes)),
                                         f"layer {self.net.layers[index].name} alone as ONNX")
        return self._layers[index]

    def _check_shape(self, out) -> None:
        want = (self.batch,) + tuple(self.net.output_shape)
        got = tuple(out.get().shape)
        if int(np.prod(got)) != int(np.prod(want)):
            raise Unsupported(f"OpenCV's pass gave an output of shape {got}, not {want}")

    def _array(self, umat, index: int) -> np.ndarray:
        return np.ascontiguousarray(umat.get(), np.float32).reshape((self.batch,) + tuple(self.net.out_shape(index)))

    # -- the PreparedNet interface
    def load_input(self, x):
        """A plain copy of the input onto the device, finished before it returns."""
        self._in = self._cv2.UMat(np.ascontiguousarray(x, np.float32))
        self._cv2.ocl.finish()

    def run(self):
        self._out = self._pass.run(self._cv2, [self._in])

    def fetch_output(self):
        return self._array(self._out, len(self.net.layers) - 1)

    def run_timed(self):
        """Each layer alone, synchronised after each; the first call also reads and compiles each layer's
        net (untimed warm-up passes: the runner's first per-layer pass is untimed)."""
        timings = []
        warm = set(self._layers)

        def timed(i, xs):
            model = self._layer(i)
            if i not in warm:
                model.run(self._cv2, xs)
            t0 = time.perf_counter()
            y = model.run(self._cv2, xs)
            wall = (time.perf_counter() - t0) * 1e3
            layer = self.net.layers[i]
            timings.append(LayerTiming(layer.name, wall, None, [Step(layer.kind, wall, "wall")]))
            return y

        self._out = self._walk.run(self._in, timed)[-1]
        return timings

    def run_layer(self, index, x):
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        xs = [self.check_input(a, index, k) for k, a in enumerate(xs)]
        return self._array(self._layer(index).run(self._cv2, xs), index)

    def layer_outputs(self, x):
        model = self._our_graph()
        x = self.check_input(x)
        model.net.setInput(x, opencv_onnx.INPUT)
        names = [_cv_name(model.net, layer.name) for layer in self.net.layers]
        try:
            outs = model.net.forward(names)
        except self._cv2.error as exc:
            raise Unsupported(f"OpenCV could not run {self.net.name}: {first_line(exc)}") from None
        return [np.ascontiguousarray(o, np.float32).reshape((self.batch,) + tuple(self.net.out_shape(i)))
                for i, o in enumerate(outs)]

    def close(self):
        self._pass = self._ours = self._in = self._out = None
        self._layers = {}
        shutil.rmtree(self._folder, ignore_errors=True)   # its models (VGG-16's: its weights twice over)


def _cv_name(net, name: str) -> str:
    """OpenCV's name of the layer that makes our tensor `name`."""
    for candidate in (opencv_onnx.PREFIX + name, name):
        if net.getLayerId(candidate) >= 0:
            return candidate
    raise Unsupported(f"OpenCV's net has no layer that makes {name!r}")


def _users_file(net: Net, weights) -> tuple[bool, str]:
    """Whether the pass can read the user's ONNX file as given: a net imported from one whose layers and
    weights are the run's; else why not (for the result), '' for a net of no file."""
    if not net.model_file:
        return False, ""
    path = Path(net.model_file)
    if not path.is_file():
        return False, f" (the file it was imported from, {path}, is gone)"
    from nets.affine import fold_channel_affines
    from nets.batchnorm import fold_batchnorm
    from nets.onnx_import import load_onnx
    again, theirs = fold_channel_affines(*fold_batchnorm(*load_onnx(path)))
    same = (again.layers == net.layers and again.input_shape == net.input_shape and set(theirs) == set(weights)
            and all(np.array_equal(theirs[k], weights[k]) for k in weights))
    return (True, "") if same else (False, f" (the run's weights or layers are not those of {path})")


class _Written:
    """What both sides of the backend run: what opencv_onnx writes, refused before a child starts."""
    supported_kinds = KINDS
    supported_features = FEATURES

    @classmethod
    def unsupported(cls, net):
        """The kinds and features (Backend's), then a layer of a kind written whose form is not (Swin's windows)."""
        why = super().unsupported(net)
        if why is not None:
            return why
        unwritten = (onnx_transformer_writer.refusal(layer) for layer in net.layers
                     if layer.kind in onnx_transformer_writer.KINDS)
        first = next((w for w in unwritten if w), None)
        return first and f"{first}, which {cls.name} cannot run yet"


class OpencvInChild(_Written, Backend):
    """The backend inside its child: OpenCV's device opened and checked."""

    name = "opencv"
    deterministic = False

    def __init__(self, target: CvTarget, options, tuning: Tuning, folder: str):
        super().__init__(options)
        self.device: OpenedDevice = open_device(target)
        self.target, self.tuning, self.folder = target, tuning, folder
        self._places: dict[tuple, dict] = {}

    def info(self):
        import cv2
        import onnx
        return {"device": self.device.name, "platform": self.device.platform, "driver": self.device.driver,
                "kind": "opencl", "versions": {"opencv": cv2.__version__, "onnx": onnx.__version__},
                "tuning": str(self.tuning.folder)}

    def modes(self):
        return [OPENCL] + ([TUNED] if self.tuning.any() else [])

    def placement(self, model: _Model, net: Net, batch: int, users_file: bool) -> dict:
        """Which of the model's layers ran on the host, from a traced pass in a child of its own (once per
        model's net and batch): our layers' names (or the file's nodes'), how it is known, failed builds."""
        memo = (repr(net), batch, users_file)
        if memo not in self._places:
            self._places[memo] = self._survey(model, net, users_file)
        return self._places[memo]

    def _survey(self, model: _Model, net: Net, users_file: bool) -> dict:
        folder = Path(tempfile.mkdtemp(prefix="trace-", dir=self.folder))
        log = folder / "opencv.log"
        worker = Worker("OpenCV traced pass", env={**trace_environment(folder), "OPENCV_LOG_LEVEL": "INFO"})
        try:
            names = worker.call(__name__, "survey_pass", str(model.path), model.inputs, str(log))
        finally:
            worker.close()   # the trace is written out as the process ends
        places = layer_places(folder, len(names))
        text = log.read_text(errors="replace") if log.is_file() else ""
        ours = {layer.name for layer in net.layers}
        host, unknown = [], []
        for cv_name, on_host in zip(names, places.host):
            node = cv_name[len(opencv_onnx.PREFIX):] if cv_name.startswith(opencv_onnx.PREFIX) else cv_name
            label = node if users_file else (opencv_onnx.layer_of(cv_name, ours) or _param_layer(cv_name, ours)
                                             or node)
            if on_host:
                host.append(label)
            elif on_host is None:
                unknown.append(label)
        host = list(dict.fromkeys(host))
        what = "nodes of the file" if users_file else "layers"
        if places.why_unknown:
            line = f"not known: {places.why_unknown}"
        elif "switching to CPU" in text:
            line = "on the CPU: OpenCV switched the target to the CPU (its log says so)"
            host = ["all"]
        elif host:
            line = f"{PARTLY}: {len(host)} {what} ran some or all of their work on the host ({', '.join(host)})"
        else:
            line = "on the device: no layer ran OpenCV's host thread pool in a traced pass"
        if unknown:
            line += f"; not known for {', '.join(dict.fromkeys(unknown))} (the trace left their work out)"
        return {"placement": line + " [OpenCV's trace; a host fallback that does no parallel work is not seen]",
                "host_layers": host, "build_failures": failed_programs(text)}

    def prepare(self, net, weights, batch, mode=None):
        mode = mode or OPENCL
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r} of the opencv backend; it has {', '.join(MODES)}")
        return OpencvNet(net, weights, batch, self, mode)


def _param_layer(cv_name: str, ours: set[str]) -> str | None:
    """Our layer whose parameter OpenCV made a layer of its own ('s2.coeff': a constant)."""
    base = cv_name.rsplit(".", 1)[0]
    return base if "." in cv_name and base in ours else None


class OpencvBackend(_Written, IsolatedBackend):
    name = "opencv"
    family = Family.ENGINE
    summary = ("peer: OpenCV's DNN on the same OpenCL device (ocl4dnn kernels, classic engine), its "
               "convolutions auto-tuned by `compare tune --scope opencv`")
    uses_opencl = True
    deterministic = False   # the per-layer nets run other kernels than the whole pass's fused ones

    def __init__(self, runtime=None, options=None):
        super().__init__(runtime, options)
        self._children: dict[str, tuple[Child, int]] = {}

    @classmethod
    def unavailable_reason(cls):
        import importlib.util
        if opencv_version() is None:
            return "OpenCV is not installed (pip install 'clblast-compare[opencv]')"
        if importlib.util.find_spec("onnx") is None:
            return "the onnx package is not installed (pip install 'clblast-compare[opencv]')"
        return None

    def tuning(self) -> Tuning:
        return Tuning(tuning_folder(self.runtime.info))

    def _start(self, mode: str) -> tuple[Child, int]:
        """A new child for `mode`: OpenCV reads its tuning folder from the environment, so one per mode."""
        tuning = self.tuning()
        env = tuning.environment(read_only=True) if mode == TUNED else {}
        child = Child(self.runtime.device, f"opencv backend ({mode})", env, screen=True)
        try:
            return child, child.worker.request("new", __name__, "OpencvInChild",
                                               (child.target, self.options, tuning, str(child.folder)))
        except BaseException:
            child.close()
            raise

    def _child(self, mode: str) -> tuple[Worker, int]:
        """The child of `mode`, kept for every net prepared in it."""
        if mode not in self._children:
            self._children[mode] = self._start(mode)
        child, handle = self._children[mode]
        return child.worker, handle

    def _remote(self):
        return self._child(OPENCL)

    @staticmethod
    def _mode(mode: str | None) -> str:
        mode = mode or OPENCL
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r} of the opencv backend; it has {', '.join(MODES)}")
        return mode

    def prepare(self, net, weights, batch, mode=None):
        mode = self._mode(mode)
        worker, handle = self._child(mode)
        return IsolatedNet(worker, worker.request("call", handle, "prepare", (net, weights, batch, mode), True),
                           net, batch, self.options.timeout_s)

    def prepare_fresh(self, net, weights, batch, mode=None):
        mode = self._mode(mode)
        child, handle = self._start(mode)   # its own, stopped with the net
        try:
            return IsolatedNet(child.worker, child.worker.request("call", handle, "prepare",
                                                                  (net, weights, batch, mode), True),
                               net, batch, self.options.timeout_s, owns_worker=True)
        except BaseException:
            child.close()
            raise

    def close(self) -> None:
        for child, _ in self._children.values():
            child.close()
        self._children = {}
        self._worker = None

