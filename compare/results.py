"""The results file as typed data: what `compare run` writes and `compare
report` reads, so runs from several machines merge into one report.

Times are in milliseconds.  Every repeated measurement keeps its raw
samples beside their summary (Samples).  Files are written atomically.
`load_results` validates every field it reads: a malformed file becomes one
UserError naming the field (exit 2), never a traceback.  Version 1 files
(summaries only, no raw samples) are migrated on load.
"""
from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import numpy as np

from backends.atomic import write_text_atomic
from backends.base import Launches

from nets.errors import UserError
from nets.userfile import read_text

SCHEMA = "clblast-compare/results"
VERSION = 3
STATUSES = ("OK", "FAILED", "UNAVAILABLE", "UNSUPPORTED")
CHECK_STATUSES = ("PASS", "FAIL")
MODE_STATUSES = STATUSES + ("SKIPPED",)   # a mode not timed because it could not win (runner.py)
# What `compare report` reads, so that it stays within a few hundred MB whatever it is given: a results file of
# every backend at many repeats is a few MiB; the caps leave room for a million timings of one backend
MAX_FILE_BYTES = 64 * 2**20
MAX_SAMPLES = 2_000_000        # timings kept (every Samples' values) in one file
MAX_DEPTH = 32                 # the deepest results file nests about 8 levels; JSON nested deeper is no results file
FAMILIES = ("reference", "clblast", "hand-written", "compiler", "engine", "peer", "")   # backends/base.py Family; "": none


SIGNED = {"signed": True}   # a field's metadata: its numbers may be negative (every other number in a file may not)


class Malformed(ValueError):
    """A field of a results file is missing or of the wrong type."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)


# -- the model ---------------------------------------------------------------

@dataclass
class Samples:
    """Repeated measurements of one quantity (ms): the raw values in the
    order taken and their summary.  Version 1 files kept only the summary,
    so `values` may be empty."""

    median: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float
    n: int
    values: list[float] = field(default_factory=list)
    # the tail (numpy's linear percentiles of the values); files written before they were kept have them
    # filled in from their values on load, a version-1 file (no values) has none
    p90: float | None = None
    p99: float | None = None

    def __post_init__(self):
        if self.values and (self.p90 is None or self.p99 is None):
            p90, p99 = (float(p) for p in np.percentile(np.asarray(self.values, np.float64), [90, 99]))
            self.p90 = p90 if self.p90 is None else self.p90   # one that was kept stays, to be validated
            self.p99 = p99 if self.p99 is None else self.p99

    @classmethod
    def of(cls, values) -> Samples | None:
        xs = [float(v) for v in values if v is not None]
        if not xs:
            return None
        q1, med, q3 = np.percentile(np.asarray(xs, np.float64), [25, 50, 75])
        return cls(median=float(med), min=min(xs), max=max(xs), q1=float(q1), q3=float(q3),
                   iqr=float(q3 - q1), n=len(xs), values=xs)

    @property
    def spread(self) -> float | None:
        """The interquartile range as a share of the median: how much the repeats vary."""
        return self.iqr / self.median if self.median else None

    def validate(self, where: str) -> None:
        if not self.values:
            return
        if len(self.values) != self.n:
            raise Malformed(where, f"n is {self.n} but {len(self.values)} values are kept")
        # one percentile call for the five (a file holds tens of thousands of samples to check)
        qs = np.percentile(np.asarray(self.values, np.float64), [25, 50, 75, 90, 99])
        q1, med, q3, p90, p99 = (float(q) for q in qs)
        fresh = {"median": med, "min": min(self.values), "max": max(self.values), "q1": q1, "q3": q3, "p90": p90,
                 "p99": p99}
        for name, made in fresh.items():
            kept = getattr(self, name)
            if not math.isclose(kept, made, rel_tol=1e-9, abs_tol=1e-12):
                raise Malformed(f"{where}.{name}", f"is {kept}, but the values kept give {made}")


@dataclass
class StepTimes:
    name: str
    how: str          # 'event', 'markers' (a span between markers on the queue) or 'wall'
    ms: Samples


@dataclass
class LayerTimes:
    name: str
    wall: Samples
    kernel: Samples | None = None     # None where the backend has no device events
    overhead: Samples | None = field(default=None, metadata=SIGNED)   # wall - kernel, per repeat: may be < 0
    steps: list[StepTimes] = field(default_factory=list)


@dataclass
class PassTimes:
    """One whole forward pass without per-layer syncs, its phases apart."""

    upload: Samples
    compute: Samples
    download: Samples
    total: Samples


@dataclass
class Timing:
    end_to_end: PassTimes
    layers: list[LayerTimes]
    passes_per_sample: int = 1   # each end-to-end sample the mean of this many passes back to back (compare/timing.py)


@dataclass
class Comparison:
    """One output against the oracle's (compare.checking)."""

    passed: bool
    rel_l2: float | None = None
    max_abs: float | None = None
    name: str | None = None       # the layer, for a layer-wise comparison
    top1: float | None = None     # share of rows whose argmax agrees, for classifier outputs
    note: str | None = None


