"""The child process of the search and the verification (search.py,
verify.py; started by children.py, here or on a farm's worker): a
fresh interpreter per piece of work, since CLBlast's parameter overrides
hold for the whole process and cannot be undone.  It reads one request
(JSON) on stdin and prints one JSON line per result, as each comes, so a
child stopped at the budget's end or killed by a bad configuration loses
only the configuration in hand.

  search:  {"task": "search", "device": "P:D", "problems": [...], "kernel": "Xgemm",
            "route": {...} | null, "configs": [[index, parameters, [positions in problems]], ...],
            "repeats": 3, "checked": [positions right with the database in an earlier child]}
           -> {"index": i, "problem": position, "ms": device span (min of repeats) | null,
               "error": null | why}; each configuration put in force once for all its problems
  build:   {"task": "build", "device": "P:D", "problem": ..., "candidates": [[label, sets], ...]}
           -> {"label": ..., "error": null | what was wrong}: each candidate compiled and checked, not
           timed (several side by side before the verification: the driver keeps what it compiled)
  verify:  {"task": "verify", "device": "P:D", "items": [{"problem": ..., "candidates": [[label, sets], ...]}, ...],
            "rounds": 15, "cap_s": 20}
           -> {"problem": key, "label": ..., "ms": median wall ms (the kernel alone: least event ms) | null,
               "error": ...}, every line of a problem once its candidates are timed
  cross:   {"task": "cross", "device": "P:D", "problems": [...], "candidates": [[label, sets], ...],
            "rounds": 5, "cap_s": 1}
           -> {"label": ..., "problem": key, "ms": median wall ms | null, "error": ...}, the database first
  fresh:   {"task": "fresh", "device": "P:D", "sets": [[kernel, parameters], ...], "problems": [...]}
           -> {"problem": key, "error": null | what was wrong}: the sets in force before any call, as a
           backend's child runs them (in the others CLBlast's database ran first)
  The verification times the first candidate of every problem (CLBlast's
  database: no overrides) before any override is made; then each problem's
  others in rounds, one call each per round, so drift hits them alike.  The Xgemm kernel alone
  (`--as-tuner`) is verified on its tuner's clock instead: the kernel's own
  event, the least of the rounds ("ms" is then that).
"""
from __future__ import annotations

import json
import signal
import sys
import time

import numpy as np


