"""The common layer interface every backend implements.

    backend = backends.get("vectorised", device=None)   # registry, lazy import; the device resolved once
    net = backend.prepare(netspec, weights, batch)      # compile, upload, allocate: untimed
    y = net.forward(x)                                  # numpy in, numpy out
    phases, y = net.timed_pass(x)                       # upload, compute, download (ms), and the output
    timings = net.run_timed()                           # per layer: wall, kernel, named steps
    y_i = net.run_layer(i, x_i)                         # one layer alone, for layer-wise checks
    outs = net.layer_outputs(x)                         # every layer's output, end to end
    launches = net.launches(x)                          # what one pass enqueues (None: not known)

Host arrays are always in the canonical layout: float32, NCHW for spatial
layers, (N, features) for dense ones.  Internal layouts (NHWC, padded,
Morton) are each backend's business and never leak out.
"""
from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from nets import STUDY_KINDS, Net
from nets.errors import Unsupported, UserError

from .options import RunOptions


class Family(StrEnum):
    """What side of the study's question a backend is on: the answer holds the
    best hand-written backend against CLBlast at its best, then the peers."""

    REFERENCE = "reference"        # numpy: the CPU reference
    CLBLAST = "clblast"            # compositions of CLBlast's routines
    HAND_WRITTEN = "hand-written"  # our OpenCL kernels
    COMPILER = "compiler"          # a search compiler that emits OpenCL for the same device (tinygrad)
    ENGINE = "engine"              # a library engine with its own OpenCL kernels on the same device (OpenCV's DNN)
    PEER = "peer"                  # a framework a user would pick instead (PyTorch, TensorFlow)


@dataclass
class Step:
    """One named part of a layer's work (a kernel, a library routine)."""

    name: str
    ms: float
    how: str  # 'event': the kernel's own profiling event; 'markers': markers
    #            around a library call on the in-order queue; 'wall': host clock


@dataclass
class ModeFloor:
    """An estimate, made before a mode is prepared, of the least one pass in it can take, and how it was
    made: the runner does not prepare and time a mode whose floor exceeds a pass of a mode already ready."""

    ms: float
    how: str


@dataclass
class Launches:
    """What one forward pass puts on the device, counted while an untimed pass runs.

    `kernels`: the kernels of ours the pass runs, launched one by one or replayed from a recording (a
    compiler's: those its captured pass runs).  `enqueues`: the host's calls that put work on the
    device: each kernel launched alone, each library routine call, each replay of a recorded pass.
    `routine_calls`: the library routine calls among them (CLBlast's), each enqueuing one or more
    kernels of the library's own, which no count here includes.  `how`: what was counted."""

    kernels: int
    enqueues: int
    routine_calls: int = 0
    how: str = ""

    def text(self) -> str:
        """'14'; '1 replay of 14'; '9 + 5 calls' (kernels of ours + library routine calls)."""
        if self.routine_calls:
            return f"{self.kernels} + {self.routine_calls} calls"
        if self.enqueues != self.kernels:
            return f"{self.enqueues} replay{'s' if self.enqueues != 1 else ''} of {self.kernels}"
        return str(self.kernels)


@dataclass
class LayerTiming:
    name: str
    wall_ms: float               # host clock around enqueue + finish
    kernel_ms: float | None      # sum of the steps' device times; None without device events
    steps: list[Step] = field(default_factory=list)


