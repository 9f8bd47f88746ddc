"""Run a net on each backend: prepare -> warm up -> check -> time, like
benchdnn's create -> run -> check -> measure.  One backend's failure is
recorded with its reason and the others still run.

`execute` returns the typed results (compare/results.py) and, beside them,
the outputs (numpy arrays), which never go into a results file."""
from __future__ import annotations

import datetime as _dt
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

import backends
from nets import Net
from nets.errors import Unsupported, UserError, raise_if_interrupted

from . import __version__, gpustate, oracle
from .checking import check_prepared, compare_arrays
from .hostinfo import host_info
from .peak import peak_for_run
from .results import (BackendResult, Device, Host, LayerInfo, ModeResult, NetInfo, Peak, RunResult, Samples, Settings,
                      Source, Tool)
from .timing import Trial, within

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
    sources: dict = field(default_factory=dict)   # where weights and input came from: name -> Source
    command: str = ""
    peak_gflops: float | None = None   # the user's figure; else cached or measured
    debug: bool = False
    interleave: bool = False       # timed passes round-robin over the backends
    timeout_s: float | None = None  # a backend whose pass takes longer fails
    options: dict = field(default_factory=dict)   # settings passed to every backend (clblast_params)


@dataclass
class Outputs:
    """What the backends computed, kept beside the results for --save-outputs
    and the digits accuracy: the oracle's final output and each backend's."""

    reference: np.ndarray | None = None
    backends: dict[str, np.ndarray] = field(default_factory=dict)


def _resolve_device(plan: Plan):
    """The OpenCL runtime if an OpenCL backend is in the plan, else None.
    Returns (runtime, reason it is missing)."""
    wants_cl = [n for n in plan.backends
                if backends.unavailable_reason(n) is None and backends.backend_class(n).uses_opencl]
    from backends.opencl.runtime import get_runtime
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


def _sane_output(y: np.ndarray, name: str) -> None:
    """Before timing: the output must be finite and not all zeros (buffers
    start poisoned with NaN, so an element never written fails here)."""
    if not np.all(np.isfinite(y)):
        raise RuntimeError(f"{name} produced NaN/Inf in its output")
    if not np.any(y):
        raise RuntimeError(f"{name} produced an all-zero output")


def _failure(exc: Exception, debug: bool) -> str:
    reason = f"{type(exc).__name__}: {exc}"
    if debug:   # a backend in a child process (backends/isolated.py) sends its own traceback
        reason += "\n" + getattr(exc, "child_traceback", "") + traceback.format_exc()
    return reason