@dataclass
class Check:
    status: str
    tolerance: float
    end_to_end: Comparison
    layers: list[Comparison] = field(default_factory=list)

    def validate(self, where: str) -> None:
        if self.status not in CHECK_STATUSES:
            raise Malformed(f"{where}.status", f"must be one of {', '.join(CHECK_STATUSES)}, not {self.status!r}")


@dataclass
class BackendDigits:
    accuracy: float
    differ: int | None = None


@dataclass
class ModeResult:
    """One mode of a backend that can run in several, checked and timed end to end."""

    name: str
    status: str                       # OK, FAILED, UNSUPPORTED or SKIPPED
    reason: str | None = None
    rel_l2: float | None = None       # its output against the oracle's
    compute: Samples | None = None    # the whole pass without per-layer syncs

    def validate(self, where: str) -> None:
        if self.status not in MODE_STATUSES:
            raise Malformed(f"{where}.status", f"must be one of {', '.join(MODE_STATUSES)}, not {self.status!r}")


@dataclass
class BackendResult:
    name: str
    status: str
    summary: str = ""
    family: str = ""                  # its side of the study's question (backends/base.py Family)
    uses_opencl: bool | None = None
    reason: str | None = None         # why it is not OK
    error_kind: str | None = None     # FAILED: 'user' (refused: exit 2) or 'internal' (crashed: exit 1)
    info: dict = field(default_factory=dict)      # where it ran and with what (device, kind, versions)
    config: dict = field(default_factory=dict)    # choices made at prepare
    prepare_ms: float | None = None
    first_run_ms: float | None = None
    memory_bytes: int | None = None
    check: Check | None = None
    timing: Timing | None = None
    digits: BackendDigits | None = None
    mode: str | None = None                    # the mode the timings are of: the fastest of `modes`
    modes: list[ModeResult] = field(default_factory=list)
    gpu_state: dict | None = None              # NVIDIA clocks and power before and after it (nvidia-smi)
    launches: Launches | None = None           # what one pass enqueues (backends/base.py); None: not known, or older file

    def validate(self, where: str) -> None:
        if self.status not in STATUSES:
            raise Malformed(f"{where}.status", f"must be one of {', '.join(STATUSES)}, not {self.status!r}")
        if self.family not in FAMILIES:
            raise Malformed(f"{where}.family", f"must be one of {', '.join(map(repr, FAMILIES))}, not {self.family!r}")

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    @property
    def passed(self) -> bool:
        """Ran, and its output passed the check against the oracle: the only kind of result a ratio may use."""
        return self.ok and self.check is not None and self.check.status == "PASS"

    @property
    def label(self) -> str:
        """The name, with the mode it ran in where it has several, as the backend labels it (config
        'mode_label': the opencv peer's mode 'partly on the CPU' where layers ran on the host)."""
        shown = self.config.get("mode_label") if self.mode and isinstance(self.config, dict) else None
        return f"{self.name} ({shown or self.mode})" if self.mode else self.name


@dataclass
class Tool:
    name: str
    version: str


@dataclass
class Host:
    cpu: str | None = None
    cpus: int | None = None
    os: str | None = None
    python: str | None = None
    hostname: str | None = None
    load_1m: float | None = None      # the load average as the run started (compare/noise.py); absent before
    governor: str | None = None       # the CPU's frequency governor, where Linux says it
    plain_python_ms: float | None = None   # a fixed piece of plain Python in the runner's process (backends/host.py)
    runner_draws: list[float] | None = None   # that piece in each runner process drawn, this one last (compare/runner_draw.py)