class PreparedNet(ABC):
    """A net made ready on one backend for one batch size."""

    def __init__(self, net: Net, batch: int):
        self.net = net
        self.batch = batch
        self.config: dict = {}                 # choices made (work-groups, layouts): recorded in results
        self.memory_bytes: int | None = None   # device memory held: weights + buffers
        self.made_ms = 0.0            # the backend's own time to make it, where it keeps one (ReplayingBackend)
        self.shared_prepare_ms = 0.0  # prepare work done for another mode's net that this one shares (a twin)
        # prepared ahead (Backend.prepare_ahead): its prepare's own time, from sent to made; the runner reports
        # it, not the wait for it (near zero when it was made in the background meanwhile)
        self.ahead_prepare_ms: float | None = None

    # -- the three phases of a forward pass; each returns when its work is done
    @abstractmethod
    def load_input(self, x: np.ndarray) -> None:
        """Copy a canonical input batch to where the first layer reads it."""

    @abstractmethod
    def run(self) -> None:
        """Run every layer on the loaded input, with no syncs between layers."""

    @abstractmethod
    def fetch_output(self) -> np.ndarray:
        """The last layer's output, canonical layout."""

    @abstractmethod
    def run_timed(self) -> list[LayerTiming]:
        """Run every layer on the loaded input, synchronising after each to time it."""

    @abstractmethod
    def run_layer(self, index: int, x: np.ndarray) -> np.ndarray:
        """Layer `index` alone on a canonical input; returns its canonical output.
        A layer that reads several inputs (an add, a concatenation) gets them as a
        list, in order (check them with check_inputs)."""

    def layer_outputs(self, x: np.ndarray) -> list[np.ndarray]:
        """Every layer's output when the net runs end to end on `x` (a chain here;
        a backend that runs graphs, Feature.GRAPH, feeds each layer what it names)."""
        outs = []
        for i in range(len(self.net.layers)):
            x = self.run_layer(i, x)
            outs.append(x)
        return outs

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.load_input(self.check_input(x))
        self.run()
        return self.fetch_output()

    def timed_pass(self, x: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
        """One forward pass on `x`, its phases timed by the host clock in ms:
        upload (load_input), compute (run), download (fetch_output), total;
        and its output, which the runner checks against the checked one."""
        x = self.check_input(x)
        t0 = time.perf_counter()
        self.load_input(x)
        t1 = time.perf_counter()
        self.run()
        t2 = time.perf_counter()
        y = self.fetch_output()
        t3 = time.perf_counter()
        return {"upload": (t1 - t0) * 1e3, "compute": (t2 - t1) * 1e3,
                "download": (t3 - t2) * 1e3, "total": (t3 - t0) * 1e3}, y

    def timed_passes(self, x: np.ndarray, n: int) -> list[tuple[dict[str, float], np.ndarray]]:
        """`n` timed passes on `x` back to back (compare/timing.py's sample): each pass's phases and output.
        A backend in a child process makes them in one request, so none waits on a request of its own."""
        return [self.timed_pass(x) for _ in range(n)]

    def launches(self, x: np.ndarray) -> Launches | None:
        """What one forward pass on `x` enqueues, counted while it runs (untimed); None where a backend
        cannot tell (a framework whose dispatch we do not see)."""
        return None

    def close(self) -> None:
        """Release device memory; the object is unusable afterwards."""

    # -- helpers for subclasses
    def check_inputs(self, x, index: int) -> list[np.ndarray] | np.ndarray:
        """run_layer's `x` checked: a list of one array per input of layer `index`, or one array."""
        if isinstance(x, (list, tuple)):
            return [self.check_input(a, index, k) for k, a in enumerate(x)]
        return self.check_input(x, index)

    def check_input(self, x: np.ndarray, index: int = 0, which: int = 0) -> np.ndarray:
        """`x` as input `which` of layer `index` (the net's input: layer 0's first), checked."""
        want = (self.batch,) + tuple(self.net.in_shapes(index)[which])
        if not isinstance(x, np.ndarray):
            raise UserError(f"input must be a numpy array of shape {want}, got {type(x).__name__}")
        if x.dtype != np.float32:
            raise UserError(f"input has dtype {x.dtype}; {self.net.name} takes float32")
        if tuple(x.shape) != want:
            raise UserError(f"input has shape {tuple(x.shape)}; {self.net.name} layer "
                            f"{self.net.layers[index].name} at batch {self.batch} takes {want}")
        x = np.ascontiguousarray(x)
        return x if x.flags.writeable else x.copy()   # a read-only array (a memory map, a file's view) as a plain one


class Backend(ABC):
    """A way of running nets.  Subclasses set the class attributes.

    A backend that can run in several modes (a peer: eager or graph replay,
    NCHW or channels-last, with or without XLA) lists them in modes(); the
    runner prepares, checks and times each, and reports the fastest with
    its name, the others beside it.  prepare() takes the mode (None: the
    first)."""

    name: str = ""
    summary: str = ""        # one line for `compare backends` and the reports
    family: str = ""         # a Family; a backend in none (a test double) is on no side of the answer
    uses_opencl: bool = False   # True: constructed with the OpenCL runtime it runs on (see `create`)
    deterministic = True     # the same input gives bit-identical outputs on every pass
    # True: runs in child processes, and prepare_fresh starts one (a process draws its speed when it starts,
    # reports/nvidia-h200/NOTES.md: `--draws` prepares such a side in several and keeps the fastest)
    redrawable = False
    # What the family runs (nets/spec.py): the study's layer kinds in a chain, unless it says
    # more.  Every prepare() refuses anything else first (Unsupported, shown as UNSUPPORTED).
    supported_kinds: frozenset = STUDY_KINDS
    supported_features: frozenset = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "prepare" in cls.__dict__:   # so no family can forget the check
            cls.prepare = _refusing_unsupported(cls.__dict__["prepare"])

    @classmethod
    def unsupported(cls, net: Net) -> str | None:
        """None when this backend runs every layer of `net`, else one line naming
        the first layer it cannot run, its kind and what it lacks."""
        refusals = []
        for i, layer in enumerate(net.layers):
            if layer.kind not in cls.supported_kinds:
                refusals.append(f"layer {layer.name} is a {layer.kind} layer, which {cls.name} cannot run yet")
                continue
            lacking = sorted(net.layer_features(i) - cls.supported_features)
            if lacking:
                refusals.append(f"layer {layer.name} ({layer.kind}) uses {' and '.join(lacking)}, "
                                f"which {cls.name} cannot run yet")
        if not refusals:
            return None
        more = len(refusals) - 1
        return refusals[0] + (f" (and {more} more layer{'s' if more > 1 else ''} of {net.name})" if more else "")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when the backend can run here, else why not (a library missing...)."""
        return None

    def __init__(self, options: RunOptions | None = None):
        self.options = options or RunOptions()

    @abstractmethod
    def info(self) -> dict:
        """Where it runs and with what: device, driver, library versions."""

    def modes(self) -> list[str]:
        """The modes this backend can run in here, in order of preference; [] when it has only one."""
        return []

    def mode_floor(self, net: Net, batch: int, mode: str) -> ModeFloor | None:
        """The least a pass of `mode` can take, where it can be told without preparing it (None: not known)."""
        return None

    def has_floor(self, net: Net, batch: int, mode: str) -> bool:
        """Whether `mode` has a floor, told without measuring it (a backend whose floor takes a measurement
        says so cheaply: the runner asks before it starts any compile)."""
        return self.mode_floor(net, batch, mode) is not None

    @abstractmethod
    def prepare(self, net: Net, weights: dict[str, np.ndarray], batch: int, mode: str | None = None) -> PreparedNet:
        """Compile, upload and allocate: everything that is not timed."""

    # True: prepare_ahead starts its modes' prepares in the background (backends/isolated.py)
    prepares_ahead = False

    def prepare_ahead(self, net: Net, weights: dict[str, np.ndarray], batch: int, modes: list[str]) -> list[str]:
        """Start preparing `modes` in the background, for `prepare` to take later; the modes started.  A backend
        in the runner's process prepares when the runner asks (a prepare here would block the runner): none."""
        return []

    def settle_ahead(self) -> None:
        """Wait until every prepare started ahead has answered (its result kept for `prepare`)."""

    def drop_ahead(self) -> None:
        """Stop the prepares started ahead that `prepare` never took."""

    def prepare_fresh(self, net: Net, weights: dict[str, np.ndarray], batch: int,
                      mode: str | None = None) -> PreparedNet:
        """As prepare, in a process of its own started for it (closed with the net): only a backend that runs
        in child processes (`redrawable`) can, and the runner then draws its process again (`--draws`)."""
        raise NotImplementedError(f"{self.name} runs in the runner's process: it has no process to draw again")


def create(cls: type[Backend], runtime, options: RunOptions | None = None) -> Backend:
    """An instance of backend class `cls` for a run: one that uses OpenCL is
    given the runtime of the device, resolved once by the caller."""
    if cls.uses_opencl:
        return cls(runtime=runtime, options=options)
    return cls(options=options)


def _refusing_unsupported(prepare):
    @functools.wraps(prepare)
    def checked(self, net, *args, **kwargs):
        why = self.unsupported(net)
        if why:
            raise Unsupported(why)
        return prepare(self, net, *args, **kwargs)
    return checked


def layer_params(net: Net, weights: dict[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
    """The parameters of layer `index` by short name ('weight', 'bias', 'coeff')."""
    layer = net.layers[index]
    return {p: weights[f"{layer.name}.{p}"] for p in layer.param_shapes(net.in_shape(index))}
