"""Run a net on each backend: prepare -> warm up -> check -> time, like
benchdnn's create -> run -> check -> measure.  One backend's failure is
recorded with its reason and the others still run.

A Session holds what every stage needs (the plan, the device's runtime,
the oracle's outputs, the progress display).  Backends run in groups: each
backend of a group is opened (prepared, warmed up, checked), then the
group's timed passes run, then each is closed.  Interleaved, the group is
every backend and the passes go round-robin; otherwise each backend is a
group of its own.

`execute` returns the typed results (compare/results.py) and, beside them,
the outputs (numpy arrays), which never go into a results file."""
from __future__ import annotations

import datetime as _dt
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

import backends
from backends import ModeFloor, RunOptions, screen
from backends.isolated import IsolatedBackend
from nets import Net
from nets.errors import Unsupported, UserError, raise_if_interrupted

from . import __version__, gpustate, noise, oracle, runner_draw
from .ahead import Ahead, apart_from_host
from .checking import TOLERANCE, check_prepared, compare_arrays
from .draws import DRAW_PASSES, KEY, ProcessDraws
from .hostinfo import host_info
from .modes import MODES, checks, times
from .peak import peak_for_run
from .progress import Silent
from .results import (BackendResult, Check, Device, Host, LayerInfo, ModeResult, NetInfo, Peak, RunResult, Samples,
                      Settings, Source, Tool)
from .stages import StageClock
from .timing import Trial, passes_per_sample, sample, within

# a backend is one step of the run's progress (its time left): half of it to get it ready and checked, half for
# its timed passes, given pass by pass
READY_SHARE = 0.5

@dataclass
class Plan:
    net: Net
    batch: int
    weights: dict
    x: np.ndarray
    backends: list[str]
    explicit: bool = True          # backends named by the user, not 'all'
    device: str | None = None      # the user's --device; resolved once, by the session
    repeats: int = 10
    warmup: int = 2
    min_time_s: float | None = None   # calibrate each backend's repeats to this (compare/noise.py); None: exact
    max_repeats: int = noise.MAX_REPEATS
    mode: str = "both"
    layerwise: bool = True
    sources: dict = field(default_factory=dict)   # where weights and input came from: name -> Source
    command: str = ""
    peak_gflops: float | None = None   # the user's figure; else cached or measured
    debug: bool = False
    interleave: bool = False       # timed passes round-robin over the backends
    draws: int = 1                 # processes each side in child processes is prepared in, the fastest kept (draws.py)
    options: RunOptions = field(default_factory=RunOptions)   # what every backend is told (timeout_s, ...)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode is one of {', '.join(MODES)}, not {self.mode!r}")

    @property
    def checks(self) -> bool:
        return checks(self.mode)

    @property
    def times(self) -> bool:
        return times(self.mode)


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


def _by_speed(modes: list[ModeResult]) -> list[str]:
    """The OK modes, fastest first by median compute time (in their own order where they were not timed).
    Only a mode whose output passed the oracle's check is OK (Session._measure_modes)."""
    ok = [m for m in modes if m.status == "OK"]
    return [m.name for m in sorted(ok, key=lambda m: m.compute.median if m.compute is not None else 0.0)]


def _off_the_oracle(comparison) -> str | None:
    """Why an output fails the check a backend's does (compare/checking.py), or None when it passes."""
    if comparison.passed:
        return None
    if comparison.rel_l2 is None:
        return f"its output fails the check against the float64 oracle ({comparison.note})"
    return (f"its output is off the float64 oracle: relative L2 {comparison.rel_l2:.2e}, above the tolerance "
            f"{TOLERANCE['float32']:g}" + (f" ({comparison.note})" if comparison.note else ""))


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


@dataclass
class _Ready:
    """A backend prepared, run once and warmed up: what every later stage starts from."""

    label: str
    prepared: object
    output: np.ndarray
    prepare_ms: float
    first_run_ms: float
    pass_ms: float     # its least warm-up pass (the first run when there is none): what a mode not yet
                       # prepared is held against, so one pass slowed by a compile beside it cannot keep it