@dataclass
class Device:
    """The OpenCL device the run used (or the host CPU when none ran)."""

    name: str
    type: str | None = None
    platform: str | None = None
    platform_version: str | None = None
    vendor: str | None = None
    driver: str | None = None
    opencl: str | None = None
    compute_units: int | None = None
    clock_mhz: int | None = None
    global_mem_bytes: int | None = None
    max_alloc_bytes: int | None = None
    local_mem_bytes: int | None = None
    max_work_group_size: int | None = None
    max_work_item_sizes: list[int] | None = None
    preferred_vector_width_float: int | None = None
    profiling_timer_ns: int | None = None      # 0: the driver's events carry no real times

@dataclass
class Settings:
    repeats: int
    warmup: int
    layerwise_check: bool = True
    interleave: bool = False        # timed passes round-robin over the backends
    min_time_s: float | None = None  # repeats calibrated to this time per backend, `repeats` the floor; None: exact
    draws: int = 1                  # processes each side in child processes was prepared in (compare/draws.py)

    def validate(self, where: str) -> None:
        if self.repeats < 1:
            raise Malformed(f"{where}.repeats" if where else "repeats", f"is {self.repeats}; a run times at least one pass")


@dataclass
class LayerInfo:
    name: str
    kind: str
    flops: int
    activation: str | None = None
    in_shape: list[int] | None = None
    out_shape: list[int] | None = None
    params: int | None = None
    category: str | None = None   # 'conv 3x3', 'depthwise 3x3', 'pooling'... (nets/spec.py layer_category)


@dataclass
class NetInfo:
    name: str
    batch: int
    flops: int
    layers: list[LayerInfo]
    input_shape: list[int] | None = None
    params: int | None = None

    def validate(self, where: str) -> None:
        if self.batch < 1:
            raise Malformed(f"{where}.batch" if where else "batch", f"is {self.batch}; a run has one image or more")


@dataclass
class Source:
    """Where weights or input came from."""

    kind: str                  # 'seed', 'file' or 'digits'
    seed: int | None = None
    path: str | None = None
    sha256_16: str | None = None


@dataclass
class Peak:
    gflops: float
    source: str
    bandwidth_gbs: float | None = None
    details: dict = field(default_factory=dict)
    device: str | None = None
    measured: str | None = None


@dataclass
class DigitsSummary:
    images: int
    compared_with: str
    oracle_accuracy: float | None = None
    oracle_differ: int | None = None


@dataclass
class Stage:
    """A moment of the run (compare/stages.py): what had just ended, seconds since the process started."""

    name: str
    at_s: float


@dataclass
class RunResult:
    """One `compare run` (or `check --out`): a net on one device, every backend."""

    tool: Tool
    created: str
    command: str
    host: Host
    device: Device
    mode: str
    settings: Settings
    net: NetInfo
    backends: list[BackendResult]
    sources: dict[str, Source] = field(default_factory=dict)
    peak: Peak | None = None
    digits: DigitsSummary | None = None
    stages: list[Stage] = field(default_factory=list)   # where the run's time went (compare/stages.py)
    schema: str = SCHEMA
    schema_version: int = VERSION

    def backend(self, name: str) -> BackendResult | None:
        return next((b for b in self.backends if b.name == name), None)


# -- writing -------------------------------------------------------------------

