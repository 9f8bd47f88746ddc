"""`compare sweep`: one net at several batches, a results file per batch and
a sweep file tying them together, so the report can show where CLBlast
catches up with the hand-written kernels as the batch grows.

The sweep file is small, versioned JSON (SCHEMA, VERSION): the net, the
device, and per batch the results file's name, relative to the sweep file's
folder so the folder can be moved.  Each results file is written atomically
as its batch finishes; the sweep file only once every batch has, so an
interrupted sweep leaves the finished batches' files and no sweep file.
When the folder stops taking files, the whole set moves to another folder
(compare/keep.py), so the sweep file always lies beside its results files.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from backends.atomic import write_text_atomic
from nets.errors import UserError

from . import __version__
from .keep import Keeper
from .progress import Prefixed, Silent
from .results import Malformed, RunResult, Tool, load_results, parse_versioned, read_json_file, to_json
from .runner import Plan, execute, exit_code as run_exit_code

SCHEMA = "clblast-compare/sweep"
VERSION = 1
SWEEP_FILE = "sweep.json"
# a batch too large for the device's buffers is an answer of the sweep, not a failure of it
DEFAULT_MAX_BATCH = {"lenet": 64, "vgg16": 16}
FALLBACK_BATCHES = [1, 2, 4, 8]


@dataclass
class SweepRun:
    batch: int
    results: str          # the results file, relative to the sweep file's folder


@dataclass
class Sweep:
    net: str
    device: str
    created: str
    command: str
    batches: list[SweepRun]
    tool: Tool | None = None
    schema: str = SCHEMA
    schema_version: int = VERSION

    def validate(self, where: str) -> None:
        if not self.batches:
            raise Malformed("batches", "lists no batch")
        seen = set()
        for i, run in enumerate(self.batches):
            if run.batch < 1:
                raise Malformed(f"batches[{i}].batch", f"must be a positive whole number, not {run.batch}")
            if Path(run.results).name != run.results or run.results in ("", ".", ".."):
                raise Malformed(f"batches[{i}].results", f"{run.results!r} is not a file name in the sweep's folder "
                                                         f"(a sweep names its results files beside it)")
            if run.batch in seen:
                raise Malformed(f"batches[{i}].batch", f"batch {run.batch} is listed twice")
            seen.add(run.batch)


@dataclass
class LoadedSweep:
    """A sweep file with its results files read: what the report renders."""

    path: str
    sweep: Sweep
    results: list[RunResult] = field(default_factory=list)   # in the sweep's order of batches
    paths: list[str] = field(default_factory=list)


# -- batches -------------------------------------------------------------------

def parse_batches(text: str) -> list[int]:
    """'1,2,4' as [1, 2, 4]: each a positive integer, in ascending order, each once."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = int(part)
        except ValueError:
            raise UserError(f"--batch takes positive integers separated by commas (e.g. 1,2,4,8), "
                            f"not {text!r}") from None
        if value < 1:
            raise UserError(f"--batch must be a positive integer, not {value}")
        out.append(value)
    return sorted(set(out))


def default_batches(net_name: str) -> list[int]:
    """Powers of two up to the net's largest sweep batch (1, 2, 4, 8 for other nets)."""
    top = DEFAULT_MAX_BATCH.get(net_name)
    if top is None:
        return list(FALLBACK_BATCHES)
    return [2 ** k for k in range(top.bit_length()) if 2 ** k <= top]


def results_name(net_name: str, batch: int) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', net_name)}-batch{batch}.json"


def does_not_fit(b) -> bool:
    """A backend refused at prepare because a buffer exceeds the device's
    MAX_MEM_ALLOC_SIZE (backends/opencl/runtime.py check_alloc)."""
    return b.status == "FAILED" and b.error_kind == "user" and "MAX_MEM_ALLOC_SIZE" in (b.reason or "")


def exit_code(results: Iterable[RunResult]) -> int:
    """The worst of the batches' exit codes (compare/runner.py), where a batch
    that does not fit counts as an answer, not an error."""
    return max((run_exit_code(dataclasses.replace(r, backends=[b for b in r.backends if not does_not_fit(b)]))
                for r in results), default=0)


# -- running -------------------------------------------------------------------