@dataclass
class _Open:
    """A backend ready and checked, waiting for its timed passes."""

    entry: BackendResult
    ready: _Ready
    trial: Trial | None = None
    repeats: int = 1     # its timed passes (calibrated: compare/noise.py)
    step_left: float = 0.0   # of its step of the run's progress, what its timed passes still give

    @property
    def prepared(self):
        return self.ready.prepared


class Session:
    """One run of a plan: the device's runtime (resolved once), the oracle's
    outputs and the progress display, held for every stage of every backend."""

    def __init__(self, plan: Plan, progress=None, say=None, clock: StageClock | None = None):
        self.plan = plan
        self.clock = clock or StageClock()   # where the run's time goes (compare/stages.py)
        self._progress = progress or Silent()   # compare/progress.py: update, expect, advance
        self._where = ""   # "backend 2 of 5": which of the plan's backends is at work, said before each line
        self.runtime, self.cl_missing = _resolve_device(plan)   # cl_missing: why no OpenCL backend can run
        self.clock.mark("the OpenCL device opened")
        self._ref = None   # the oracle's output of every layer, when checking (`ref`)
        self._reference: threading.Thread | None = None   # computing it beside the peak
        self._reference_error: BaseException | None = None
        self._made: dict = {}   # backends made by `announce`, each used once by `open`
        self._modes: dict = {}  # their modes, as `announce` was told them
        self.ahead = Ahead()   # the backends whose prepares run ahead, until opened
        # (backend, mode) -> a drawn process not kept for the timed passes, kept for the layer-wise check (_checked)
        self._spares: dict[tuple[str, str | None], _Ready] = {}
        if say is not None:   # before anything takes time
            say(self.announce())
            self.clock.mark("backends made, their modes asked")
        try:
            # the children's compiles start before the oracle, so they run while this process works
            self.ahead.start(plan, self.runtime, self._made, self._modes)
            self.clock.mark("prepares ahead started")
            if plan.checks:
                self._progress.update(f"computing the float64 reference of {plan.net.name}")
                if plan.times and apart_from_host(self.runtime):
                    # on the host's cores while the peak is timed on the device's clock (it was 3-5 s of the
                    # first VGG-16 answer on the H200, the peak 2-9 s after it: its notes' steps 40-41)
                    self._reference = threading.Thread(target=self._compute_reference, name="float64 reference",
                                                       daemon=True)   # an interrupt need not wait for numpy
                    self._reference.start()
                else:   # a CPU device: the peak and the prepares' measurements share the cores, so not beside them
                    self._compute_reference()
        except BaseException:   # an interrupt: the children compiling stop with the run
            self.drop_ahead()
            raise

    def _compute_reference(self) -> None:
        try:
            self._ref = oracle.forward(self.plan.net, self.plan.weights, self.plan.x)
            self.clock.mark("float64 reference computed")
        except BaseException as exc:  # noqa: BLE001 - raised where the reference is first needed (`ref`)
            self._reference_error = exc
            if self._reference is None:
                raise

    @property
    def ref(self) -> list | None:
        """The oracle's output of every layer (None when the run does not check), waited for where it is computed
        beside the peak."""
        if self._reference is not None:
            self._reference.join()
            self._reference = None
        if self._reference_error is not None:
            raise self._reference_error
        return self._ref

    def progress(self, text: str) -> None:
        self._progress.update(f"{self._where}: {text}" if self._where else text)

    def announce(self) -> str:
        """What the run will time, said before it starts: the backends that can run here, and the modes
        of those that have several (each is measured, and the fastest whose output passes is kept)."""
        parts, n_modes = [], 0
        names = [name for name in self.plan.backends if not backends.unavailable_reason(name)
                 and not (backends.backend_class(name).uses_opencl and self.cl_missing)]
        # a backend in child processes answers from a thread: its child starts (and is screened) while this
        # process makes the others (PyTorch's import, CUDA opened), not after
        in_children = [n for n in names if _in_children(backends.backend_class(n))]
        with ThreadPoolExecutor(max_workers=max(len(in_children), 1), thread_name_prefix="announce") as pool:
            asked = {name: pool.submit(self._make, name) for name in in_children}
            for name in names:
                if name not in asked:
                    self._make(name)
            for future in asked.values():
                future.result()
        for name in names:
            modes = self._modes.get(name, [])
            n_modes += max(len(modes), 1)
            parts.append(f"{name} ({len(modes)} modes: {', '.join(modes)})" if modes else name)
        p = self.plan
        if not p.times:   # a check keeps one mode a backend (its first that passes): its table has a row each
            return (f"checks {len(parts)} backends on {p.net.name} batch {p.batch}, each in the first of its modes "
                    f"that passes: " + "; ".join(parts))
        what = "checks and times" if p.checks else "times"
        return (f"{what} {len(parts)} backends, {n_modes} modes in all, on {p.net.name} batch {p.batch}: "
                + "; ".join(parts))

    def _make(self, name: str) -> None:
        """Backend `name` made and its modes asked, kept for `open`; a failure is said when it opens."""
        try:
            made = self._made[name] = backends.create(backends.backend_class(name), self.runtime, self.plan.options)
            self._modes[name] = made.modes()
        except Exception:  # noqa: BLE001 - said when the backend opens; here only what is known
            raise_if_interrupted()

    def settle_ahead(self) -> None:
        """No pass is timed while a child compiles in the background (compare/ahead.py)."""
        self.ahead.settle(self.progress)

    def drop_ahead(self) -> None:
        """The prepares started ahead that no one took, stopped, and the spare processes no check took, closed
        (an interrupt, the end of the run)."""
        self.ahead.drop()
        for key in list(self._spares):
            self._drop_spare(key)

    def _drop_spare(self, key) -> None:
        spare = self._spares.pop(key, None)
        if spare is not None:
            spare.prepared.close()

    def _checked(self, backend, mode: str | None, ready: _Ready) -> tuple[Check, str | None]:
        """The full check of the ready net, and where its layer-wise part ran when not in the timed process.
        Where the run drew a side's process more than once (`--draws`), the layer-wise part runs in a drawn
        process not kept for the timed passes, of the same backend and mode: layer by layer a peer may build
        and keep a program and buffers a layer (tinygrad), and a process that did ran its whole passes slower
        on NVIDIA's OpenCL (reports/nvidia-h200/NOTES.md).  The timed process's own output is held against
        the oracle end to end all the same.  With one draw, all of it runs in the timed process, as before."""
        plan = self.plan

        def progress(text):
            self.progress(f"{backend.name}: {text}")
        twin = self._spares.pop((backend.name, mode), None)
        if twin is None:
            return check_prepared(ready.prepared, plan.x, self.ref, plan.layerwise, progress=progress), None
        try:
            check = check_prepared(twin.prepared, plan.x, self.ref, True, progress=progress)
        finally:
            twin.prepared.close()
        own = compare_arrays(ready.output, self.ref[-1])
        if not own.passed:
            check = replace(check, status="FAIL", end_to_end=own)
        return check, ("layer by layer in another process of the same backend and mode (a layer-wise check can "
                       "leave a program a layer in its process); the timed process's output end to end")

    def _trial(self, ready: _Ready, backend) -> Trial:
        return Trial(ready.label, ready.prepared, self.plan.x, ready.output, backend.deterministic,
                     self.plan.options.timeout_s, passes_per_sample(ready.pass_ms))

    def _ready(self, backend, mode: str | None, label: str) -> _Ready:
        """The one path to a backend's first timed pass: prepared (untimed work: compile,
        upload, allocate), run once (first-call costs, reported apart), its output sane,
        warmed up; where the plan draws processes (`draws`) and the backend runs in child
        processes, the fastest of that many.  The caller closes what it returns."""
        first = self._ready_once(backend.prepare, mode, label)
        if self.plan.draws < 2 or not self.plan.times or not backend.redrawable:
            return first
        return self._drawn(backend, mode, label, first)

    def _drawn(self, backend, mode: str | None, label: str, first: _Ready) -> _Ready:
        """`first` and plan.draws - 1 more of the backend prepared each in a fresh process of its own, the one
        whose passes are fastest (median of DRAW_PASSES) kept and the others closed; what each drew is kept
        in its config.  A draw that fails is said there; the others stand."""
        plan, readies, failed = self.plan, [first], []
        try:
            for d in range(2, plan.draws + 1):
                try:
                    ready = self._ready_once(backend.prepare_fresh, mode, f"{label} process {d} of {plan.draws}")
                except Exception as exc:  # noqa: BLE001 - the draws that stand still run
                    raise_if_interrupted()
                    failed.append(f"process {d}: {_failure(exc, plan.debug)}")
                    continue
                readies.append(ready)
            medians = self._median_passes(readies, label)
            best = min(range(len(readies)), key=lambda i: medians[i])
        except BaseException:
            for ready in readies:
                ready.prepared.close()
            raise
        losers = sorted((i for i in range(len(readies)) if i != best), key=lambda i: medians[i])
        for i in losers:
            if i == losers[0] and plan.times and plan.checks and plan.layerwise:   # the check's process (_checked)
                self._drop_spare((backend.name, mode))
                self._spares[(backend.name, mode)] = readies[i]
            else:
                readies[i].prepared.close()
        kept = readies[best]
        kept.pass_ms = medians[best]
        kept.prepared.config = {**(kept.prepared.config or {}), KEY: ProcessDraws(
            plan.draws, [round(m, 4) for m in medians], best + 1, DRAW_PASSES, failed).to_json()}
        return kept

    def _median_passes(self, readies: list[_Ready], label: str) -> list[float]:
        """Each drawn process's median compute time (what the timed passes report) over DRAW_PASSES samples,
        the processes taking turns sample by sample: a slow phase of the host falls on every process alike, so
        what tells them apart is the process (the H200 notes' step 19: a probe of one process after
        another kept one that was then slow throughout)."""
        self.progress(f"{label}: {len(readies)} processes, {DRAW_PASSES} samples each in turn to hold them by")
        self.settle_ahead()
        times: list[list[float]] = [[] for _ in readies]
        for _ in range(DRAW_PASSES):
            for ready, took in zip(readies, times):   # each a sample as the timed passes take it (compare/timing.py)
                took.append(sample(ready.prepared, self.plan.x, passes_per_sample(ready.pass_ms))[0]["compute"])
        return [float(np.median(took)) for took in times]

    def _ready_once(self, prepare, mode: str | None, label: str) -> _Ready:
        plan = self.plan
        # each stage said once: the display shows the time going by (a prepare may compile for minutes)
        self.progress(f"{label}: preparing {plan.net.name}")
        t0 = time.perf_counter()
        prepared = prepare(plan.net, plan.weights, plan.batch, mode=mode)
        prepare_ms = (time.perf_counter() - t0) * 1e3
        ahead_ms = getattr(prepared, "ahead_prepare_ms", None)
        if ahead_ms is not None:   # prepared ahead: its own time, not the wait for its answer
            prepare_ms = ahead_ms
        prepare_ms += getattr(prepared, "shared_prepare_ms", 0.0)
        self.clock.mark(f"{label} prepared")
        try:
            self.settle_ahead()   # its first and warm-up passes are timed (reported, held against floors)
            self.progress(f"{label}: first run")
            t0 = time.perf_counter()
            y = prepared.forward(plan.x)
            first_run_ms = pass_ms = (time.perf_counter() - t0) * 1e3
            within(pass_ms / 1e3, plan.options.timeout_s, "the first pass")   # check's one pass is kept to it too
            _sane_output(y, label)
            warm = []
            for w in range(max(plan.warmup - 1, 0)):
                self.progress(f"{label}: warm-up {w + 2}/{plan.warmup}")
                t0 = time.perf_counter()
                prepared.forward(plan.x)
                warm.append((time.perf_counter() - t0) * 1e3)
                within(warm[-1] / 1e3, plan.options.timeout_s, f"warm-up pass {w + 2}")
            pass_ms = min(warm, default=pass_ms)
        except BaseException:
            prepared.close()
            raise
        return _Ready(label, prepared, y, prepare_ms, first_run_ms, pass_ms)

    @staticmethod
    def _against_floor(floor: ModeFloor | None, readies: list[_Ready]) -> tuple[bool, str] | None:
        """A mode whose floor can be told before it is prepared, held against the fastest warm-up pass of the
        modes already ready and checked: (skip it, why), said either way (a compile it is spared, or one that
        may take minutes); None without a floor or a mode to hold it against."""
        if floor is None or not readies:
            return None
        fastest = min(readies, key=lambda r: r.pass_ms)
        if floor.ms > fastest.pass_ms:
            return True, (f"not timed: it cannot win, as its passes take at least {floor.ms:.3f} ms ({floor.how}), "
                          f"more than the fastest warm-up pass of {fastest.label} ({fastest.pass_ms:.3f} ms)")
        return False, (f"prepared: its floor {floor.ms:.3f} ms is under the fastest warm-up pass of {fastest.label} "
                       f"({fastest.pass_ms:.3f} ms)")

    def _measure_modes(self, backend, modes: list[str]) -> tuple[list[ModeResult], dict[str, _Ready]]:
        """Each mode of a backend with several: ready, checked end to end, then all timed end to
        end in turn, one pass of each, each after an untimed pass of its own, so drift between
        them (and between the children they may run in) hits every mode alike.  The results, and
        the ready modes whose output passed, left open for the caller (who closes them)."""
        results, trials, readies, passed = {}, {}, {}, []
        kept: dict[str, _Ready] = {}
        try:
            # a mode whose floor can be told before it is prepared comes last, to be held against the others
            floors = {}
            for mode in modes:
                try:
                    floors[mode] = backend.mode_floor(self.plan.net, self.plan.batch, mode)
                except Unsupported as exc:
                    results[mode] = ModeResult(mode, "UNSUPPORTED", reason=str(exc))
            for mode in sorted(floors, key=lambda m: floors[m] is not None):
                try:
                    skip, why = self._against_floor(floors[mode], passed) or (False, None)
                    if skip:
                        self.progress(f"{backend.name} ({mode}): {why}")
                        results[mode] = ModeResult(mode, "SKIPPED", reason=why)
                        continue
                    ready = readies[mode] = self._ready(backend, mode, f"{backend.name} ({mode})")
                    results[mode] = ModeResult(mode, "OK", reason=why)
                    if self.ref is not None:   # a mode is a candidate only if its output passes the check
                        comparison = compare_arrays(ready.output, self.ref[-1])
                        results[mode].rel_l2 = comparison.rel_l2
                        wrong = _off_the_oracle(comparison)
                        if wrong:
                            results[mode] = ModeResult(mode, "FAILED", reason=wrong, rel_l2=comparison.rel_l2)
                            continue
                    passed.append(ready)
                    if self.plan.times:
                        trials[mode] = self._trial(ready, backend)
                except Unsupported as exc:
                    results[mode] = ModeResult(mode, "UNSUPPORTED", reason=str(exc))
                except Exception as exc:  # noqa: BLE001 - a mode that fails is recorded; the other modes still run
                    raise_if_interrupted()
                    results[mode] = ModeResult(mode, "FAILED", reason=_failure(exc, self.plan.debug))
            ok = [m for m in trials if results[m].status == "OK"]
            rounds = self.plan.repeats if len(ok) > 1 else 0
            if rounds:
                self.settle_ahead()
            for r in range(rounds):   # one mode left: nothing to choose
                for mode, trial in trials.items():
                    if results[mode].status != "OK":
                        continue
                    self.progress(f"{backend.name} ({mode}): modes end to end, repeat {r + 1}/{self.plan.repeats}")
                    try:
                        if len(trials) > 1:
                            trial.settle()
                        trial.end_to_end(r)
                    except Exception as exc:  # noqa: BLE001
                        raise_if_interrupted()
                        results[mode] = ModeResult(mode, "FAILED", reason=_failure(exc, self.plan.debug))
            for mode, trial in trials.items():
                if results[mode].status == "OK" and len(ok) > 1:
                    results[mode].compute = Samples.of(trial.phases["compute"])
            kept = {mode: ready for mode, ready in readies.items() if results[mode].status == "OK"}
            return [results[m] for m in modes], kept
        finally:
            for mode, ready in readies.items():
                if mode not in kept:
                    ready.prepared.close()

    def _candidates(self, backend, entry: BackendResult) -> tuple[list[str | None], _Ready | None]:
        """The modes to use, best first: a backend with several has each measured (entry.modes) and
        gets those whose output passed the oracle's check, fastest first; one without modes, [None].
        With them the first's ready net from that measurement, still open (None if it has none): a prepare
        on PoCL can take a minute, and the chosen mode need not be made twice."""
        modes = backend.modes()
        if not modes:
            return [None], None
        entry.modes, kept = self._measure_modes(backend, modes)
        self.clock.mark(f"{entry.name}: {len(modes)} modes measured")
        order = _by_speed(entry.modes)
        first = kept.pop(order[0], None) if order else None
        for ready in kept.values():
            ready.prepared.close()
        if not order:
            why = "; ".join(f"{m.name}: {(m.reason or '').splitlines()[0]}" for m in entry.modes)
            if all(m.status == "UNSUPPORTED" for m in entry.modes):
                raise Unsupported(f"no mode can run here ({why})")
            raise RuntimeError(f"no mode passed ({why})")
        return order, first

    @staticmethod
    def _refuse_mode(entry: BackendResult, check: Check) -> None:
        """The mode in use failed the full check (a layer alone, say): it is no candidate after all,
        and its time, taken with a wrong output, is dropped."""
        failing = next((c for c in check.layers if not c.passed), check.end_to_end)
        where = f"layer {failing.name}" if failing.name else "end to end"
        what = f"relative L2 {failing.rel_l2:.2e}" if failing.rel_l2 is not None else failing.note
        mode = next(m for m in entry.modes if m.name == entry.mode)
        mode.status, mode.compute = "FAILED", None
        mode.reason = f"failed the check against the float64 oracle ({where}: {what})"

    def open(self, name: str) -> tuple[BackendResult, _Open | None]:
        """One backend up to its timed passes: available? its modes measured and
        the fastest chosen, ready, checked.  The result, and the open backend
        when it got that far."""
        plan = self.plan
        reason = backends.unavailable_reason(name)
        if reason:   # checked first: an unavailable backend's module may not even import
            return BackendResult(name, "UNAVAILABLE", reason=reason), None
        cls = backends.backend_class(name)
        entry = BackendResult(name, "OK", summary=cls.summary, family=str(cls.family), uses_opencl=cls.uses_opencl)
        if cls.uses_opencl and self.cl_missing:
            entry.status, entry.reason = "UNAVAILABLE", self.cl_missing
            return entry, None
        ready = None
        try:
            entry.gpu_state = {"before": gpustate.snapshot()} if gpustate.available() else None
            backend = self._made.pop(name, None) or backends.create(cls, self.runtime, plan.options)
            if name in self.ahead:
                # opened once every prepare ahead answered: what it asks its children from here on (the speed
                # of their plain Python, a mode's floor) is then not slowed by another's compile
                self.settle_ahead()
            entry.info = backend.info()
            candidates, ready = self._candidates(backend, entry)
            for k, mode in enumerate(candidates):   # the fastest mode whose output passes the full check
                entry.mode = mode
                if ready is None:
                    ready = self._ready(backend, mode, entry.label)
                else:   # made while the modes were measured
                    ready = replace(ready, label=entry.label)
                entry.prepare_ms, entry.first_run_ms = ready.prepare_ms, ready.first_run_ms
                entry.config = ready.prepared.config
                entry.memory_bytes = ready.prepared.memory_bytes
                if not plan.checks:
                    break
                self.progress(f"{entry.label}: checking against the float64 oracle")
                entry.check, where = self._checked(backend, mode, ready)
                if where:
                    entry.config = {**(entry.config or {}), "checked": where}
                self.clock.mark(f"{entry.label} checked")
                if entry.check.status == "PASS" or mode is None or k == len(candidates) - 1:
                    break
                self._refuse_mode(entry, entry.check)
                ready.prepared.close()
                ready = None
            self.progress(f"{entry.label}: counting the launches of a pass")
            entry.launches = ready.prepared.launches(plan.x)   # untimed
            # a sample is passes back to back (compare/timing.py): the samples add up to the minimum time
            sample_ms = ready.pass_ms * passes_per_sample(ready.pass_ms)
            repeats = noise.calibrated(sample_ms, plan.repeats, plan.min_time_s, plan.max_repeats)
            return entry, _Open(entry, ready, self._trial(ready, backend) if plan.times else None, repeats)
        except Exception as exc:  # noqa: BLE001 - a backend's failure is a result, not the end of the run
            if ready is not None:
                ready.prepared.close()
            return _fail(entry, exc, plan.debug), None
        finally:   # what it started ahead and never asked for (it failed first): stopped; its spares closed
            self.ahead.opened(name)
            for key in [key for key in self._spares if key[0] == name]:
                self._drop_spare(key)

    def _rounds(self, opened: list[_Open]) -> None:
        """The timed passes of the open backends: all of one backend's passes,
        then the next's; or, with plan.interleave, one pass of each in turn,
        each after an untimed pass of its own (Trial.settle: the switch from
        the backend before is not its cost)."""
        plan = self.plan

        def each(step, settle, what):
            most = max((o.repeats for o in opened), default=0)
            order = (((o, r) for r in range(most) for o in opened if r < o.repeats) if plan.interleave   # made as used
                     else ((o, r) for o in opened for r in range(o.repeats)))
            for o, r in order:
                if not o.entry.ok:
                    continue
                self.progress(f"{o.entry.label}: {what}, repeat {r + 1}/{o.repeats}")
                try:
                    if plan.interleave:
                        settle(o.trial)
                    step(o.trial, r)
                except Exception as exc:  # noqa: BLE001 - this backend fails, the others go on
                    _fail(o.entry, exc, plan.debug)
                self._pass_done(o)

        opened = [o for o in opened if o.trial is not None]
        if opened:
            self.settle_ahead()
        each(lambda t, r: t.end_to_end(r), lambda t: t.settle(), "end to end")
        for o in opened:
            if o.entry.ok:
                try:
                    o.trial.layers_first()
                except Exception as exc:  # noqa: BLE001
                    _fail(o.entry, exc, plan.debug)
        each(lambda t, r: t.layers(r), lambda t: t.layers_first(), "per layer")

    def _pass_done(self, o: _Open) -> None:
        """One of the two passes (end to end, per layer) of each of `o`'s repeats: its share of the run's step."""
        share = min((1 - READY_SHARE) / (2 * o.repeats), o.step_left)
        o.step_left -= share
        self._progress.advance(share)

    @staticmethod
    def _close(opened: _Open) -> np.ndarray | None:
        """The timings into the result; the prepared net closed.  Its output, when it stayed OK."""
        entry = opened.entry
        try:
            if opened.trial is not None and entry.ok:
                entry.timing = opened.trial.result()
            if entry.gpu_state is not None:
                entry.gpu_state["after"] = gpustate.snapshot()
        finally:
            opened.prepared.close()
        return opened.ready.output if entry.ok else None

    def run(self, names: list[str]) -> list[tuple[BackendResult, np.ndarray | None]]:
        """A group of backends: each opened, the group's timed passes, each closed.
        Each backend's result, and its output when it ran."""
        entries, opening = {}, {}   # by index in `names`: opened in Ahead.open_order, kept in `names`' order
        every = self.plan.backends
        try:
            for i in self.ahead.open_order(names):
                name = names[i]
                self._where = f"backend {every.index(name) + 1} of {len(every)}" if name in every else ""
                entry, o = self.open(name)
                self.clock.mark(f"{name} ready ({entry.status})")
                entries[i] = entry
                timed = o is not None and o.trial is not None
                if timed:   # the rest of its step comes pass by pass
                    o.step_left = 1 - READY_SHARE
                self._progress.advance(READY_SHARE if timed else 1)
                if o is not None:
                    opening[i] = o
            results = [entries[i] for i in sorted(entries)]
            opened = [opening[i] for i in sorted(opening)]
            if len(names) > 1:
                self._where = f"{len(names)} backends interleaved"
            self._rounds(opened)
            self.clock.mark(f"timed: {', '.join(names)}")
        except BaseException:   # an interrupt: release the devices, record nothing
            for o in opening.values():
                o.prepared.close()
            raise
        self._progress.advance(sum(o.step_left for o in opened))   # of a backend that failed on the way
        outputs = {id(o.entry): self._close(o) for o in opened}
        return [(entry, outputs.get(id(entry))) for entry in results]