def _clean(obj):
    """JSON has no NaN or Inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    return obj


def to_json(result: RunResult) -> str:
    # Compact: a four-net H100 run's files are megabytes of per-repeat times, and the committed reports
    # travel to the GPU machine with the checkout (64 MiB in all); people read the report, not this.
    return json.dumps(_clean(asdict(result)), separators=(",", ":"), allow_nan=False) + "\n"


def write_results(path: str | os.PathLike, result: RunResult) -> None:
    write_text_atomic(path, to_json(result))


# -- reading -------------------------------------------------------------------

def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _show(v) -> str:
    text = json.dumps(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _decode(tp, value, where: str, signed: bool = False):
    """`value` (parsed JSON) as type `tp`, or Malformed naming `where`.  Numbers must be finite, and not
    negative unless `signed` (a field whose metadata says so, and everything inside it)."""
    origin = get_origin(tp)
    if origin in (Union, UnionType):
        options = [a for a in get_args(tp) if a is not NoneType]
        if value is None:
            if NoneType in get_args(tp):
                return None
            raise Malformed(where, "must not be null")
        return _decode(options[0], value, where, signed)
    if is_dataclass(tp):
        return decode(tp, value, where, signed)
    if tp is float:
        if not _is_number(value):
            raise Malformed(where, f"expected a number, got {_show(value)}")
        if not math.isfinite(value):   # JSON has no NaN or Infinity, and our writer writes null instead
            raise Malformed(where, f"is {value}, not a finite number")
        if value < 0 and not signed:
            raise Malformed(where, f"is {value}, but it cannot be negative")
        return float(value)
    if tp is int:
        if not (isinstance(value, int) and not isinstance(value, bool)):
            raise Malformed(where, f"expected a whole number, got {_show(value)}")
        if value < 0 and not signed:
            raise Malformed(where, f"is {value}, but it cannot be negative")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise Malformed(where, f"expected true or false, got {_show(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise Malformed(where, f"expected a string, got {_show(value)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise Malformed(where, f"expected a list, got {_show(value)}")
        (item,) = get_args(tp)
        return [_decode(item, v, f"{where}[{i}]", signed) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise Malformed(where, f"expected an object, got {_show(value)}")
        _, item = get_args(tp)
        return {k: _decode(item, v, f"{where}.{k}", signed) for k, v in value.items()}
    if tp is dict or tp is Any:   # free-form: recorded choices and versions, shown as they are
        if tp is dict and not isinstance(value, dict):
            raise Malformed(where, f"expected an object, got {_show(value)}")
        return value
    raise TypeError(f"results model: no decoder for {tp!r} at {where}")


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    """The field types of a results dataclass, resolved once (per field of every sample, it was most of a load)."""
    return get_type_hints(cls)


def decode(cls, data, where: str = "", signed: bool = False):
    """An instance of dataclass `cls` from parsed JSON, every field checked."""
    if not isinstance(data, dict):
        raise Malformed(where, f"expected an object, got {_show(data)}")
    hints = _hints(cls)
    kwargs = {}
    for f in fields(cls):
        at = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise Malformed(at, "is missing")
            continue
        kwargs[f.name] = _decode(hints[f.name], data[f.name], at, signed or f.metadata.get("signed", False))
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate(where)
    return obj


def _migrate_v1(data: dict) -> dict:
    """Version 1 kept summaries only: every summary gets an empty list of
    raw values (nothing else changed)."""
    def walk(obj):
        if isinstance(obj, dict):
            if {"median", "n"} <= obj.keys() and "values" not in obj:
                obj["values"] = []
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)
    for b in data.get("backends") or []:
        if isinstance(b, dict):
            walk(b.get("timing"))
    data["schema_version"] = 2
    return data


# the backends there were when version 2 was current, and their side of the question
_FAMILIES_V2 = {"numpy": "reference", "clblast": "clblast", "clblast-convgemm": "clblast", "clblast-best": "clblast",
                "baseline": "hand-written", "vectorised": "hand-written", "vectorised-tiled": "hand-written",
                "fused": "hand-written", "morton": "hand-written", "tensorflow": "peer", "torch": "peer"}


def _migrate_v2(data: dict) -> dict:
    """Version 2 did not record a backend's family: the backends of that time are known by name."""
    for b in data.get("backends") or []:
        if isinstance(b, dict) and "family" not in b:
            b["family"] = _FAMILIES_V2.get(b.get("name"), "")
    data["schema_version"] = 3
    return data


MIGRATIONS = {1: _migrate_v1, 2: _migrate_v2}


