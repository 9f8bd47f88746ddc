"""What the tuning knows about one problem on one device, as typed,
versioned files: written by the search (search.py) after every few
configurations, read by the backends (tuned.py).

One folder per device under the cache (COMPARE_CACHE_DIR moves it), named
by the device, its driver and the CLBlast library, so nothing carries over
to another of them; one file per problem in it.  Per stage the file keeps
every configuration tried, by its place in the stage's search order
(space.py: fixed, so the next run continues after the last one tried),
with its time or why it failed, and where it was timed (a farm's worker);
and the verification's result: the best candidates and CLBlast's database
parameters re-timed through the real routine, alone.

Several processes may tune one folder at once: every write merges what
is on disk into what the writer holds, under the folder's lock
(backends/store/), so each learns the others' results and none
is lost.  A damaged file is set aside and what could be read of it kept.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import cache, store
from ..store import DeviceId, locked, whole, write_json
from .problems import Problem

SCHEMA = "clblast-compare/clblast-tuning"
VERSION = 1
FOLDER = "clblast-tuning"


def net_key(name: str, batch: int) -> str:
    """What a net's choice is filed under: 'vgg16 batch 1'."""
    return f"{name} batch {batch}"


def _batch_of(key: str, name: str) -> int | None:
    m = re.fullmatch(re.escape(name) + r" batch (\d+)", key)
    return int(m.group(1)) if m else None


@dataclass
class Tried:
    """One configuration of a stage: its place in the search order, and its
    time (device span of the routine, ms) or why it did not count."""

    index: int
    ms: float | None
    error: str | None = None
    by: str | None = None   # where it was timed: a farm's worker, a process (None in older files)


@dataclass
class StageRecord:
    stage: str                     # e.g. 'xgemm V=2'
    kernel: str                    # the database kernel its parameters are for
    order: str                     # fingerprint of the search order the indices refer to
    default_count: int             # what CLBlast's tuner tries by default
    tried: dict[int, Tried] = field(default_factory=dict)
    best: list[dict] = field(default_factory=list)   # the fastest few: {"index", "ms", "parameters"}

    KEEP = 8

    def done(self) -> int:
        """How far along the default search: configurations tried, each counted once."""
        return sum(1 for i in self.tried if i < self.default_count)

    def next_indices(self, limit: int, skip=()) -> list[int]:
        out = []
        for i in range(self.default_count):
            if i not in self.tried and i not in skip:
                out.append(i)
                if len(out) == limit:
                    break
        return out

    def add(self, tried: Tried, parameters: dict) -> None:
        self.tried[tried.index] = tried
        self.best = [b for b in self.best if b["index"] != tried.index]   # timed again: this time stands
        if tried.ms is not None:
            self._keep_best([{"index": tried.index, "ms": tried.ms, "parameters": parameters}])

    def _keep_best(self, more: list[dict]) -> None:
        known = {b["index"] for b in self.best}
        self.best += [b for b in more if b["index"] not in known]
        self.best.sort(key=lambda b: (b["ms"], b["index"]))
        del self.best[self.KEEP:]

    def absorb(self, other: "StageRecord") -> int:
        """What `other` (the same stage on disk, written by another process) tried and this lacks, added;
        how many.  Another search order's indices mean other configurations: nothing is taken from it."""
        if other.order != self.order:
            return 0
        new = [t for i, t in other.tried.items() if i not in self.tried]
        for t in new:
            self.tried[t.index] = t
        self._keep_best([b for b in other.best if b["index"] in self.tried
                         and self.tried[b["index"]].ms is not None])
        return len(new)

    def best_is_stale(self) -> bool:
        """Whether `best` is not the fastest of `tried` (a file salvaged after a cut lost it)."""
        timed = sorted(t.ms for t in self.tried.values() if t.ms is not None)[:self.KEEP]
        return sorted(b["ms"] for b in self.best) != timed

    def rebuild_best(self, order: list[dict]) -> None:
        """`best` made again from `tried`, the parameters from the stage's search order."""
        self.best = []
        self._keep_best([{"index": t.index, "ms": t.ms, "parameters": order[t.index]}
                         for t in self.tried.values() if t.ms is not None and t.index < len(order)])

    def best_ms(self) -> float | None:
        return self.best[0]["ms"] if self.best else None

    def progress(self) -> list[tuple[int, float]]:
        """(configurations tried, best time so far) at each improvement, in search order."""
        out, best, n = [], None, 0
        for i in sorted(self.tried):
            n += 1
            ms = self.tried[i].ms
            if ms is not None and (best is None or ms < best):
                best = ms
                out.append((n, ms))
        return out

    def to_json(self) -> dict:
        return {"stage": self.stage, "kernel": self.kernel, "order": self.order,
                "default_count": self.default_count,
                "tried": [[t.index, t.ms, t.error] for t in sorted(self.tried.values(), key=lambda t: t.index)],
                "best": self.best, "by": self._by()}

    def _by(self) -> dict[str, list[int]]:
        """Who timed which configuration: apart from `tried`, so a reader of the first version reads it."""
        out: dict[str, list[int]] = {}
        for t in sorted(self.tried.values(), key=lambda t: t.index):
            if t.by:
                out.setdefault(t.by, []).append(t.index)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "StageRecord":
        """A stage; one cut short (store.salvage) keeps the configurations before the cut."""
        rec = cls(d["stage"], d["kernel"], d["order"], int(d["default_count"]))
        by = {int(i): name for name, indices in d.get("by", {}).items() for i in indices if isinstance(i, int)}
        for t in d["tried"]:
            if not whole(t) or len(t) != 3:
                continue   # the entry at a cut
            i, ms, err = int(t[0]), None if t[1] is None else float(t[1]), t[2]
            rec.tried[i] = Tried(i, ms, err, by.get(i))
        rec.best = [b for b in d.get("best", []) if whole(b) and {"index", "ms", "parameters"} <= b.keys()]
        return rec


