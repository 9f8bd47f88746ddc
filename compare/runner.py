"""Run a net on each backend: prepare -> warm up -> check -> time, like
benchdnn's create -> run -> check -> measure.  One backend's failure is
recorded with its reason and the others still run."""
from __future__ import annotations

import datetime as _dt
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

import backends
from nets import Net

from . import __version__, oracle
from .checking import check_prepared
from .errors import Unsupported, UserError
from .hostinfo import cpu_name, host_info
from .peak import peak_for_run
from .results import SCHEMA, VERSION
from .stats import summarize

MODES = ("correctness", "performance", "both")


@dataclass
class Plan:
    net: Net
    batch: int
    weights: dict
    x: np.ndarray
    backends: list[str]
    explicit: bool = True          # backends named by the user, not 'all'
    device: str | None = None
    repeats: int = 10
    warmup: int = 2
    mode: str = "both"
    layerwise: bool = True
    sources: dict = field(default_factory=dict)   # where weights and input came from
    command: str = ""
    peak_gflops: float | None = None   # the user's figure; else cached or measured
    debug: bool = False


def _failed(name, summary, kind, reason):
    return {"name": name, "summary": summary, "status": "FAILED", "error_kind": kind, "reason": reason}


def _resolve_device(plan: Plan):
    """The OpenCL runtime if an OpenCL backend is in the plan, else None.
    Returns (runtime, reason it is missing)."""
    wants_cl = [n for n in plan.backends
                if backends.unavailable_reason(n) is None and backends.backend_class(n).uses_opencl]
    from backends.opencl_runtime import get_runtime
    if plan.device and not wants_cl:
        get_runtime(plan.device)   # a --device that matches nothing is an error even when unused
        return None, None
    if not wants_cl:
        return None, None
    try:
        return get_runtime(plan.device), None
    except UserError as exc:
        if plan.explicit or plan.device:
            raise
        return None, str(exc)


def _time_end_to_end(prepared, x, repeats, progress, name):
    samples = {"upload": [], "compute": [], "download": [], "total": []}
    for r in range(repeats):
        progress(f"{name}: end to end, repeat {r + 1}/{repeats}")
        for key, ms in prepared.timed_pass(x).items():
            samples[key].append(ms)
    return {k: summarize(v) for k, v in samples.items()}


def _time_layers(prepared, x, repeats, progress, name):
    per_repeat = []
    prepared.load_input(x)
    prepared.run_timed()   # untimed: the per-layer path can have first-call costs of its own
    for r in range(repeats):
        progress(f"{name}: per layer, repeat {r + 1}/{repeats}")
        per_repeat.append(prepared.run_timed())
    layers = []
    for i, layer in enumerate(prepared.net.layers):
        runs = [rep[i] for rep in per_repeat]
        kernel = [t.kernel_ms for t in runs]
        has_kernel = all(k is not None for k in kernel)
        steps = []
        for s_i, step in enumerate(runs[0].steps):
            steps.append({"name": step.name, "how": step.how,
                          "ms": summarize([t.steps[s_i].ms for t in runs])})
        layers.append({
            "name": layer.name,
            "wall": summarize([t.wall_ms for t in runs]),
            "kernel": summarize(kernel) if has_kernel else None,
            "overhead": summarize([t.wall_ms - t.kernel_ms for t in runs]) if has_kernel else None,
            "steps": steps,
        })
    return layers


def _sane_output(y: np.ndarray, name: str) -> None:
    """Before timing: the output must be finite and not all zeros (buffers
    start poisoned with NaN, so an element never written fails here)."""
    if not np.all(np.isfinite(y)):
        raise RuntimeError(f"{name} produced NaN/Inf in its output")
    if not np.any(y):
        raise RuntimeError(f"{name} produced an all-zero output")