def _depth(data) -> int:
    """How deep parsed JSON nests, measured without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (obj.values() if isinstance(obj, dict) else obj))
    return deepest


def _samples(data) -> int:
    """How many timings the parsed file keeps: the lengths of every 'values' array."""
    n, stack = 0, [data]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            values = obj.get("values")
            n += len(values) if isinstance(values, list) else 0
            stack.extend(v for k, v in obj.items() if k != "values")
        elif isinstance(obj, list):
            stack.extend(obj)
    return n


def _too_many(source: str, what: str, held: str) -> UserError:
    return UserError(f"{what} file {source} {held}, more than the {MAX_SAMPLES:,} timings `compare` reads in "
                     f"bounded memory; give a file of `compare run` at fewer --repeats")


def _json(text: str, source: str, what: str):
    """Parsed JSON, refused in one line when it is not JSON or nests deeper than any file of ours
    (the parser's recursion ends in a RecursionError first when it nests very deep)."""
    deep = (f"{what} file {source} nests more than {MAX_DEPTH} levels deep, as no {what} file does; "
            f"give a file that `compare` wrote")
    # every value takes a separator or a bracket: counted before parsing, so a file of millions of tiny
    # values (each a Python object of 30 bytes or more once parsed) is refused before it is held
    if len(text) > MAX_SAMPLES and text.count(",") > 2 * MAX_SAMPLES:
        raise _too_many(source, what, f"holds over {2 * MAX_SAMPLES:,} values")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{what} file {source} is not valid JSON ({exc}); was it cut short?") from None
    except RecursionError:
        raise UserError(deep) from None
    except ValueError as exc:   # an integer of thousands of digits
        raise UserError(f"{what} file {source} is not a {what} file ({str(exc)[:120]})") from None
    if _depth(data) > MAX_DEPTH:
        raise UserError(deep)
    n = _samples(data)
    if n > MAX_SAMPLES:
        raise _too_many(source, what, f"keeps {n:,} timings")
    return data


def parse_versioned(text: str, source: str, what: str, schema: str, version: int, cls,
                    migrations: dict | None = None, remake: str = "compare run"):
    """A versioned JSON file of ours (`what`: 'results', 'sweep') as `cls`:
    its schema and version checked, older versions migrated, every field
    decoded; UserError naming the problem otherwise."""
    migrations = migrations or {}
    data = _json(text, source, what)
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise UserError(f"{source} is not a clblast-compare {what} file (no '\"schema\": \"{schema}\"')")
    found = data.get("schema_version")
    if not (isinstance(found, int) and not isinstance(found, bool)):   # a list is no key, NaN no version
        raise UserError(f"{source} has {what} schema version {_show(found)}, not a whole number: it is not a "
                        f"{what} file of `{remake}`")
    while found in migrations and found != version:   # each step migrates one version up
        data = migrations[found](data)
        found = data.get("schema_version")
    if found != version:
        newer = _is_number(found) and found > version
        known = f"versions {min(migrations)} to {version}" if migrations else f"version {version}"
        raise UserError(f"{source} has {what} schema version {found}; this compare reads {known}: "
                        + ("update clblast-compare to read it" if newer else f"re-run `{remake}` to make a current file"))
    try:
        return decode(cls, data)
    except Malformed as exc:
        raise UserError(f"{what} file {source} is malformed: {exc}") from None


def parse_results(text: str, source: str) -> RunResult:
    """A results file's text as a RunResult; UserError naming the problem, or saying where it holds nothing
    to answer (no backend, or one backend twice: which of the two ran is not known)."""
    res = parse_versioned(text, source, "results", SCHEMA, VERSION, RunResult, MIGRATIONS)
    if not res.backends:
        raise UserError(f"results file {source} holds no backend: nothing to report or answer; give a file that "
                        f"`compare run` wrote")
    seen: dict[tuple, int] = {}
    for i, b in enumerate(res.backends):
        j = seen.setdefault((b.name, b.mode), i)
        if j != i:
            raise UserError(f"results file {source} holds backend {b.name!r} twice (backends[{j}] and [{i}]): which "
                            f"one ran is not known, so nothing is answered; give a file that `compare run` wrote")
    return res




def read_json_file(path: str | os.PathLike, what: str) -> str:
    """The text of a results or sweep file (`what`), once it is known to be a regular file of a plausible
    size: a pipe, a device or a huge file is refused in one line, never read."""
    return read_text(path, f"{what} file", MAX_FILE_BYTES,
                     fix=f"give a {what} file that `compare {'sweep' if what == 'sweep' else 'run'}` wrote")


def load_results(path: str | os.PathLike) -> RunResult:
    return parse_results(read_json_file(path, "results"), str(path))
