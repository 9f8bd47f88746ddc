"""The verification of what the search found (search.py), and the checks
that make a tuned set a choice: per problem, CLBlast's database and the
best few configurations of each kernel re-timed alone through the routine,
so a tuned choice is never slower than the database; each kernel's fastest
set checked once more in a child where it is in force before any call, as
a backend's child runs it (`check_fresh`: in the verification's child the
database ran first, and on PoCL sets were seen right there and wrong where
they ran first); and one set per kernel for each net, every verified set
timed on every problem of the net (`verify_net`).  Every child runs where
the search's pool says (children.LocalPool here, farm.DaskPool on a farm).
"""
from __future__ import annotations

import datetime as _dt
import json
import time
from concurrent.futures import ThreadPoolExecutor

from ...clblast.overrides import ALWAYS_DIRECT, ALWAYS_INDIRECT
from ...clblast.problems import GEMV, XGEMM_ALONE, Problem
from ...clblast.record import Candidate, NetChoice, ProblemRecord, Verified

VERIFY_CAP_S = 6.0      # timed rounds per problem at most this long ...
VERIFY_ROUNDS = 15      # ... and at most this many
TOP = 3                 # best configurations of each kernel re-timed
CROSS_ROUNDS = 5
BUILD_SHARE = 0.4       # of the verification's time at most, compiling and checking every candidate side by side
BATCH = 12              # problems timed in one child: the databases of all first, before any override
ROUTE = {"Xgemm": ALWAYS_INDIRECT, "XgemmDirect": ALWAYS_DIRECT}


class Verifying:
    """The verification's part of a Search: its records, store, pool, progress and `checked` list."""

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
        first, alone, until `seconds` are spent; the problems verified.  Where the pool runs several
        children, every candidate is first compiled and checked side by side (`_build`): the driver keeps
        what it compiled, and a wrong candidate needs no time in the timed children, which then take
        BATCH problems each, so their start and CLBlast's database programs are paid once a batch."""
        end = time.monotonic() + seconds
        todo = [(p, rec, self.candidates(rec)) for p, rec in self.records.items() if rec.needs_verifying(verify_how(p))]
        known = self._build(todo, time.monotonic() + seconds * BUILD_SHARE)
        done = []
        while todo and time.monotonic() + VERIFY_CAP_S <= end:
            fits = max(1, int((end - time.monotonic()) // VERIFY_CAP_S))
            batch, todo = todo[:min(BATCH, fits)], todo[min(BATCH, fits):]
            self.progress(f"verify {batch[0][0].key}{f' and {len(batch) - 1} more' if len(batch) > 1 else ''}: "
                          f"CLBlast's database and the best found, through the routine")
            items = [{"problem": p.to_json(),
                      "candidates": [c for c in cands if not c[1] or known.get((p.key, c[0])) is None]}
                     for p, _, cands in batch]
            req = {"task": "verify", "items": items, "rounds": VERIFY_ROUNDS, "cap_s": VERIFY_CAP_S}
            timed = _verify_child(self.pool, req, timeout=end - time.monotonic())   # past the budget: verified next time
            for (problem, rec, cands), item in zip(batch, items):
                got = timed.get(problem.key, {})
                if len(got) < len(item["candidates"]):   # its child ended first: verified next time
                    continue
                answer = {**{label: (None, known[(problem.key, label)]) for label, sets in cands
                             if sets and known.get((problem.key, label))}, **got}
                rec.verified = Verified(
                    when=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    depth={name: s.done() for name, s in rec.stages.items()},
                    how=verify_how(problem),
                    candidates=[Candidate(label, sets, *answer.get(label, (None, "no answer"))) for label, sets in cands])
                self.store.save(rec)
                done.append(problem)
        return done

    def _build(self, todo: list, until: float) -> dict[tuple[str, str], str | None]:
        """(problem key, label) -> what was wrong (None: right), each problem's candidates compiled and
        checked in a child of its own, as many side by side as the pool has places, until `until`; nothing
        where the pool has one place (building ahead would then only move the compiles)."""
        places = len(self.pool.slots())
        if places < 2 or not todo:
            return {}
        self.progress(f"build the candidates of {len(todo)} problems, {places} children side by side")

        def one(item) -> dict[tuple[str, str], str | None]:
            problem, _, cands = item
            if time.monotonic() >= until:
                return {}
            answers, _ = self.pool.answers({"task": "build", "problem": problem.to_json(), "candidates": cands},
                                           until - time.monotonic())
            return {(problem.key, d["label"]): d.get("error") for d in answers if "label" in d}
        known: dict[tuple[str, str], str | None] = {}
        with ThreadPoolExecutor(places) as pool:
            for got in pool.map(one, todo):
                known.update(got)
        return known

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
                got = _fresh_child(self.pool, sets, [p for p, _ in pairs], end - time.monotonic())
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


FAMILIES = {"gemm": ("XgemmDirect", "Xgemm"), "gemv": ("Xgemv",), "convgemm": ("Xconvgemm",)}


def verify_net(search: "Verifying", net: str, weights: dict, seconds: float) -> NetChoice | None:
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
            req = {"task": "cross", "problems": [p.to_json() for p in problems],
                   "candidates": cands, "rounds": CROSS_ROUNDS, "cap_s": 1.0}
            left = end - time.monotonic()
            got = _cross_child(search.pool, req, left)
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


def _right_fresh(search: "Verifying", net: str, label: str, sets, problems: list[Problem], end: float) -> bool | None:
    """Whether `sets` are right on every problem in force before any call (Search.check_fresh); None when
    the time ran out."""
    got = _fresh_child(search.pool, sets, problems, end - time.monotonic())
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


def _cross_child(pool, req: dict, timeout: float) -> dict | None:
    """(label, problem key) -> median ms for those that ran, or None when the child failed or ran out of time."""
    answers, finished = pool.answers(req, timeout)
    got = {(d["label"], d["problem"]): float(d["ms"]) for d in answers
           if "label" in d and "problem" in d and d.get("ms") is not None}
    return got if finished else None


def _distinct(cands):
    seen, out = set(), []
    for label, sets in cands:
        key = json.dumps(sets, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append((label, sets))
    return out


DIED = "its process died before answering"


def _fresh_child(pool, sets, problems: list[Problem], timeout: float) -> dict[str, str | None] | None:
    """Problem key -> what was wrong (None: right) with `sets` in force from the start; a problem its child
    died before answering is wrong; None when the time ran out first."""
    req = {"task": "fresh", "sets": sets, "problems": [p.to_json() for p in problems]}
    answers, finished = pool.answers(req, max(timeout, 0.0))
    got = {d["problem"]: d.get("error") for d in answers if "problem" in d}
    if len(got) < len(problems) and not finished:
        return None
    return {p.key: got.get(p.key, DIED) for p in problems}


def _verify_child(pool, req: dict, timeout: float) -> dict[str, dict[str, tuple]]:
    """problem key -> label -> (ms, error), for the problems the child answered before it ended."""
    answers, _ = pool.answers(req, timeout)
    timed: dict[str, dict[str, tuple]] = {}
    for d in answers:
        if "label" in d and "problem" in d:
            timed.setdefault(d["problem"], {})[d["label"]] = (d.get("ms"), d.get("error"))
    return timed
