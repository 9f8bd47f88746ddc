"""CLBlast tuned as CLBlast means it: for every problem a net poses, its
own tuners' default search (space.py: the same stages and configuration
spaces, and as many configurations per stage as CLBlast tries by
default), each configuration timed through the real routine in a child
process (search_child.py) with the parameters put in force by
OverrideParameters and its output checked; then the best few of each
kernel, and CLBlast's database parameters, re-timed alone through the
routine (the verification), so a tuned choice is never slower than the
database; and the fastest set of each kernel checked once more with its
overrides in force before any call, as a backend's child runs it
(`check_fresh`: in the verification's child the database ran first, and
on PoCL sets were seen right there and wrong where they ran first).

Resumable: every configuration's result is kept (record.py) as it comes,
by its place in the stage's fixed search order, so a run stopped by its
budget, an interrupt or a crash continues with the next configuration.
Problems are searched costliest first: by what each costs one pass with
CLBlast's database (one call's time, `measure_costs`, times the calls a
pass makes), since FLOPs mislead (a depthwise conv is little in FLOPs but
hundreds of xCONVGEMM calls).  The problems of each layer's cheapest
composition go first, as they are what CLBlast at its best pays (a
depthwise conv's per-channel xCONVGEMMs cost the `clblast-convgemm` pass
far more than its batched GEMM costs `clblast-best`'s), by cost per
configuration of their search (an xCONVGEMM's 193 against a GEMM's 1,526),
so that most of that pass is complete soonest; then the others; those not
timed go last, by their FLOPs.
Compiling dominates (seconds a configuration, against milliseconds to
check and time it), so a child times each configuration on every problem
of its stage that lacks it: the routine's program, built once, serves
them all, where one child per problem built it once per problem.  Several
children side by side (`jobs`: compiling is host work); a child's times
are then noisier, which the verification, run alone, corrects.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .overrides import ALWAYS_DIRECT, ALWAYS_INDIRECT
from .problems import GEMV, XGEMM_ALONE, Problem, cheapest_costs, covering
from .record import Candidate, NetChoice, ProblemRecord, StageRecord, Store, Tried, Verified
from .search_child import LOST
from .space import STAGES, DeviceLimits
from . import watch

CHUNK = 64              # configurations per child at most: a fresh process bounds what CLBlast caches
QUIET_S = 180.0         # a child silent this long (one configuration) is stopped: a hung build or kernel
#                         (sooner where it is also idle: watch.IDLE_S)
VERIFY_SHARE = 0.2      # of the budget, kept for the verification
COSTS_SHARE = 0.1       # of the search's budget at most, to time each problem with CLBlast's database ...
COSTS_CAP_S = 60.0      # ... and at most this long
VERIFY_CAP_S = 6.0      # timed rounds per problem at most this long ...
VERIFY_ROUNDS = 15      # ... and at most this many
TOP = 3                 # best configurations of each kernel re-timed
ROUTE = {"Xgemm": ALWAYS_INDIRECT, "XgemmDirect": ALWAYS_DIRECT}


def order_fingerprint(order: list[dict]) -> str:
    return hashlib.sha1(json.dumps(order, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class _Plan:
    """One stage of one problem: its search order and its record."""

    problem: Problem
    stage: object
    order: list[dict]
    record: StageRecord


@dataclass
class _Child:
    """One child's work: configurations of one stage, each on the problems of `plans` that lack it (the
    first plan leads: it needs them all)."""

    plans: list[_Plan]
    want: list[tuple[int, list[int]]]   # (configuration index, positions in `plans` to time it on)
    proc: subprocess.Popen
    last: float = field(default_factory=time.monotonic)
    answered: set = field(default_factory=set)   # (index, position)
    ready: bool = False      # it built the problem: a death after this is a configuration's doing
    stopped: bool = False    # stopped by us at the budget's end
    why: str | None = None   # why we killed it before the budget's end

    def __post_init__(self):
        self.watch = watch.Watch(self.proc.pid, self.last) if self.proc is not None else None
        self.held: dict[int, set[int]] = {}   # id of a plan -> the indices this child has of it
        for i, where in self.want:
            for n in where:
                self.held.setdefault(id(self.plans[n]), set()).add(i)


class Search:
    def __init__(self, device_index: str, store: Store, limits: DeviceLimits, problems: dict[Problem, list[str]],
                 jobs: int = 1, progress=lambda s: None, calls: dict[Problem, int] | None = None,
                 layers: list[list[dict[Problem, int]]] | None = None):
        """`problems`: each with the 'net:layer' names posing it; `calls`: how many calls of it a pass
        makes (1 where not given), which weighs its time in the order of the search; `layers`: the nets'
        layers as problems.net_compositions gives them, so that the problems of CLBlast's cheapest
        composition of each layer go first (without: each problem a layer of its own)."""
        self.device_index, self.store, self.jobs, self.progress = device_index, store, max(1, jobs), progress
        self.calls = {p: (calls or {}).get(p, 1) for p in problems}
        self.layers = covering(layers or [], self.calls)
        self.records: dict[Problem, ProblemRecord] = {}
        self.plans: list[_Plan] = []
        for problem in problems:
            rec = store.load(problem) or ProblemRecord(problem)
            rec.layers = sorted(set(rec.layers) | set(problems[problem]))
            stages = [s for tuner in problem.tuners for s in STAGES[tuner]]
            for stage in sorted(stages, key=lambda s: _stage_rank(s)):
                order = stage.search_order(limits)[:stage.default_count(limits)]
                fp = order_fingerprint(order)
                old = rec.stages.get(stage.name)
                if old is None or old.order != fp:   # a changed search order: its indices mean other configurations
                    rec.stages[stage.name] = StageRecord(stage.name, stage.kernel, fp, len(order))
                self.plans.append(_Plan(problem, stage, order, rec.stages[stage.name]))
            self.records[problem] = rec
        self._order()
        self.children: list[_Child] = []
        self.lines: queue.Queue = queue.Queue()
        self.dirty: set[Problem] = set()
        self.tried_now = 0
        self.checked: list[tuple[str, str, str | None]] = []   # check_fresh's: problem, set, what was wrong

    # -- the order: costliest first
    def cost(self, problem: Problem) -> float | None:
        """What the problem costs one pass with CLBlast's database (ms), or None where not timed."""
        ms = self.records[problem].database_time()
        return None if ms is None else ms * self.calls[problem]

    def cheapest_cost(self, problem: Problem) -> float | None:
        """What the problem costs a pass of CLBlast at its best with its database (problems.cheapest_costs):
        0 where another composition of its layers costs less; None where not known."""
        return self._cheapest.get(problem)

    def _order(self) -> None:
        """Records and plans by cost: first the problems of CLBlast's cheapest composition of each layer (what
        CLBlast at its best pays), the costliest per configuration of their default search first; then the
        other timed problems by their cost; then the problems not timed, by FLOPs.  A problem's stages keep
        their order (the sort is stable)."""
        self._cheapest = cheapest_costs(
            self.layers, lambda p: self.records[p].database_time() if p in self.records else None)

        def rank(p: Problem) -> tuple:
            cheapest, cost = self._cheapest.get(p), self.cost(p)
            if cheapest:   # per configuration of its default search: the most of the pass made complete soonest
                return (0, -cheapest / max(self.records[p].depth()[1], 1))
            return (1, -cost) if cost is not None else (2, -p.flops)
        order = sorted(self.records, key=rank)
        place = {p: n for n, p in enumerate(order)}
        self.records = {p: self.records[p] for p in order}
        self.plans.sort(key=lambda plan: place[plan.problem])

    def measure_costs(self, seconds: float) -> None:
        """Time CLBlast's database on the problems with no known time (one child, alone, within `seconds`),
        keep each in its record, and order the search by cost.  A failure only leaves problems untimed."""
        todo = [p for p, rec in self.records.items() if rec.database_time() is None]
        if len(self.records) > 1 and todo and seconds > 0:   # one problem needs no order
            self.progress(f"costs: CLBlast's database timed on {len(todo)} problems, to search the costliest first")
            req = {"task": "cross", "device": self.device_index, "problems": [p.to_json() for p in todo],
                   "candidates": [], "rounds": CROSS_ROUNDS, "cap_s": max(0.05, min(1.0, seconds / (4 * len(todo))))}
            try:
                answers, finished = _answers(req, seconds)
                why = "the child failed on them" if finished else f"out of the {seconds:.3g} s"
            except OSError as exc:
                answers, why = [], f"the child did not start: {exc}"
            keyed = {p.key: p for p in todo}
            for got in answers:
                p = keyed.get(str(got.get("problem")))
                if p is not None and got.get("label") == "database" and got.get("ms") is not None:
                    self.records[p].database_ms = round(float(got["ms"]), 5)
                    self.store.save(self.records[p])
            left = sum(1 for p in todo if self.records[p].database_ms is None)
            if left:
                self.progress(f"costs: {left} of {len(todo)} problems not timed ({why}); they go last, by FLOPs")
        self._order()

    # -- the search
    def _busy(self, plan: _Plan) -> set[int]:
        return set().union(*(c.held.get(id(plan), ()) for c in self.children))

    def _next_chunk(self) -> tuple[list[_Plan], list[tuple[int, list[int]]]] | None:
        """The next configurations of the first plan with some left, and the other problems of its stage
        that lack them too: one compile of the routine's program serves every problem."""
        for plan in self.plans:
            indices = plan.record.next_indices(CHUNK, skip=self._busy(plan))
            if not indices:
                continue
            mates = [p for p in self.plans if p is not plan and p.stage.name == plan.stage.name
                     and p.record.order == plan.record.order]
            busy = {id(p): self._busy(p) for p in mates}
            lacking = {id(p): [i for i in indices if i not in p.record.tried and i not in busy[id(p)]]
                       for p in mates}
            group = [plan] + [p for p in mates if lacking[id(p)]]
            want = [(i, [0] + [n for n, p in enumerate(group[1:], 1) if i in lacking[id(p)]]) for i in indices]
            return group, want
        return None

    def _start(self, plans: list[_Plan], want: list[tuple[int, list[int]]]) -> None:
        lead = plans[0]
        kernel = lead.stage.kernel
        req = {"task": "search", "device": self.device_index, "problems": [p.problem.to_json() for p in plans],
               "kernel": kernel, "route": ROUTE.get(kernel),
               "configs": [[i, lead.order[i], where] for i, where in want], "repeats": 3}
        proc = _spawn(req)
        child = _Child(plans, want, proc)
        threading.Thread(target=_read, args=(proc, child, self.lines), daemon=True).start()
        self.children.append(child)

    def _record(self, child: _Child, line: str) -> None:
        try:
            got = json.loads(line)
            if got.get("ready"):
                child.ready = True
                return
            index, at = int(got["index"]), int(got["problem"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return   # a library's stray output on stdout
        if (index, at) in child.answered or not 0 <= at < len(child.plans) \
                or index not in child.held.get(id(child.plans[at]), ()):
            return
        child.answered.add((index, at))
        child.last = time.monotonic()
        plan = child.plans[at]
        plan.record.add(Tried(index, got.get("ms"), got.get("error")), plan.order[index])
        self.dirty.add(plan.problem)
        self.tried_now += 1

    def _finished(self, child: _Child) -> None:
        """A child that ended (or was stopped) without answering for a configuration in the middle of its
        list: that one failed it (a crash), the ones after it are simply tried again later."""
        self.children.remove(child)
        code = child.proc.wait()
        if not child.ready and not child.stopped:
            raise SearchFailed(f"the search's child process failed before its first configuration "
                               f"(exit {code}): {_last_words(child.proc)}")
        missing = [(i, at) for i, where in child.want for at in where if (i, at) not in child.answered]
        if code not in (0, LOST) and missing and not child.stopped:
            why = child.why or f"the child process died on it (exit {code})"
            index, at = missing[0]
            plan = child.plans[at]
            plan.record.add(Tried(index, None, why), plan.order[index])
            self.dirty.add(plan.problem)
            self.tried_now += 1   # a configuration that crashes its child is tried: it counts in the depth

    def _stop_if_hung(self, child: _Child) -> None:
        if child.why is not None:
            return
        now = time.monotonic()
        if now - child.last > QUIET_S:
            child.why = f"no answer in {QUIET_S:.0f} s (stopped)"
        elif child.watch.hung(now, child.last):
            child.why = f"hung: silent and no processor time for {watch.IDLE_S:.0f} s (stopped)"
        if child.why is not None:
            child.proc.kill()

    def _save(self) -> None:
        for problem in self.dirty:
            self.store.save(self.records[problem])
        self.dirty.clear()

    def search(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        saved = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                while now < end and len(self.children) < self.jobs:
                    nxt = self._next_chunk()
                    if nxt is None:
                        break
                    self._start(*nxt)
                if not self.children:
                    break
                if now >= end:
                    break
                try:
                    child, line = self.lines.get(timeout=min(1.0, max(end - now, 0.01)))
                except queue.Empty:
                    child = line = None
                if line is None and child is not None:
                    if child in self.children:
                        self._finished(child)
                elif child is not None:
                    self._record(child, line)
                for c in list(self.children):
                    self._stop_if_hung(c)
                if time.monotonic() - saved > 5:
                    self._save()
                    saved = time.monotonic()
                self.progress(self._status(end))
        finally:
            for c in list(self.children):
                c.stopped = True
                _stop(c.proc)
            # what the children said before they were stopped is kept
            while True:
                try:
                    child, line = self.lines.get_nowait()
                except queue.Empty:
                    break
                if line is not None:
                    self._record(child, line)
            self.children.clear()
            self._save()

    def _status(self, end: float) -> str:
        done = sum(p.record.done() for p in self.plans)
        total = sum(p.record.default_count for p in self.plans)
        working = ", ".join(sorted({f"{c.plans[0].problem.key} {c.plans[0].stage.name}" +
                                    (f" (+{len(c.plans) - 1})" if len(c.plans) > 1 else "")
                                    for c in self.children}))[:90]
        return (f"search {done}/{total} configurations ({100 * done / max(total, 1):.0f}%), "
                f"{max(end - time.monotonic(), 0):.0f} s left: {working}")

    # -- the verification
    def candidates(self, rec: ProblemRecord) -> list[tuple[str, list]]:
        """CLBlast's database first, then the best few of each kernel searched."""
        out: list[tuple[str, list]] = [("database", [])]
        by_kernel: dict[str, list[dict]] = {}
        for stage in rec.stages.values():
            for b in stage.best:
                by_kernel.setdefault(stage.kernel, []).append({**b, "stage": stage.stage})
        for kernel in by_kernel:
            by_kernel[kernel].sort(key=lambda b: b["ms"])
        if rec.problem.routine == GEMV:
            # the routine picks one of three kernels by layout and size: each candidate sets all three
            kernels = ("Xgemv", "XgemvFast", "XgemvFastRot")
            if all(by_kernel.get(k) for k in kernels):
                for i in range(TOP):
                    sets = [(k, by_kernel[k][min(i, len(by_kernel[k]) - 1)]["parameters"]) for k in kernels]
                    out.append((f"tuned #{i + 1} of each GEMV kernel", sets))
            return _distinct(out)
        for kernel, best in sorted(by_kernel.items()):
            route = [("GemmRoutine", ROUTE[kernel])] if kernel in ROUTE else []
            for b in best[:TOP]:
                out.append((f"{b['stage']} #{b['index']} ({b['ms']:.4f} ms searching)",
                            [(kernel, b["parameters"])] + route))
        return _distinct(out)

    def verify(self, seconds: float) -> list[Problem]:
        """Re-time the candidates of each problem whose search moved since it was last verified, costliest
        first, alone, until `seconds` are spent; the problems verified."""
        end = time.monotonic() + seconds
        done = []
        for problem, rec in self.records.items():
            how = verify_how(problem)
            if not rec.needs_verifying(how):
                continue
            if time.monotonic() + VERIFY_CAP_S > end:
                break
            self.progress(f"verify {problem.key}: CLBlast's database and the best found, through the routine")
            cands = self.candidates(rec)
            req = {"task": "verify", "device": self.device_index, "problem": problem.to_json(),
                   "candidates": cands, "rounds": VERIFY_ROUNDS, "cap_s": VERIFY_CAP_S}
            timed = _verify_child(req, timeout=end - time.monotonic())   # past the budget: verified next time
            if timed is None:
                continue
            rec.verified = Verified(
                when=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                depth={name: s.done() for name, s in rec.stages.items()},
                how=how,
                candidates=[Candidate(label, sets, *timed.get(label, (None, "no answer"))) for label, sets in cands])
            self.store.save(rec)
            done.append(problem)
        return done

    def check_fresh(self, seconds: float) -> list[Problem]:
        """Each verified problem's fastest tuned set of each kernel checked once more, in a child where it
        is in force before any call, as a backend runs it (the verification's child ran CLBlast's database
        first); a set wrong there loses its time and the next of its kernel is checked.  One child per set,
        on every problem it is to be checked on.  Files verified before this check existed get it here.
        The problems whose sets were checked, until `seconds`."""
        end, done = time.monotonic() + seconds, []
        while True:
            todo: dict[str, tuple[list, list[tuple[Problem, Candidate]]]] = {}
            for problem, rec in self.records.items():
                for c in rec.verified.fastest_per_kernel() if rec.verified is not None else ():
                    if not c.fresh:
                        todo.setdefault(json.dumps(c.sets, sort_keys=True), (c.sets, []))[1].append((problem, c))
            if not todo:
                return done
            for sets, pairs in todo.values():
                self.progress(f"check {pairs[0][1].label}: on {len(pairs)} problem(s), in force from the start")
                got = _fresh_child(self.device_index, sets, [p for p, _ in pairs], end - time.monotonic())
                if got is None:   # out of time: checked next time
                    return done
                died = [p for p, _ in pairs if got[p.key] == DIED]
                for problem, c in pairs:
                    if got[problem.key] != DIED or problem == died[0]:   # the others: in a child of their own next
                        mark_fresh(c, got[problem.key])
                        self.checked.append((problem.key, c.label, got[problem.key]))
                        self.store.save(self.records[problem])
                        if problem not in done:
                            done.append(problem)


def mark_fresh(c: Candidate, wrong: str | None) -> None:
    """`c` as its check with its sets in force from the start came out: right, or no longer a choice."""
    if wrong:
        c.ms, c.error = None, f"wrong with its sets in force before any call: {wrong}"
    else:
        c.fresh = True


def verify_how(problem: Problem) -> str:
    """What the verification of `problem` times and how (a verification made otherwise is made again)."""
    if problem.routine == XGEMM_ALONE:   # held against the tuner's figures: its own clock
        return (f"the Xgemm kernel's own event, start to end, least of up to {VERIFY_ROUNDS} calls "
                f"(CLBlast's tuner's clock; rounds over the candidates, the database's first)")
    return (f"wall clock around the routine + finish, median of up to {VERIFY_ROUNDS} calls "
            f"(rounds over the candidates; the database's first, before any override)")


class SearchFailed(RuntimeError):
    """The children cannot run at all here (not one configuration's fault)."""


def _last_words(proc) -> str:
    try:
        proc.stderr_file.seek(0)
        lines = proc.stderr_file.read().decode(errors="replace").strip().splitlines()
    except (OSError, AttributeError):
        return "(no output)"
    return lines[-1][:300] if lines else "(no output)"


FAMILIES = {"gemm": ("XgemmDirect", "Xgemm"), "gemv": ("Xgemv",), "convgemm": ("Xconvgemm",)}
CROSS_ROUNDS = 5


def verify_net(search: "Search", net: str, weights: dict, seconds: float) -> NetChoice | None:
    """One set per kernel family for the whole net `net` ('vgg16 batch 1'): every problem's verified
    tuned sets timed on every problem of the family, alone; `weights`: problem -> its calls per pass.
    A routine with a problem not verified yet keeps the database (an override cannot be undone for that
    one call); None when no routine has all its problems verified, or the time ran out."""
    end = time.monotonic() + seconds
    store = search.store
    recs = {p: search.records.get(p) or store.load(p) for p in weights}
    verified = {p: r for p, r in recs.items() if r is not None and r.verified is not None}
    waiting = {p.routine for p in weights if p not in verified}
    if waiting >= {p.routine for p in weights}:
        return None
    old = store.load_net(net)
    keys = sorted(p.key for p in weights)
    if (old and old.problems == keys and all(r.verified.when <= old.when for r in verified.values())
            and all(old.families[f].get("fresh") for f in old.families if old.sets(f))):
        return old   # nothing verified since it was chosen, and every set in force checked from the start
    choice = NetChoice(net, keys, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    for routine, families in FAMILIES.items():
        problems = [p for p in weights if p.routine == routine]
        if problems and routine not in waiting and _still(old, keys, families, [verified[p] for p in problems]):
            kept = {f: old.families[f] for f in families if f in old.families}
            unchecked = [f for f in kept if old.sets(f) and not kept[f].get("fresh")]
            checked = [_right_fresh(search, net, kept[f]["label"], old.sets(f), problems, end) for f in unchecked]
            if None in checked:
                return None   # out of time
            if all(checked):
                for f in unchecked:
                    kept[f]["fresh"] = True
                choice.families.update(kept)
                continue   # none of its problems verified anew: its sets stand, and their timing is not redone
        for family in families if problems and routine not in waiting else ():
            cands = _distinct([(f"{c.label}, of {p.key}", c.sets) for p in problems
                               for c in recs[p].verified.candidates if any(k == family for k, _ in c.sets)])
            if not cands:
                continue
            search.progress(f"verify {net}: {len(cands)} {family} sets on its {len(problems)} problems")
            req = {"task": "cross", "device": search.device_index, "problems": [p.to_json() for p in problems],
                   "candidates": cands, "rounds": CROSS_ROUNDS, "cap_s": 1.0}
            left = end - time.monotonic()
            got = _cross_child(req, left)
            if got is None:
                search.progress(f"verify {net}: timing {len(cands)} {family} sets on {len(problems)} problems "
                                f"did not finish in the {max(left, 0):.0f} s left; nothing chosen (a larger --budget-s)")
                return None
            sums = {}
            for label, _ in [("database", [])] + cands:
                each = [got.get((label, p.key)) for p in problems]
                if all(ms is not None for ms in each):
                    sums[label] = sum(weights[p] * ms for p, ms in zip(problems, each))
            tuned = {label: ms for label, ms in sums.items() if label != "database"}
            best, right = None, False
            for label in sorted(tuned, key=tuned.get):   # the fastest right with its sets in force from the start
                if sums.get("database") is not None and tuned[label] >= sums["database"]:
                    best = label   # the database's is kept: this set is never in force, so not checked
                    break
                right = _right_fresh(search, net, label, dict(cands)[label], problems, end)
                if right is None:
                    return None
                if right:
                    best = label
                    break
            if best is None:
                continue
            choice.families[family] = {"label": best, "sets": [[k, v] for k, v in dict(cands)[best]],
                                       "ms": round(tuned[best], 5), "database_ms": sums.get("database"),
                                       "fresh": right}
    store.save_net(choice)
    return choice


def _right_fresh(search: "Search", net: str, label: str, sets, problems: list[Problem], end: float) -> bool | None:
    """Whether `sets` are right on every problem in force before any call (Search.check_fresh); None when
    the time ran out."""
    got = _fresh_child(search.device_index, sets, problems, end - time.monotonic())
    if got is None:
        search.progress(f"verify {net}: the time ran out checking a set on its problems; nothing chosen")
        return None
    search.checked += [(key, f"{net}'s {label}", why) for key, why in got.items()]
    wrong = [(key, why) for key, why in got.items() if why]
    if wrong:
        search.progress(f"verify {net}: a set is wrong on {wrong[0][0]} in force from the start ({wrong[0][1]}); "
                        f"the next")
    return not wrong


def _still(old: NetChoice | None, keys: list[str], families, records: list[ProblemRecord]) -> bool:
    """Whether `old` chose sets for `families` over the same problems, none of `records` verified since."""
    return (old is not None and old.problems == keys and any(f in old.families for f in families)
            and all(r.verified.when <= old.when for r in records))


def _cross_child(req: dict, timeout: float) -> dict | None:
    """(label, problem key) -> median ms for those that ran, or None when the child failed or ran out of time."""
    answers, finished = _answers(req, timeout)
    got = {(d["label"], d["problem"]): float(d["ms"]) for d in answers
           if "label" in d and "problem" in d and d.get("ms") is not None}
    return got if finished else None


def _stage_rank(stage) -> tuple:
    """Each tuner's first (exhaustive, small) stages before the large sampled ones, direct before indirect."""
    order = {"xgemm_direct": 0, "xconvgemm": 0, "xgemv": 0, "xgemm": 1}
    return (stage.variation % 10 != 1 and stage.tuner != "xgemv", order.get(stage.tuner, 2), stage.variation)


def _distinct(cands):
    seen, out = set(), []
    for label, sets in cands:
        key = json.dumps(sets, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append((label, sets))
    return out


def _spawn(req: dict) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # side by side, children must not each start a thread per core for numpy's BLAS
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "backends.clblast.search_child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                            start_new_session=True)   # Ctrl-C is the parent's: it stops its children itself
    proc.stderr_file = err
    proc.stdin.write(json.dumps(req))
    proc.stdin.close()
    return proc


def _read(proc, child, lines: queue.Queue) -> None:
    for line in proc.stdout:
        lines.put((child, line))
    lines.put((child, None))


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


DIED = "its process died before answering"


def _fresh_child(device_index: str, sets, problems: list[Problem], timeout: float) -> dict[str, str | None] | None:
    """Problem key -> what was wrong (None: right) with `sets` in force from the start; a problem its child
    died before answering is wrong; None when the time ran out first."""
    req = {"task": "fresh", "device": device_index, "sets": sets, "problems": [p.to_json() for p in problems]}
    answers, finished = _answers(req, max(timeout, 0.0))
    got = {d["problem"]: d.get("error") for d in answers if "problem" in d}
    if len(got) < len(problems) and not finished:
        return None
    return {p.key: got.get(p.key, DIED) for p in problems}


def _verify_child(req: dict, timeout: float) -> dict | None:
    """label -> (ms, error), or None when the child failed as a whole."""
    answers, _ = _answers(req, timeout)
    timed = {d["label"]: (d.get("ms"), d.get("error")) for d in answers if "label" in d}
    return timed or None


def _answers(req: dict, timeout: float) -> tuple[list[dict], bool]:
    """The JSON lines a child answers `req` with, and whether it ended within `timeout`: it exited, or it
    hung (silent and idle for watch.IDLE_S: stopped, the answers it owed missing)."""
    proc = _spawn(req)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read, args=(proc, None, lines), daemon=True).start()
    end, answers = time.monotonic() + timeout, []
    seen, last = watch.Watch(proc.pid, time.monotonic()), time.monotonic()
    try:
        while time.monotonic() < end:
            try:
                _, line = lines.get(timeout=min(1.0, max(end - time.monotonic(), 0.01)))
            except queue.Empty:
                if seen.hung(time.monotonic(), last):
                    return answers, True
                continue
            last = time.monotonic()
            if line is None:
                return answers, True
            try:
                got = json.loads(line)
            except ValueError:
                continue   # a library's stray output on stdout
            if isinstance(got, dict):
                answers.append(got)
        return answers, False
    finally:
        _stop(proc)