def run_sweep(plans: Iterable[Plan], keeper: Keeper, command: str, progress=None,
              on_batch: Callable[[RunResult, Path | None], None] = lambda res, path: None) -> Path | None:
    """Each plan (one per batch) executed, its results written into the
    keeper's folder as soon as it finishes; then the sweep file.  Returns the
    sweep file's path (None when no folder would take it: keeper.problem says why).
    A folder that fails on the way sends the whole set to another (compare/keep.py)."""
    runs, first = [], None
    for plan in plans:
        res, _ = execute(plan, Prefixed(progress or Silent(), f"batch {plan.batch}: "))
        name = results_name(plan.net.name, plan.batch)
        path = keeper.write_text(name, to_json(res))
        runs.append(SweepRun(plan.batch, name))
        first = first or res
        on_batch(res, path)
    sweep = Sweep(net=first.net.name, device=first.device.name,
                  created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  command=command, batches=runs, tool=Tool("clblast-compare", __version__))
    return keeper.write_text(SWEEP_FILE, sweep_json(sweep))


def sweep_json(sweep: Sweep) -> str:
    data = dataclasses.asdict(sweep)
    head = {"schema": data.pop("schema"), "schema_version": data.pop("schema_version")}   # first, for a reader
    return json.dumps({**head, **data}, indent=1) + "\n"


def write_sweep(path: str | os.PathLike, sweep: Sweep) -> None:
    write_text_atomic(path, sweep_json(sweep))


# -- reading -------------------------------------------------------------------

def is_sweep(path: str | os.PathLike) -> bool:
    """Does `path` name a sweep (a sweep file, or a folder holding one) rather
    than a results file?  Told by the file's schema; a file named sweep.json
    counts as one even when it cannot be read, so its errors speak of a sweep."""
    p = Path(path)
    if p.is_dir() or p.name == SWEEP_FILE:
        return True
    try:
        data = json.loads(read_json_file(p, "results"))
    except (UserError, ValueError, RecursionError):
        return False   # load_results says what is wrong with it (a pipe or a device is never read)
    return isinstance(data, dict) and data.get("schema") == SCHEMA


def parse_sweep(text: str, source: str) -> Sweep:
    return parse_versioned(text, source, "sweep", SCHEMA, VERSION, Sweep, remake="compare sweep")


def load_sweep(path: str | os.PathLike) -> LoadedSweep:
    """A sweep file (or the folder holding one) and every results file it
    names, each checked to hold the sweep's net at its batch.  A folder with
    no sweep file (a sweep stopped before its last batch) gives the batches
    whose results files it holds."""
    p = Path(path)
    if p.is_dir():
        if not (p / SWEEP_FILE).is_file():
            return _stopped_sweep(p)
        p = p / SWEEP_FILE
    sweep = parse_sweep(read_json_file(p, "sweep"), str(p))
    loaded = LoadedSweep(str(p), sweep)
    for run in sorted(sweep.batches, key=lambda r: r.batch):
        rp = p.parent / run.results
        if not rp.is_file():
            raise UserError(f"sweep file {p} names results file {run.results} (batch {run.batch}), "
                            f"which is not in {p.parent}")
        res = load_results(rp)
        if res.net.name != sweep.net or res.net.batch != run.batch:
            raise UserError(f"sweep file {p}: {run.results} holds {res.net.name} batch {res.net.batch}, "
                            f"not {sweep.net} batch {run.batch}")
        loaded.results.append(res)
        loaded.paths.append(str(rp))
    return loaded


def _stopped_sweep(folder: Path) -> LoadedSweep:
    """The results files a stopped sweep left in `folder` (its own names,
    results_name), as a sweep of the batches that finished."""
    found = []
    for rp in sorted(folder.glob("*-batch*.json")):
        res = load_results(rp)
        if rp.name == results_name(res.net.name, res.net.batch):
            found.append((res.net.batch, rp, res))
    if not found:
        raise UserError(f"{folder} holds neither a {SWEEP_FILE} nor a sweep's results files "
                        f"(`compare sweep --out {folder}` writes them)")
    nets = {res.net.name for _, _, res in found}
    if len(nets) > 1:
        raise UserError(f"{folder} has no {SWEEP_FILE} and holds results of several nets ({', '.join(sorted(nets))}); "
                        "give the results files one by one")
    found.sort(key=lambda f: f[0])
    first = found[0][2]
    sweep = Sweep(net=first.net.name, device=first.device.name, created=first.created,
                  command=f"{first.command} (stopped: no {SWEEP_FILE}; batches {', '.join(str(b) for b, _, _ in found)} finished)",
                  batches=[SweepRun(b, rp.name) for b, rp, _ in found], tool=first.tool)
    return LoadedSweep(str(folder), sweep, [res for _, _, res in found], [str(rp) for _, rp, _ in found])