def _measure_mode(backend, mode: str, plan: Plan, ref, progress) -> ModeResult:
    """One mode of a backend with several: prepared, checked end to end, timed end to end."""
    prepared = None
    label = f"{backend.name} ({mode})"
    try:
        progress(f"{label}: preparing")
        prepared = backend.prepare(plan.net, plan.weights, plan.batch, mode=mode)
        y = prepared.forward(plan.x)
        _sane_output(y, label)
        for _ in range(max(plan.warmup - 1, 0)):
            prepared.forward(plan.x)
        result = ModeResult(mode, "OK")
        if ref is not None:
            result.rel_l2 = compare_arrays(y, ref[-1]).rel_l2
        if plan.mode in ("performance", "both"):
            trial = Trial(label, prepared, plan.x, y, backend.deterministic, plan.timeout_s)
            for r in range(plan.repeats):
                progress(f"{label}: end to end, repeat {r + 1}/{plan.repeats}")
                trial.end_to_end(r)
            result.compute = Samples.of(trial.phases["compute"])
        return result
    except Unsupported as exc:
        return ModeResult(mode, "UNSUPPORTED", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a mode that fails is recorded; the other modes still run
        raise_if_interrupted()
        return ModeResult(mode, "FAILED", reason=_failure(exc, plan.debug))
    finally:
        if prepared is not None:
            prepared.close()


def _fastest(modes: list[ModeResult]) -> str | None:
    """The OK mode with the lowest median compute time (the first OK one when none was timed)."""
    ok = [m for m in modes if m.status == "OK"]
    timed = [m for m in ok if m.compute is not None]
    if timed:
        return min(timed, key=lambda m: m.compute.median).name
    return ok[0].name if ok else None


@dataclass
class _Open:
    """A backend prepared, warmed up and checked, waiting for its timed passes."""

    entry: BackendResult
    prepared: object
    output: np.ndarray
    trial: Trial | None = None


def _fail(entry: BackendResult, exc: BaseException, debug: bool) -> BackendResult:
    """`entry` recorded as UNSUPPORTED or FAILED by what `exc` says (unless a
    signal came: then `exc` was its doing, and the run stops)."""
    raise_if_interrupted()
    entry.check = entry.timing = None
    if isinstance(exc, Unsupported):
        entry.status, entry.reason = "UNSUPPORTED", str(exc)
    elif isinstance(exc, UserError):
        entry.status, entry.error_kind, entry.reason = "FAILED", "user", str(exc)
    else:
        entry.status, entry.error_kind, entry.reason = "FAILED", "internal", _failure(exc, debug)
    return entry


def _open(name: str, plan: Plan, ref, progress, cl_missing: str | None) -> tuple[BackendResult, _Open | None]:
    """One backend up to its timed passes: available? its modes measured and
    the fastest chosen, prepared, run once, warmed up, checked.  The result,
    and the open backend when it got that far."""
    reason = backends.unavailable_reason(name)
    if reason:   # checked first: an unavailable backend's module may not even import
        return BackendResult(name, "UNAVAILABLE", reason=reason), None
    cls = backends.backend_class(name)
    entry = BackendResult(name, "OK", summary=cls.summary, uses_opencl=cls.uses_opencl)
    if cls.uses_opencl and cl_missing:
        entry.status, entry.reason = "UNAVAILABLE", cl_missing
        return entry, None
    prepared = None
    try:
        entry.gpu_state = {"before": gpustate.snapshot()} if gpustate.available() else None
        backend = cls(device=plan.device, options=plan.options)
        entry.info = backend.info()
        modes = backend.modes()
        if modes:
            entry.modes = [_measure_mode(backend, m, plan, ref, progress) for m in modes]
            entry.mode = _fastest(entry.modes)
            if entry.mode is None:
                why = "; ".join(f"{m.name}: {(m.reason or '').splitlines()[0]}" for m in entry.modes)
                if all(m.status == "UNSUPPORTED" for m in entry.modes):
                    raise Unsupported(f"no mode can run here ({why})")
                raise RuntimeError(f"no mode ran ({why})")
        progress(f"{name}: preparing {plan.net.name}")
        t0 = time.perf_counter()
        prepared = backend.prepare(plan.net, plan.weights, plan.batch, mode=entry.mode)
        entry.prepare_ms = (time.perf_counter() - t0) * 1e3
        entry.config = prepared.config
        entry.memory_bytes = prepared.memory_bytes
        progress(f"{name}: first run")
        t0 = time.perf_counter()
        y = prepared.forward(plan.x)
        entry.first_run_ms = (time.perf_counter() - t0) * 1e3
        _sane_output(y, name)
        for w in range(max(plan.warmup - 1, 0)):
            progress(f"{name}: warm-up {w + 2}/{plan.warmup}")
            t0 = time.perf_counter()
            prepared.forward(plan.x)
            within(time.perf_counter() - t0, plan.timeout_s, f"warm-up pass {w + 2}")
        if plan.mode in ("correctness", "both"):
            progress(f"{name}: checking against the float64 oracle")
            entry.check = check_prepared(prepared, plan.x, ref, plan.layerwise,
                                         progress=lambda s: progress(f"{name}: {s}"))
        opened = _Open(entry, prepared, y)
        if plan.mode in ("performance", "both"):
            opened.trial = Trial(entry.label, prepared, plan.x, y, backend.deterministic, plan.timeout_s)
        return entry, opened
    except Exception as exc:  # noqa: BLE001 - a backend's failure is a result, not the end of the run
        if prepared is not None:
            prepared.close()
        return _fail(entry, exc, plan.debug), None


def _close(opened: _Open, plan: Plan) -> np.ndarray | None:
    """The timings into the result; the prepared net closed.  Its output, when it stayed OK."""
    entry = opened.entry
    try:
        if opened.trial is not None and entry.ok:
            entry.timing = opened.trial.result()
        if entry.gpu_state is not None:
            entry.gpu_state["after"] = gpustate.snapshot()
    finally:
        opened.prepared.close()
    return opened.output if entry.ok else None


def _rounds(opened: list[_Open], plan: Plan, progress) -> None:
    """The timed passes of the open backends: all of one backend's passes,
    then the next's; or, with plan.interleave, one pass of each in turn,
    each after an untimed pass of its own (Trial.settle: the switch from
    the backend before is not its cost)."""
    def each(step, settle, what):
        order = ([(o, r) for r in range(plan.repeats) for o in opened] if plan.interleave
                 else [(o, r) for o in opened for r in range(plan.repeats)])
        for o, r in order:
            if not o.entry.ok:
                continue
            progress(f"{o.entry.label}: {what}, repeat {r + 1}/{plan.repeats}")
            try:
                if plan.interleave:
                    settle(o.trial)
                step(o.trial, r)
            except Exception as exc:  # noqa: BLE001 - this backend fails, the others go on
                _fail(o.entry, exc, plan.debug)

    live = [o for o in opened if o.trial is not None]
    opened[:] = live
    each(lambda t, r: t.end_to_end(r), lambda t: t.settle(), "end to end")
    for o in opened:
        if o.entry.ok:
            try:
                o.trial.layers_first()
            except Exception as exc:  # noqa: BLE001
                _fail(o.entry, exc, plan.debug)
    each(lambda t, r: t.layers(r), lambda t: t.layers_first(), "per layer")


def run_backend(name: str, plan: Plan, ref, progress, cl_missing: str | None) -> tuple[BackendResult, np.ndarray | None]:
    """One backend through every stage; its result, and its output when it ran.
    A backend with several modes has each measured first; the fastest then
    runs every stage, and the others are recorded beside it."""
    entry, opened = _open(name, plan, ref, progress, cl_missing)
    if opened is None:
        return entry, None
    try:
        _rounds([opened], plan, progress)
    except BaseException:   # an interrupt: release the device, record nothing
        opened.prepared.close()
        raise
    return entry, _close(opened, plan)


def _device(runtime) -> Device:
    if runtime is None:
        from backends.host import cpu_name
        return Device(cpu_name(), type="CPU", platform="none: no OpenCL backend ran")
    return Device(**runtime.info)


def _peak(plan: Plan, runtime, progress) -> Peak | None:
    if plan.mode == "correctness":
        return None
    if runtime is not None:
        return Peak(**peak_for_run(runtime, plan.peak_gflops, progress))
    if plan.peak_gflops is not None:
        return Peak(plan.peak_gflops, "given by the user (--peak-gflops)")
    return None


def execute(plan: Plan, progress=lambda s: None) -> tuple[RunResult, Outputs]:
    """Every backend of the plan: the results, and the outputs beside them."""
    runtime, cl_missing = _resolve_device(plan)
    peak = _peak(plan, runtime, progress)
    outputs = Outputs()
    ref = None
    if plan.mode in ("correctness", "both"):
        progress(f"computing the float64 reference of {plan.net.name}")
        ref = oracle.forward(plan.net, plan.weights, plan.x)
        outputs.reference = ref[-1]
    net = plan.net
    result = RunResult(
        tool=Tool("clblast-compare", __version__),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=plan.command,
        host=Host(**host_info()),
        device=_device(runtime),
        mode=plan.mode,
        settings=Settings(plan.repeats, plan.warmup, plan.layerwise, plan.interleave),
        net=NetInfo(name=net.name, batch=plan.batch, flops=net.flops(plan.batch),
                    layers=[LayerInfo(**row) for row in net.layer_table(plan.batch)],
                    input_shape=list(net.input_shape), params=net.params()),
        sources={k: v if isinstance(v, Source) else Source(**v) for k, v in plan.sources.items()},
        peak=peak,
        backends=[])
    if plan.interleave:   # every backend open at once, their timed passes in turn
        opened = []
        try:
            for name in plan.backends:
                entry, o = _open(name, plan, ref, progress, cl_missing)
                result.backends.append(entry)
                if o is not None:
                    opened.append(o)
            _rounds(list(opened), plan, progress)
        except BaseException:   # an interrupt: release the devices, record nothing
            for o in opened:
                o.prepared.close()
            raise
        for o in opened:
            y = _close(o, plan)
            if y is not None:
                outputs.backends[o.entry.name] = y
    else:
        for name in plan.backends:
            entry, y = run_backend(name, plan, ref, progress, cl_missing)
            result.backends.append(entry)
            if y is not None:
                outputs.backends[name] = y
    return result, outputs


def exit_code(result: RunResult) -> int:
    """0: all good; 1: a check failed or a backend crashed; 2: a backend was
    refused for a user-level reason (too large for the device, ...)."""
    code = 0
    for b in result.backends:
        if b.status == "FAILED":
            code = max(code, 2 if b.error_kind == "user" else 1)
        elif b.ok and b.check and b.check.status != "PASS":
            code = max(code, 1)
    return code