def _say(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (f"{type(exc).__name__}: {text[0] if text else ''}")[:200]


def _put(device, sets) -> None:
    from ...clblast import overrides
    for kernel, params in sets:
        overrides.ensure(device, kernel, params)


def search(req: dict, calls: list, device) -> None:
    route = [("GemmRoutine", req["route"])] if req.get("route") else []
    for index, params, where in req["configs"]:
        try:
            _put(device, [(req["kernel"], params)] + route)
        except Exception as exc:  # noqa: BLE001 - parameters CLBlast refuses are a result, not a crash
            for at in where:
                _say(index=index, problem=at, ms=None, error=_short(exc))
            continue
        for at in where:   # the first call compiles; the others find the program built
            call = calls[at]
            try:
                wrong = call.check()
                if wrong:
                    _say(index=index, problem=at, ms=None, error=wrong)
                    continue
                ms = min(call.span_ms() for _ in range(int(req.get("repeats", 3))))
                _say(index=index, problem=at, ms=round(ms, 5), error=None)
            except Exception as exc:  # noqa: BLE001 - a configuration the device refuses is a result, not a crash
                _say(index=index, problem=at, ms=None, error=_short(exc))
                if not _healthy(call):
                    sys.exit(LOST)   # a kernel that faulted can take the context with it: the rest in a fresh child


LOST = 3   # exit code: the context is unusable after a configuration's error


def _healthy(call) -> bool:
    """Whether the queue still works (on NVIDIA, after a kernel fault every later call fails)."""
    try:
        call.out.fill(np.float32(0))
        call.q.finish()
        return True
    except Exception:  # noqa: BLE001
        return False


def build(req: dict, call, device) -> None:
    """Each candidate compiled and checked in turn, the database's first; not timed."""
    for label, sets in req["candidates"]:
        try:
            _put(device, sets)
            _say(label=label, error=call.check())
        except Exception as exc:  # noqa: BLE001 - a set CLBlast cannot run is a result
            _say(label=label, error=_short(exc))
            if not _healthy(call):
                sys.exit(LOST)   # the rest unanswered: the verification tries them itself


def verify(req: dict, calls: list, device) -> None:
    """The items' databases timed first, before any override; then each item's tuned candidates in rounds."""
    from ...clblast.problems import XGEMM_ALONE
    rounds, cap = int(req["rounds"]), float(req["cap_s"])
    items = [(call, item["candidates"]) for call, item in zip(calls, req["items"])]
    times: list[dict[str, list[float]]] = [{label: [] for label, _ in cands} for _, cands in items]
    errors: list[dict[str, str]] = [{} for _ in items]
    ticks = [(c.kernel_ms, min) if c.problem.routine == XGEMM_ALONE else (c.wall_ms, np.median) for c, _ in items]
    for n, (call, cands) in enumerate(items):
        for label, sets in cands:
            if not sets:               # the database: timed now, as no override may come before it
                try:
                    wrong = call.check()
                    if wrong:
                        errors[n][label] = wrong
                    else:
                        times[n][label] = _rounds(call, rounds, cap / len(cands), ticks[n][0])
                except Exception as exc:  # noqa: BLE001
                    errors[n][label] = _short(exc)
    for n, (call, cands) in enumerate(items):
        tick, summary = ticks[n]
        for label, sets in cands:      # each compiled (the driver may have kept it) and checked once
            if sets:
                try:
                    _put(device, sets)
                    wrong = call.check()
                    if wrong:
                        errors[n][label] = wrong
                except Exception as exc:  # noqa: BLE001
                    errors[n][label] = _short(exc)
        tuned = [(label, sets) for label, sets in cands if sets and label not in errors[n]]
        deadline = time.monotonic() + cap * len(tuned) / max(len(cands), 1)
        for _ in range(rounds):
            for label, sets in tuned:
                _put(device, sets)
                tick()                 # a switch's first call may look its program up again: not timed
                times[n][label].append(tick())
            if time.monotonic() > deadline:
                break
        for label, _ in cands:
            got = times[n][label]
            _say(problem=call.problem.key, label=label,
                 ms=round(float(summary(got)), 5) if got and label not in errors[n] else None,
                 error=errors[n].get(label))


def cross(req: dict, rt) -> None:
    """Every candidate set on every problem of a net: the database's first, each median of `rounds` calls."""
    from ...clblast.call import Call
    from ...clblast.problems import Problem
    calls = [Call(rt, Problem.from_json(p)) for p in req["problems"]]
    _say(ready=True)
    rounds, cap = int(req["rounds"]), float(req["cap_s"])
    for label, sets in [("database", [])] + [tuple(c) for c in req["candidates"]]:
        try:
            _put(rt.device, sets)
        except Exception as exc:  # noqa: BLE001
            for call in calls:
                _say(label=label, problem=call.problem.key, ms=None, error=_short(exc))
            continue
        for call in calls:
            try:
                wrong = call.check()
                ms = None if wrong else float(np.median(_rounds(call, rounds, cap)))
                _say(label=label, problem=call.problem.key, ms=ms, error=wrong)
            except Exception as exc:  # noqa: BLE001
                _say(label=label, problem=call.problem.key, ms=None, error=_short(exc))
                if not _healthy(call):
                    sys.exit(LOST)


def fresh(req: dict, rt) -> None:
    """Each problem checked with `sets` in force before the routine's first call, as in a backend's
    child.  Seen on PoCL: an xgemm V=12 set right on MobileNet-v2's batched depthwise GEMM after
    CLBlast's database had run in the same process, and wrong (elements never written) where it ran
    first."""
    from ...clblast.call import Call
    from ...clblast.problems import Problem
    calls = [Call(rt, Problem.from_json(p)) for p in req["problems"]]   # buffers only: no CLBlast call yet
    _put(rt.device, req["sets"])
    for call in calls:
        try:
            wrong = call.check()
        except Exception as exc:  # noqa: BLE001 - a set CLBlast cannot run is a result
            wrong = _short(exc)
        _say(problem=call.problem.key, error=wrong)


def _rounds(call, rounds: int, cap_s: float, tick=None) -> list[float]:
    tick = tick or call.wall_ms
    tick()
    out, end = [], time.monotonic() + cap_s
    while len(out) < rounds and (not out or time.monotonic() < end):
        out.append(tick())
    return out


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent stops its children itself
    req = json.loads(sys.stdin.read())
    from ...opencl.runtime import get_runtime
    from ...clblast.call import Call
    from ...clblast.problems import Problem
    rt = get_runtime(req["device"])
    if req["task"] == "cross":
        cross(req, rt)
        return 0
    if req["task"] == "fresh":
        fresh(req, rt)
        return 0
    if req["task"] == "search":
        calls = [Call(rt, Problem.from_json(p)) for p in req["problems"]]
        # each must work with CLBlast's own parameters, else no configuration is to blame; once a search is
        # enough (a new child after a broken queue would otherwise build the database's programs again)
        done = set(req.get("checked", ()))
        todo = [call for n, call in enumerate(calls) if n not in done]
        for call in todo:
            wrong = call.check()
            if wrong:
                raise RuntimeError(f"{call.problem.key} with CLBlast's database parameters: {wrong}")
        _say(ready=True, checked=len(todo))
        search(req, calls, rt.device)
        return 0
    if req["task"] == "build":
        build(req, Call(rt, Problem.from_json(req["problem"])), rt.device)
        return 0
    calls = [Call(rt, Problem.from_json(item["problem"])) for item in req["items"]]
    _say(ready=True)
    verify(req, calls, rt.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