def _in_children(cls) -> bool:
    """Whether backend class `cls` does its work in child processes (a test double may be no class at all)."""
    return isinstance(cls, type) and issubclass(cls, IsolatedBackend)


def _device(runtime) -> Device:
    if runtime is None:
        from backends.host import cpu_name
        return Device(cpu_name(), type="CPU", platform="none: no OpenCL backend ran")
    return Device(**runtime.info)


def _peak(plan: Plan, runtime, progress) -> Peak | None:
    if not plan.times:
        return None
    if runtime is not None:
        return Peak(**peak_for_run(runtime, plan.peak_gflops, progress))
    if plan.peak_gflops is not None:
        return Peak(plan.peak_gflops, "given by the user (--peak-gflops)")
    return None


def steps(plan: Plan) -> int:
    """The steps `execute` gives the progress display for `plan`: one a backend.  The caller expects them, for
    one run or for a sweep's runs together (one time left for the whole)."""
    return len(plan.backends)


def execute(plan: Plan, progress=None, say=lambda s: None) -> tuple[RunResult, Outputs]:
    """Every backend of the plan: the results, and the outputs beside them.  `progress` (compare/progress.py)
    is told what is being done and each of the plan's `steps` done; `say` gets the line that tells, before
    anything runs, what will be timed."""
    progress = progress or Silent()
    clock = StageClock()
    clock.mark("run started (the process started, imports, the plan made)")
    quiet = noise.host_state()   # before the run's own work adds to the load
    screen.start_run(quiet["plain_python_ms"])   # the run's children are held against the runner and each other
    host = Host(**host_info(), **quiet, runner_draws=runner_draw.drawn())
    if plan.times and noise.busy_line(host):
        say(noise.busy_line(host))
    session = Session(plan, progress, say, clock)
    try:
        return _execute(plan, progress, session, host)
    finally:   # an interrupt, or a prepare ahead that nothing asked for: its child stops
        session.drop_ahead()