def run_backend(name: str, plan: Plan, ref, progress, cl_missing: str | None) -> dict:
    reason = backends.unavailable_reason(name)
    if reason:   # checked first: an unavailable backend's module may not even import
        return {"name": name, "summary": "", "uses_opencl": None, "status": "UNAVAILABLE", "reason": reason}
    cls = backends.backend_class(name)
    entry = {"name": name, "summary": cls.summary, "uses_opencl": cls.uses_opencl}
    if cls.uses_opencl and cl_missing:
        return {**entry, "status": "UNAVAILABLE", "reason": cl_missing}
    prepared = None
    try:
        backend = cls(device=plan.device)
        entry["info"] = backend.info()
        progress(f"{name}: preparing {plan.net.name}")
        t0 = time.perf_counter()
        prepared = backend.prepare(plan.net, plan.weights, plan.batch)
        entry["prepare_ms"] = (time.perf_counter() - t0) * 1e3
        entry["config"] = prepared.config
        entry["memory_bytes"] = prepared.memory_bytes
        progress(f"{name}: first run")
        t0 = time.perf_counter()
        y = prepared.forward(plan.x)
        entry["first_run_ms"] = (time.perf_counter() - t0) * 1e3
        _sane_output(y, name)
        for w in range(max(plan.warmup - 1, 0)):
            progress(f"{name}: warm-up {w + 2}/{plan.warmup}")
            prepared.forward(plan.x)
        entry["output"] = y
        entry["check"] = None
        if plan.mode in ("correctness", "both"):
            progress(f"{name}: checking against the float64 oracle")
            entry["check"] = check_prepared(prepared, plan.x, ref, plan.x, plan.layerwise,
                                            progress=lambda s: progress(f"{name}: {s}"))
        entry["timing"] = None
        if plan.mode in ("performance", "both"):
            entry["timing"] = {
                "end_to_end": _time_end_to_end(prepared, plan.x, plan.repeats, progress, name),
                "layers": _time_layers(prepared, plan.x, plan.repeats, progress, name),
            }
        entry["status"] = "OK"
    except Unsupported as exc:
        return {**entry, "status": "UNSUPPORTED", "reason": str(exc)}
    except UserError as exc:
        return {**entry, **_failed(name, cls.summary, "user", str(exc))}
    except Exception as exc:  # noqa: BLE001 - a backend's crash is a result, not the end of the run
        reason = f"{type(exc).__name__}: {exc}"
        if plan.debug:   # a backend in a child process (backends/isolated.py) sends its own traceback
            reason += "\n" + getattr(exc, "child_traceback", "") + traceback.format_exc()
        return {**entry, **_failed(name, cls.summary, "internal", reason)}
    finally:
        if prepared is not None:
            prepared.close()
    return entry


def execute(plan: Plan, progress=lambda s: None) -> dict:
    """Every backend of the plan; returns the results dict (outputs kept
    under 'output' for --save-outputs, dropped before writing)."""
    runtime, cl_missing = _resolve_device(plan)
    peak = None
    if plan.mode != "correctness":
        if runtime is not None:
            peak = peak_for_run(runtime, plan.peak_gflops, progress)
        elif plan.peak_gflops is not None:
            peak = {"gflops": plan.peak_gflops, "bandwidth_gbs": None, "source": "given by the user (--peak-gflops)"}
    ref = None
    if plan.mode in ("correctness", "both"):
        progress(f"computing the float64 reference of {plan.net.name}")
        ref = oracle.forward(plan.net, plan.weights, plan.x)
    results = {
        "schema": SCHEMA,
        "schema_version": VERSION,
        "tool": {"name": "clblast-compare", "version": __version__},
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": plan.command,
        "host": host_info(),
        "device": runtime.info if runtime else {"name": cpu_name(), "type": "CPU",
                                                "platform": "none: no OpenCL backend ran"},
        "mode": plan.mode,
        "settings": {"repeats": plan.repeats, "warmup": plan.warmup, "layerwise_check": plan.layerwise},
        "net": {"name": plan.net.name, "batch": plan.batch, "input_shape": list(plan.net.input_shape),
                "params": plan.net.params(), "flops": plan.net.flops(plan.batch),
                "layers": plan.net.layer_table(plan.batch)},
        "sources": plan.sources,
        "peak": peak,
        "backends": [],
    }
    if ref is not None:
        results["reference_output"] = ref[-1]
    for name in plan.backends:
        results["backends"].append(run_backend(name, plan, ref, progress, cl_missing))
    return results


def exit_code(results: dict) -> int:
    """0: all good; 1: a check failed or a backend crashed; 2: a backend was
    refused for a user-level reason (too large for the device, ...)."""
    code = 0
    for b in results["backends"]:
        if b["status"] == "FAILED":
            code = max(code, 2 if b.get("error_kind") == "user" else 1)
        elif b["status"] == "OK" and b.get("check") and b["check"]["status"] != "PASS":
            code = max(code, 1)
    return code
