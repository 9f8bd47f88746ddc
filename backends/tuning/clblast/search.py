"""CLBlast tuned as CLBlast means it: for every problem a net poses, its
own tuners' default search (space.py: the same stages and configuration
spaces, and as many configurations per stage as CLBlast tries by
default), each configuration timed through the real routine in a child
process (child.py) with the parameters put in force by
OverrideParameters and its output checked; then the best few of each
kernel, and CLBlast's database parameters, re-timed alone through the
routine (the verification), so a tuned choice is never slower than the
database; and the fastest set of each kernel checked once more with its
overrides in force before any call, as a backend's child runs it
(verify.py).

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

The children run where the pool says: here (children.LocalPool) or on a
farm's workers (farm.DaskPool), each result coming back to this process,
the store's only writer here.  Another search on the same folder (another
process) is told what this one is timing (claims.py) and times others;
each write of a record merges in what the other wrote (record.Store).
"""
from __future__ import annotations

import hashlib
import json
import queue
import time
from dataclasses import dataclass, field

from ...clblast.problems import Problem, cheapest_costs, covering
from ...clblast.record import ProblemRecord, StageRecord, Store, Tried

from ..budget import Budget
from .child import LOST
from .children import Ended, LocalPool
from .claims import Claims, plan_key
from .rate import Rate
from .space import STAGES, DeviceLimits
from .verify import CROSS_ROUNDS, ROUTE, Verifying

CHUNK = 64              # configurations per child at most: a fresh process bounds what CLBlast caches
SAVE_EVERY_S = 5.0      # the records and claims written at least this often
STOP_WAIT_S = 15.0      # at the end, how long the children stopped are waited for (their last lines kept)


