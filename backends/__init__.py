"""The backend registry.  Backends are imported only when asked for, so a
missing library (pyclblast, TensorFlow, PyTorch) makes its backend
unavailable, with the reason, while the others still run."""
from __future__ import annotations

import importlib

from nets.errors import UserError

from .base import Backend, LayerTiming, Launches, ModeFloor, PreparedNet, Step, create
from .options import RunOptions

# name -> (module, class); the order is the order of tables and reports
# Each family is a subpackage: reference/, clblast/, handwritten/, morton/,
# peers/; opencl/ holds what the OpenCL families share (their base class,
# OpenCLBackend, in opencl/backend.py).
REGISTRY: dict[str, tuple[str, str]] = {
    "numpy": ("backends.reference.numpy_backend", "NumpyBackend"),
    "clblast": ("backends.clblast.backend", "ClblastBackend"),
    "clblast-convgemm": ("backends.clblast.backend", "ClblastConvgemmBackend"),
    "clblast-best": ("backends.clblast.best", "ClblastBestBackend"),
    "baseline": ("backends.handwritten.baseline", "BaselineBackend"),
    "vectorised": ("backends.handwritten.vectorised", "VectorisedBackend"),
    "vectorised-tiled": ("backends.handwritten.tiled", "TiledBackend"),
    "fused": ("backends.handwritten.fused", "FusedBackend"),
    "morton": ("backends.morton.backend", "MortonBackend"),
    "tensorflow": ("backends.peers.tensorflow_peer", "TensorflowBackend"),
    "torch": ("backends.peers.torch_peer", "TorchBackend"),
    "tinygrad": ("backends.peers.tinygrad_peer", "TinygradBackend"),
    "opencv": ("backends.peers.opencv_peer", "OpencvBackend"),
}

__all__ = ["Backend", "LayerTiming", "Launches", "ModeFloor", "PreparedNet", "Step", "RunOptions", "REGISTRY", "names", "backend_class",
           "unavailable_reason", "parse_names", "create", "get"]


def names() -> list[str]:
    return list(REGISTRY)


def backend_class(name: str) -> type[Backend]:
    if name not in REGISTRY:
        raise UserError(f"unknown backend {name!r}: choose from {', '.join(REGISTRY)} or 'all'")
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def unavailable_reason(name: str) -> str | None:
    """None when `name` can run here; else one line saying why not."""
    try:
        cls = backend_class(name)
    except ImportError as exc:
        return f"cannot import: {exc}"
    return cls.unavailable_reason()


def parse_names(text: str) -> list[str]:
    """'all' or a comma-separated list, checked against the registry."""
    if text.strip() == "all":
        return names()
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    if not chosen:
        raise UserError(f"no backend named; choose from {', '.join(REGISTRY)} or 'all'")
    for n in chosen:
        if n not in REGISTRY:
            raise UserError(f"unknown backend {n!r}: choose from {', '.join(REGISTRY)} or 'all'")
    return list(dict.fromkeys(chosen))


def get(name: str, device: str | None = None, options: RunOptions | None = None) -> Backend:
    """An instance of backend `name` on the OpenCL device `device` selects
    (backends/opencl/runtime.py: select_device), or a UserError saying why it cannot run."""
    reason = unavailable_reason(name)
    if reason:
        raise UserError(f"backend {name!r} is unavailable: {reason}")
    cls = backend_class(name)
    runtime = None
    if cls.uses_opencl:
        from .opencl.runtime import get_runtime
        runtime = get_runtime(device)
    return create(cls, runtime, options)