@dataclass
class Candidate:
    """One way to run a problem, re-timed in the verification: the overrides
    it puts in force (none: CLBlast's database) and the median wall time."""

    label: str
    sets: list[tuple[str, dict]]
    ms: float | None
    error: str | None = None
    fresh: bool = False     # also right with its sets in force before any call (search.Search.check_fresh)

    def to_json(self) -> dict:
        return {"label": self.label, "sets": [[k, p] for k, p in self.sets], "ms": self.ms, "error": self.error,
                "fresh": self.fresh}

    @classmethod
    def from_json(cls, d: dict) -> "Candidate":
        return cls(d["label"], [(k, dict(p)) for k, p in d["sets"]], d["ms"], d.get("error"), d.get("fresh", False))


@dataclass
class Verified:
    when: str
    depth: dict[str, int]          # stage -> configurations tried when verified
    how: str                       # what was timed and how
    candidates: list[Candidate]    # the database's first

    def database(self) -> Candidate | None:
        return next((c for c in self.candidates if not c.sets), None)

    def best_tuned(self) -> Candidate | None:
        timed = [c for c in self.candidates if c.sets and c.ms is not None]
        return min(timed, key=lambda c: c.ms) if timed else None

    def fastest_per_kernel(self) -> list[Candidate]:
        """The fastest timed tuned candidate of each kernel (a GEMV candidate sets three: its first names it)."""
        best: dict[str, Candidate] = {}
        for c in self.candidates:
            if c.sets and c.ms is not None and (c.sets[0][0] not in best or c.ms < best[c.sets[0][0]].ms):
                best[c.sets[0][0]] = c
        return list(best.values())

    def winner(self) -> Candidate | None:
        timed = [c for c in self.candidates if c.ms is not None]
        return min(timed, key=lambda c: c.ms) if timed else None

    def to_json(self) -> dict:
        return {"when": self.when, "depth": self.depth, "how": self.how,
                "candidates": [c.to_json() for c in self.candidates]}

    @classmethod
    def from_json(cls, d: dict) -> "Verified":
        return cls(d["when"], {k: int(v) for k, v in d["depth"].items()}, d["how"],
                   [Candidate.from_json(c) for c in d["candidates"]])