def order_fingerprint(order: list[dict]) -> str:
    return hashlib.sha1(json.dumps(order, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class _Plan:
    """One stage of one problem: its search order and its record."""

    problem: Problem
    stage: object
    order: list[dict]
    record: StageRecord

    @property
    def key(self) -> tuple:
        return plan_key(self.problem.key, self.stage.name, self.record.order)


@dataclass
class _Child:
    """One child's work: configurations of one stage, each on the problems of `plans` that lack it (the
    first plan leads: it needs them all), at `place` (this machine, or a farm's worker)."""

    plans: list[_Plan]
    want: list[tuple[int, list[int]]]   # (configuration index, positions in `plans` to time it on)
    place: str = ""
    answered: set = field(default_factory=set)   # (index, position)
    ready: bool = False      # it built the problem: a death after this is a configuration's doing
    born: float = field(default_factory=time.monotonic)   # when it was started: its start's cost, once ready
    stopped: bool = False    # stopped by us at the budget's end
    failed: tuple[int, int] | None = None   # the last (index, position) it answered with an error

    def __post_init__(self):
        self.held: dict[int, set[int]] = {}   # id of a plan -> the indices this child has of it
        for i, where in self.want:
            for n in where:
                self.held.setdefault(id(self.plans[n]), set()).add(i)


class SearchFailed(RuntimeError):
    """The children cannot run at all here (not one configuration's fault)."""


class Search(Verifying):
    def __init__(self, pool, store: Store, limits: DeviceLimits, problems: dict[Problem, list[str]],
                 jobs: int = 1, progress=lambda s: None, calls: dict[Problem, int] | None = None,
                 layers: list[list[dict[Problem, int]]] | None = None, nets: dict[str, list[Problem]] | None = None):
        """`pool`: where the children run (children.LocalPool, farm.DaskPool), or the index of an OpenCL
        device of this machine ('P:D': `jobs` children side by side on it); `problems`: each with the
        'net:layer' names posing it; `calls`: how many calls of it a pass makes (1 where not given), which
        weighs its time in the order of the search; `layers`: the nets' layers as
        problems.net_compositions gives them, so that the problems of CLBlast's cheapest composition of
        each layer go first (without: each problem a layer of its own); `nets`: each net's problems, for
        what is left of each (the progress)."""
        self.pool = LocalPool(pool, jobs) if isinstance(pool, str) else pool
        self.store, self.progress = store, progress
        self.calls = {p: (calls or {}).get(p, 1) for p in problems}
        self.layers = covering(layers or [], self.calls)
        self.nets = nets or {}
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
                elif old.best_is_stale():   # a file salvaged after a cut: its best made again from what it kept
                    old.rebuild_best(order)
                self.plans.append(_Plan(problem, stage, order, rec.stages[stage.name]))
            self.records[problem] = rec
        self._order()
        self.children: list[_Child] = []
        self.lines: queue.Queue = queue.Queue()
        self.dirty: set[Problem] = set()
        self.tried_now = 0
        self.budget = Budget(0.0)   # the share the search runs within (search())
        self.rate = Rate()
        self.claims = Claims(store)
        self.checked: list[tuple[str, str, str | None]] = []   # check_fresh's: problem, set, what was wrong
        self.said: list[str] = []   # what happened that the user must hear of (a farm's worker lost)
        self.db_checked: set[str] = set()   # problems a child found right with CLBlast's database

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
            req = {"task": "cross", "problems": [p.to_json() for p in todo],
                   "candidates": [], "rounds": CROSS_ROUNDS, "cap_s": max(0.05, min(1.0, seconds / (4 * len(todo))))}
            try:
                answers, finished = self.pool.answers(req, seconds)
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
        """What this search's children, and other searches on the folder (as last read), are timing."""
        return set().union(self.claims.taken(plan.key), *(c.held.get(id(plan), ()) for c in self.children))

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

    def _claim_next(self) -> tuple[list[_Plan], list[tuple[int, list[int]]]] | None:
        """The next chunk, chosen under the folder's lock after reading what other searches did and are
        doing, and claimed before the lock is let go: two searches never take the same configurations."""
        with self.store.lock():
            self._save(claims=False)   # first what this one did: the others read it with its claims
            for rec in self.records.values():
                self.store.refresh(rec)
            self.claims.read()
            nxt = self._next_chunk()
            self.claims.write(self._mine(extra=_Child(*nxt) if nxt is not None else None))
            return nxt

    def _mine(self, extra: _Child | None = None) -> dict[tuple, set[int]]:
        """This search's claims: what its children hold."""
        out: dict[tuple, set[int]] = {}
        for c in self.children + ([extra] if extra else []):
            for plan in c.plans:
                out.setdefault(plan.key, set()).update(c.held.get(id(plan), ()))
        return out

    def _start(self, plans: list[_Plan], want: list[tuple[int, list[int]]], place: str) -> None:
        lead = plans[0]
        kernel = lead.stage.kernel
        req = {"task": "search", "problems": [p.problem.to_json() for p in plans],
               "kernel": kernel, "route": ROUTE.get(kernel),
               "configs": [[i, lead.order[i], where] for i, where in want], "repeats": 3,
               "checked": [n for n, p in enumerate(plans) if p.problem.key in self.db_checked]}
        child = _Child(plans, want, place)
        self.children.append(child)
        self.pool.start(req, place, self.lines, child)

    def _record(self, child: _Child, line: str) -> None:
        try:
            got = json.loads(line)
            if got.get("ready"):
                child.ready = True
                self.db_checked.update(p.problem.key for p in child.plans)
                self.rate.child_ready(time.monotonic() - child.born)
                return
            index, at = int(got["index"]), int(got["problem"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return   # a library's stray output on stdout
        if (index, at) in child.answered or not 0 <= at < len(child.plans) \
                or index not in child.held.get(id(child.plans[at]), ()):
            return
        child.answered.add((index, at))
        if got.get("error"):
            child.failed = (index, at)
        plan = child.plans[at]
        plan.record.add(Tried(index, got.get("ms"), got.get("error"), child.place), plan.order[index])
        self._tried(plan, child)

    def _finished(self, child: _Child, ended: Ended) -> None:
        """A child that ended (or was stopped) without answering for a configuration in the middle of its
        list: that one failed it (a crash), the ones after it are simply tried again later."""
        if child not in self.children:
            return
        self.children.remove(child)
        if ended.code == LOST:
            self.rate.child_lost()
            if child.failed is not None:
                self._fail_mates(child, *child.failed, "broke the device's queue")
        if not child.ready and not child.stopped and not ended.stopped:
            raise SearchFailed(f"the search's child process failed before its first configuration "
                               f"(exit {ended.code}): {ended.last_words}")
        missing = [(i, at) for i, where in child.want for at in where if (i, at) not in child.answered]
        if ended.code not in (0, LOST) and missing and not child.stopped and not ended.stopped:
            why = ended.why or f"the child process died on it (exit {ended.code})"
            index, at = missing[0]
            plan = child.plans[at]
            child.answered.add((index, at))
            plan.record.add(Tried(index, None, why, child.place), plan.order[index])
            self._tried(plan, child)   # a configuration that crashes its child is tried: it counts in the depth
            if ended.why:              # hung: a child each would wait out QUIET_S on every problem of its stage
                self._fail_mates(child, index, at, "hung its child")

    def _fail_mates(self, child: _Child, index: int, at: int, what: str) -> None:
        """A configuration that broke the device's queue or hung on one problem is kept as failed on the
        problems of its stage this child had yet to time it on: one program, put in force once for all of
        them, and a set that faults or hangs the device on one shape is not one to run a net with.  Tried
        on each, it would end one fresh child per problem (2.8-5.4 s each on NVIDIA's driver, up to 45
        problems share a stage), or wait QUIET_S on each (seen on the H200: xgemm V=12 #36, 41 problems)."""
        key = child.plans[at].problem.key
        where = next(where for i, where in child.want if i == index)
        for n in where:
            if (index, n) not in child.answered:
                child.answered.add((index, n))
                plan = child.plans[n]
                plan.record.add(Tried(index, None, f"not tried: this configuration {what} on {key}",
                                      child.place), plan.order[index])
                self._tried(plan, child)

    def _tried(self, plan: _Plan, child: _Child) -> None:
        """A configuration kept as tried on `plan`'s problem: counted, and a unit of the budget's work."""
        self.dirty.add(plan.problem)
        self.tried_now += 1
        self.rate.add(child.place)
        self.budget.worked()

    def _lose(self, place: str) -> None:
        """A farm's worker gone: what its children answered is kept, what they held goes to the others."""
        for child in [c for c in self.children if c.place == place]:
            self.children.remove(child)
            self.pool.stop(child)
            left = [i for i, where in child.want if any((i, at) not in child.answered for at in where)]
            what = (f"{len(left)} configurations of {child.plans[0].problem.key} {child.plans[0].stage.name} "
                    f"(#{left[0]} to #{left[-1]}) not timed, left to the others" if left else "nothing lost")
            self.said.append(f"worker {place} lost mid-search: {what}")
            self.progress(self.said[-1])

    def _save(self, claims: bool = True) -> None:
        """The records changed (and this search's claims), written under the folder's lock."""
        with self.store.lock():
            for problem in self.dirty:
                self.store.save(self.records[problem])
            self.dirty.clear()
            if claims:
                self.claims.sync(self._mine())

    def _free_places(self) -> list[str]:
        free = list(self.pool.slots())
        for c in self.children:
            if c.place in free:
                free.remove(c.place)
        return free

    def search(self, budget: Budget) -> None:
        """Children side by side until `budget` expires (each configuration tried is a unit of its work) or
        nothing is left to try."""
        self.budget = budget
        saved = time.monotonic()
        self.rate = Rate()
        try:
            while True:
                for place in self.pool.lost():
                    self._lose(place)
                free = self._free_places()
                while not budget.expired() and free:
                    nxt = self._claim_next()
                    if nxt is None:
                        break
                    self._start(*nxt, free.pop(0))
                if not self.children:
                    if not self.pool.slots():
                        raise SearchFailed("no worker is left to search on")
                    break
                if budget.expired():
                    break
                try:   # a second at most, so that lost workers and the deadline are seen
                    child, what = self.lines.get(timeout=min(1.0, max(budget.wall_s(), 0.01)))
                except queue.Empty:
                    child = what = None
                if isinstance(what, Ended):
                    self._finished(child, what)
                elif child is not None and child in self.children:
                    self._record(child, what)
                if time.monotonic() - saved > SAVE_EVERY_S:
                    self._save()
                    saved = time.monotonic()
                self.progress(self._status())
        finally:
            self._stop_all()
            self._save()

    def _stop_all(self) -> None:
        """Stop the children still working, keeping what they said before they stopped."""
        for c in self.children:
            c.stopped = True
            self.pool.stop(c)
        wait_until = time.monotonic() + STOP_WAIT_S
        while self.children and time.monotonic() < wait_until:
            try:
                child, what = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if isinstance(what, Ended):
                if child in self.children:
                    self.children.remove(child)
            elif child in self.children:
                self._record(child, what)
        self.children.clear()

    def left(self) -> dict[str, int]:
        """Per net, the configurations of CLBlast's default search not tried yet."""
        by_problem = {}
        for plan in self.plans:
            by_problem[plan.problem] = by_problem.get(plan.problem, 0) + plan.record.default_count - plan.record.done()
        return {net: sum(by_problem.get(p, 0) for p in problems) for net, problems in self.nets.items()}

    def _status(self) -> str:
        done = sum(p.record.done() for p in self.plans)
        total = sum(p.record.default_count for p in self.plans)
        # the time left is the progress display's, for the whole run (compare/progress.py)
        return (f"search {done:,}/{total:,} ({100 * done / max(total, 1):.0f}%), "
                f"{self.rate.per_second():.2f} configurations/s")


def _stage_rank(stage) -> tuple:
    """Each tuner's first (exhaustive, small) stages before the large sampled ones, direct before indirect."""
    order = {"xgemm_direct": 0, "xconvgemm": 0, "xgemv": 0, "xgemm": 1}
    return (stage.variation % 10 != 1 and stage.tuner != "xgemv", order.get(stage.tuner, 2), stage.variation)