def _execute(plan: Plan, progress, session: Session, host: Host) -> tuple[RunResult, Outputs]:
    net = plan.net
    result = RunResult(
        tool=Tool("clblast-compare", __version__),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=plan.command,
        host=host,
        device=_device(session.runtime),
        mode=plan.mode,
        settings=Settings(plan.repeats, plan.warmup, plan.layerwise, plan.interleave, plan.min_time_s,
                          plan.draws),
        net=NetInfo(name=net.name, batch=plan.batch, flops=net.flops(plan.batch),
                    layers=[LayerInfo(**row) for row in net.layer_table(plan.batch)],
                    input_shape=list(net.input_shape), params=net.params()),
        sources={k: v if isinstance(v, Source) else Source(**v) for k, v in plan.sources.items()},
        peak=_peak(plan, session.runtime, progress.update),   # timed on the device's clock (compare/ahead.py)
        backends=[], stages=session.clock.stages)   # the clock's own list: the stages to come join it
    session.clock.mark("peak known")
    outputs = Outputs(reference=session.ref[-1] if session.ref is not None else None)
    # interleaved, every backend is open at once and their timed passes go in turn;
    # otherwise each runs alone, as the interleaved run of one backend, those with prepares ahead last
    # (Ahead.open_order); the results in the plan's order either way
    if plan.interleave:
        groups = [plan.backends]
    else:
        order = session.ahead.open_order(plan.backends)
        groups = [[plan.backends[i]] for i in order]
    done = [pair for group in groups for pair in session.run(group)]
    if not plan.interleave:
        done = [pair for _, pair in sorted(zip(order, done), key=lambda p: p[0])]
    for entry, y in done:
        result.backends.append(entry)
        if y is not None:
            outputs.backends[entry.name] = y
    session.clock.mark("every backend timed and closed")
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