@dataclass
class ProblemRecord:
    problem: Problem
    layers: list[str] = field(default_factory=list)     # 'net:layer' that pose it (as last tuned)
    stages: dict[str, StageRecord] = field(default_factory=dict)
    verified: Verified | None = None
    database_ms: float | None = None   # median wall ms of one call with CLBlast's database, where timed

    def database_time(self) -> float | None:
        """What one call costs with CLBlast's database (ms): as verified, else as timed for the search's order."""
        db = self.verified.database() if self.verified else None
        return db.ms if db is not None and db.ms is not None else self.database_ms

    def depth(self) -> tuple[int, int]:
        """(configurations tried, CLBlast's default count), over every stage of its tuners."""
        return sum(s.done() for s in self.stages.values()), sum(s.default_count for s in self.stages.values())

    def complete(self) -> bool:
        done, total = self.depth()
        return total > 0 and done >= total

    def needs_verifying(self, how: str | None = None) -> bool:
        """Whether the search moved since the verification, or it was timed otherwise than `how` says now."""
        now = {name: s.done() for name, s in self.stages.items()}
        return any(s.best for s in self.stages.values()) and (
            self.verified is None or self.verified.depth != now or (how is not None and self.verified.how != how))

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "version": VERSION, "problem": self.problem.to_json(), "key": self.problem.key,
                "layers": self.layers, "stages": [s.to_json() for s in self.stages.values()],
                "verified": self.verified.to_json() if self.verified else None, "database_ms": self.database_ms}

    def absorb(self, other: "ProblemRecord") -> int:
        """Merge in what `other` (this problem's record on disk, written by another process) knows and this
        lacks: configurations tried, the later verification (the checks made of the same one), the layers,
        the database's time; how many configurations were new."""
        self.layers = sorted(set(self.layers) | set(other.layers))
        new = 0
        for name, theirs in other.stages.items():
            if name in self.stages:
                new += self.stages[name].absorb(theirs)
            else:
                self.stages[name] = theirs
                new += len(theirs.tried)
        mine = self.verified
        if other.verified is not None and (mine is None or other.verified.when > mine.when):
            self.verified = other.verified
        elif other.verified is not None and mine.when == other.verified.when:
            checked = {c.label: c for c in other.verified.candidates if c.fresh or (c.error and c.ms is None)}
            for c in mine.candidates:   # a check another process made of the same verification
                if c.label in checked and not c.fresh and c.ms is not None:
                    c.ms, c.error, c.fresh = checked[c.label].ms, checked[c.label].error, checked[c.label].fresh
        if self.database_ms is None:
            self.database_ms = other.database_ms
        return new

    @classmethod
    def from_json(cls, d: dict) -> "ProblemRecord":
        """A record; one cut short (store.salvage) keeps what came before the cut: its whole stages
        and the configurations of the stage at the cut (a verification cut short is dropped: it is redone)."""
        if d.get("schema") != SCHEMA or d.get("version") != VERSION:
            raise ValueError(f"not a version {VERSION} {SCHEMA} file")
        stages = []
        for s in d["stages"]:
            try:
                stages.append(StageRecord.from_json(s))
            except (KeyError, TypeError, ValueError):
                if whole(s):
                    raise
        verified = d.get("verified")
        return cls(Problem.from_json(d["problem"]), list(d.get("layers", [])), {s.stage: s for s in stages},
                   Verified.from_json(verified) if verified and whole(verified) else None,
                   None if d.get("database_ms") is None else float(d["database_ms"]))   # absent in older files


@dataclass
class NetChoice:
    """One parameter set per kernel for every call of a net (CLBlast's overrides cost a host call each
    time a set changes: on an H100 about 0.8 ms, more than a layer gains), chosen by timing every
    problem's verified sets on every problem of the net: per family ('XgemmDirect' and 'Xgemm', each
    with its route forced, 'Xgemv' for the three GEMV kernels, 'Xconvgemm'), the set with the least
    time summed over the net's layers, and the database's sum beside it."""

    net: str                                   # 'vgg16 batch 1'
    problems: list[str]                        # the problem keys it was chosen over
    when: str
    families: dict[str, dict] = field(default_factory=dict)   # family -> {"sets", "label", "ms", "database_ms"}

    def sets(self, family: str) -> list[tuple[str, dict]] | None:
        """The family's set where it beat the database's in sum, else None (the database's)."""
        f = self.families.get(family)
        if not f or f.get("ms") is None or f.get("database_ms") is None or f["ms"] >= f["database_ms"]:
            return None
        return [(k, dict(p)) for k, p in f["sets"]]

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "version": VERSION, "net": self.net, "problems": self.problems, "when": self.when,
                "families": self.families}

    @classmethod
    def from_json(cls, d: dict) -> "NetChoice":
        if d.get("schema") != SCHEMA or d.get("version") != VERSION or "net" not in d:
            raise ValueError(f"not a version {VERSION} {SCHEMA} net file")
        return cls(d["net"], list(d["problems"]), d["when"], dict(d["families"]))


class Store:
    """The tuning files of one device; safe with other processes writing them at once (module doc)."""

    SPECIAL = ("device.json", "claims.json")   # files of the folder that are no problem's record

    def __init__(self, device: DeviceId, root: Path | None = None):
        self.device = device
        self.folder = (root or cache.cache_dir()) / FOLDER / device.slug
        self._seen: dict[Path, tuple] = {}   # a record's file -> its _stamp as this process last read or wrote it

    def lock(self):
        """The folder's lock, for a read-merge-write of its files (taken again inside: no harm); the folder
        made first (refused in one line where a file is in its place)."""
        store.make_folder(self.folder)
        return locked(self.folder)

    def _path(self, problem: Problem) -> Path:
        name = re.sub(r"[^a-z0-9]+", "-", problem.key.lower()).strip("-")
        return self.folder / f"{name}.json"

    def load(self, problem: Problem) -> ProblemRecord | None:
        """The problem's record, or None when there is none (then it is searched afresh).  A damaged one
        is set aside and what could be read of it kept."""
        rec = self._read_record(self._path(problem))
        return rec if rec is not None and rec.problem == problem else None

    def _read_record(self, path: Path) -> ProblemRecord | None:
        return _read(path, ProblemRecord.from_json, lambda rec: (
            f"kept {sum(len(s.tried) for s in rec.stages.values())} configurations tried" if rec is not None
            else "nothing in it could be kept, its problem is searched afresh"), keep=True)

    def _net_path(self, net: str) -> Path:
        return self.folder / ("net-" + re.sub(r"[^a-z0-9]+", "-", net.lower()).strip("-") + ".json")

    def _read_net(self, path: Path) -> NetChoice | None:
        return _read(path, NetChoice.from_json, lambda _: "a choice cut short is no choice: it is made again")

    def load_net(self, net: str) -> NetChoice | None:
        choice = self._read_net(self._net_path(net))
        return choice if choice is not None and choice.net == net else None

    def load_net_nearest(self, name: str, batch: int) -> NetChoice | None:
        """The choice for net `name` at `batch`; where there is none, the one chosen at the batch nearest
        to it by ratio (the smaller on a tie): CLBlast itself runs a device's tuned parameters at every
        size, and the backends time them against the database there, so a sweep's larger batches are
        not left with the database only because the search ran at batch 1."""
        own = self.load_net(net_key(name, batch))
        if own is not None:
            return own
        others = []
        for path in sorted(self.folder.glob("net-*.json")) if self.folder.is_dir() else []:
            choice = self._read_net(path)
            b = _batch_of(choice.net, name) if choice is not None else None
            if b is not None and b > 0:
                others.append((abs(math.log(b / batch)), b, choice))
        return min(others, key=lambda t: t[:2])[2] if others else None

    def save_net(self, choice: NetChoice) -> Path:
        """Written whole (a choice is made from every verified problem: the last one made stands)."""
        path = self._net_path(choice.net)
        with self.lock():
            write_json(path, choice.to_json())
        return path

    def all(self) -> list[ProblemRecord]:
        out = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            if path.name in self.SPECIAL or path.name.startswith("net-"):
                continue
            rec = self._read_record(path)
            if rec is not None:
                out.append(rec)
        return out

    def save(self, rec: ProblemRecord) -> Path:
        """Under the folder's lock: what another process wrote of the problem merged into `rec`
        (ProblemRecord.absorb: `rec` then holds both), and the whole written to a temporary file and renamed
        (an interrupt leaves the last good file)."""
        with self.lock():
            device = self.folder / "device.json"
            if not device.exists():
                write_json(device, {"schema": SCHEMA, "version": VERSION, "device": self.device.to_json()})
            path = self._path(rec.problem)
            there = self._read_record(path)
            if there is not None and there.problem == rec.problem:
                rec.absorb(there)
            write_json(path, rec.to_json())
            self._seen[path] = _stamp(path)
        return path

    def refresh(self, rec: ProblemRecord) -> int:
        """What other processes wrote of `rec`'s problem since this process last read or wrote it, merged
        into it; how many configurations."""
        path = self._path(rec.problem)
        seen = _stamp(path)
        if seen is None or seen == self._seen.get(path):
            return 0
        there = self._read_record(path)
        self._seen[path] = seen
        return rec.absorb(there) if there is not None and there.problem == rec.problem else 0


def _stamp(path: Path) -> tuple | None:
    """What tells one version of a file from the next (each write renames a new file into place)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _read(path: Path, parse, kept, keep: bool = False):
    """`parse` of the file's JSON, or None where there is none; a damaged or foreign file is set aside by
    the one loader of the stores (backends/store/) in one line that says what `kept(parsed)` says was
    kept; with `keep`, what `parse` made of it is written back in its place."""
    def checked(data):
        return store.Parsed(parse(store.obj(data, "the file")))
    return store.load(path, checked, kept, (lambda got: write_json(path, got.to_json())) if keep else None)
