"""Which parameters the CLBlast backends run with: what `compare tune`'s
search found and verified for each of the net's problems on this device
(search.py, record.py), or CLBlast's built-in database.

Per problem, the verification re-timed the best configurations of each
kernel and the database's through the real routine; a backend in its
`tuned` mode runs each call with the fastest tuned candidate (for a GEMM
that is routed to one kernel, the fastest of that kernel).  CLBlast's
overrides cannot be undone and the database's own values cannot be read
back, so a kind of call (GEMM direct, GEMM indirect, GEMV, xCONVGEMM) is
tuned for a whole net or not at all: where one of the net's problems has
no verified set yet, every call of that kind keeps the database's.  The
`database` mode runs with no override at all; the runner keeps the faster
mode, so tuning never makes a CLBlast backend slower.  A batch with no
choice of its own runs the one chosen for the nearest batch (record.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from nets.errors import UserError

from ..options import DATABASE, TUNED
from . import overrides
from .problems import GEMM, GEMV, Problem, cheapest_costs, covering
from .record import DeviceId, NetChoice, ProblemRecord, Store, net_key

DEFAULT = "CLBlast database default"
# the modes of a CLBlast backend with a tuning: one set per kernel for the whole net (no override
# calls between layers), each problem's own set (an override call wherever the set changes), none;
# TUNED and DATABASE are also the words of --clblast-params (backends/options.py)
PER_PROBLEM = "tuned-per-problem"
MODES = (TUNED, PER_PROBLEM, DATABASE)

# the database kernels each routine compiles (and so the overrides it may need)
GEMM_KERNELS = ("Xgemm", "XgemmDirect", "Copy", "Pad", "Transpose", "Padtranspose")
GEMV_KERNELS = ("Xgemv", "XgemvFast", "XgemvFastRot")
COPY_KERNELS = ("Xaxpy",)
CONVGEMM_KERNELS = ("Xconvgemm",)


def percent(done: float, total: float) -> str:
    """`done` of `total` as a whole percent, but to a tenth from 99.5% until all: 100% means all of it."""
    pct = 100.0 * done / max(total, 1e-30)
    if done < total and pct >= 99.5:
        return f"{min(pct, 99.9):.1f}%"
    return f"{pct:.0f}%"


@dataclass(frozen=True)
class Depth:
    """How deep the tuning behind a net's CLBlast figures went."""

    problems: int          # the net's problems
    complete: int          # searched to 100% of CLBlast's default search
    verified: int          # with a verified choice
    tried: int             # configurations tried, over all
    default: int           # CLBlast's default count, over the problems searched
    searched: int | None = None   # problems with any search (None: all of them)
    share: float | None = None    # of the net's time with CLBlast's database in the cheapest composition of
                                  # each layer, the part in problems complete (None: a time not known)

    def __str__(self) -> str:
        if not self.problems:
            return "no CLBlast problem"
        searched = self.problems if self.searched is None else self.searched
        if not searched:
            return f"not tuned: none of its {self.problems} problems searched yet"
        where = "" if searched == self.problems else f" on the {searched} of {self.problems} problems searched"
        # FLOPs mislead: the share of CLBlast's time says how much of the net's figure the complete ones stand for
        those = "" if self.share is None else (f" (those of {percent(self.share, 1.0)} of CLBlast's database time, "
                                               f"cheapest composition per layer)")
        return (f"{percent(self.tried, max(self.default, 1))} of CLBlast's default search{where} "
                f"({self.tried:,} of {self.default:,} configurations), "
                f"complete on {self.complete} of {self.problems} problems{those}, verified on {self.verified}")


def clblast_version() -> str:
    from .library import library_file
    lib = library_file()
    return lib.rsplit("/", 1)[-1] if lib else "unknown"


class Tuning:
    """The verified sets of one device's problems, as one backend of one net uses them."""

    def __init__(self, records: dict[Problem, ProblemRecord] | None, calls: dict[Problem, int] | None = None,
                 apply: bool = True, net: NetChoice | None = None, per_problem: bool = True,
                 layers: list[list[dict[Problem, int]]] | None = None, own_key: str | None = None):
        """`calls`: the net's problems, each with the calls one pass makes of it (problems.net_calls);
        `layers`: its layers' compositions (problems.net_compositions), for the share of the depth;
        `own_key`: the net and batch run ('vgg16 batch 2'), where `net` may have been chosen at another."""
        self.records = records or {}
        self.calls = dict(calls or {})
        self.layers = covering(layers or [], self.calls)
        self.problems = list(self.calls)
        self.apply = apply              # False: CLBlast's database runs, the tuning is only reported
        self.net = net                  # the one set per kernel chosen for this net
        self.per_problem = per_problem  # each problem's own set rather than the net's
        self.own_key = own_key
        self._group: dict[tuple, bool] = {}

    @classmethod
    def for_net(cls, info: dict, calls: dict[Problem, int], use: str = TUNED, net: tuple[str, int] | None = None,
                layers: list[list[dict[Problem, int]]] | None = None) -> "Tuning":
        """`calls`, `layers`: as the constructor's; `use`: one of the modes; `net`: the net's name and batch,
        whose choice it runs (or, where that batch has none, the one of the nearest batch with one)."""
        store = Store(DeviceId.of(info, clblast_version()))
        return cls({r.problem: r for r in store.all()}, calls, apply=use != DATABASE,
                   net=store.load_net_nearest(*net) if net else None, per_problem=use == PER_PROBLEM,
                   layers=layers, own_key=net_key(*net) if net else None)

    def _tuned(self, problem: Problem, kernel: str | None):
        rec = self.records.get(problem)
        if rec is None or rec.verified is None:
            return None
        cands = [c for c in rec.verified.candidates if c.sets and c.ms is not None
                 and (kernel is None or any(k == kernel for k, _ in c.sets))]
        return min(cands, key=lambda c: c.ms).sets if cands else None

    def verified_ms(self, problem: Problem, kernel: str | None = None) -> float | None:
        """The verified time of the call `sets` gives (its set's, or the database's where it gives none); None
        where the problem was not verified."""
        rec = self.records.get(problem)
        if rec is None or rec.verified is None:
            return None
        wanted = self.sets(problem, kernel)
        for c in rec.verified.candidates:
            if c.ms is not None and [(k, dict(p)) for k, p in c.sets] == [(k, dict(p)) for k, p in wanted]:
                return c.ms
        return None

    def sets(self, problem: Problem, kernel: str | None = None) -> list[tuple[str, dict]]:
        """The overrides of `problem`'s call ([]: CLBlast's database); `kernel` asks for a GEMM routed
        to that kernel (clblast-best's direct and indirect candidates)."""
        if not self.apply:
            return []
        if not self.per_problem:
            return self._net_sets(problem, kernel)
        group = (problem.routine, kernel)
        if group not in self._group:
            self._group[group] = all(self._tuned(p, kernel) for p in self.problems if p.routine == problem.routine)
        return (self._tuned(problem, kernel) or []) if self._group[group] else []

    def _net_sets(self, problem: Problem, kernel: str | None) -> list[tuple[str, dict]]:
        """The net's set for the family of `problem`'s call (a GEMM routed as the lower sum says, unless
        `kernel` asks for one route); [] where the database's summed lower or none was chosen."""
        if self.net is None:
            return []
        if problem.routine == GEMM:
            if kernel is not None:
                return self.net.sets(kernel) or []
            beat = [f for f in ("XgemmDirect", "Xgemm") if self.net.sets(f)]
            return self.net.sets(min(beat, key=lambda f: self.net.families[f]["ms"])) if beat else []
        return self.net.sets("Xgemv" if problem.routine == GEMV else "Xconvgemm") or []

    def changes_nothing(self) -> bool:
        """Whether every call of the net would run with CLBlast's database parameters anyway."""
        for p in self.problems:
            kernels = (None, "XgemmDirect", "Xgemm") if p.routine == GEMM else (None,)
            if any(self.sets(p, k) for k in kernels):
                return False
        return True

    def depth(self) -> Depth:
        recs = [r for r in map(self.records.get, self.problems) if r is not None]
        # a record may hold only the database's time (search.measure_costs): searched means more than that
        searched = [r for r in recs if r.depth()[0] or r.verified]
        return Depth(len(self.problems), sum(1 for r in recs if r.complete()), sum(1 for r in recs if r.verified),
                     sum(r.depth()[0] for r in searched), sum(r.depth()[1] for r in searched), len(searched),
                     self.share())

    def share(self) -> float | None:
        """Of the net's time with CLBlast's database in the cheapest composition of each layer (what CLBlast
        at its best pays: problems.cheapest_costs), the part in the problems searched to 100%; None unless
        every problem's time is known."""
        times = {p: (r.database_time() if (r := self.records.get(p)) is not None else None) for p in self.calls}
        if any(ms is None for ms in times.values()):
            return None
        costs = cheapest_costs(self.layers, times.get)
        total = sum(costs.values())
        return sum(c for p, c in costs.items() if self.records[p].complete()) / total if total > 0 else None

    def progress(self) -> list[dict]:
        """Per problem of the net, heaviest first: configurations tried of CLBlast's default count, the
        best device time after each improvement (stages in search order), and the verified choice;
        so a reader sees whether more tuning would have changed the answer."""
        out = []
        for p in sorted(self.problems, key=lambda p: -p.flops):
            rec = self.records.get(p)
            if rec is None:
                out.append({"problem": p.key, "tried": 0, "default": None, "curve": [], "verified": None})
                continue
            curve, offset, best = [], 0, None
            for stage in rec.stages.values():
                for n, ms in stage.progress():
                    if best is None or ms < best:
                        best = ms
                        curve.append([offset + n, round(ms, 5)])
                offset += len(stage.tried)
            v = rec.verified
            win, db = (v.winner(), v.database()) if v else (None, None)
            out.append({"problem": p.key, "tried": rec.depth()[0], "default": rec.depth()[1], "curve": curve,
                        "verified": {"choice": win.label, "ms": win.ms, "database_ms": db.ms if db else None}
                        if win else None})
        return out

    @property
    def source(self) -> str:
        if not self.apply or (not self.records and self.net is None):
            return DEFAULT
        used = sum(1 for p in self.problems if self.sets(p))
        if not used:   # no kind of call has a verified set on every problem of the net yet
            return f"{DEFAULT} (the tuning, {self.depth()}, gives this net no set that beats it yet)"
        if self.borrowed:
            return (f"tuned by `compare tune` at {self.net.net}: one set per kernel chosen for that net, in force "
                    f"for {used} of {len(self.problems)} problems, CLBlast's database for the rest; this "
                    f"batch's own problems: {self.depth()}")
        how = "each problem's own set" if self.per_problem else "one set per kernel for the whole net"
        return (f"tuned by `compare tune` ({self.depth()}); {how}, in force for {used} of "
                f"{len(self.problems)} problems, CLBlast's database for the rest")

    @property
    def borrowed(self) -> bool:
        """Whether the net's sets in force were chosen at another batch than the one run."""
        return (not self.per_problem and self.net is not None and self.own_key is not None
                and self.net.net != self.own_key)


class Applied:
    """The overrides one layer's routines run with, put in force before each
    call (a switch costs an override call only when another layer or backend
    changed them), or, where it relies on the database defaults, a check that
    nothing overrode them since prepare."""

    def __init__(self, device, sets: list[tuple[str, dict]], relies_on_defaults=()):
        self.device = device
        self.sets = sets
        self.relies = tuple(k for k in relies_on_defaults if k not in {name for name, _ in sets})
        self._seen = self._defaults_state()
        if self._seen:
            raise UserError(self._conflict(self._seen))

    def _defaults_state(self) -> dict:
        forced = overrides.in_force(self.device)
        return {k: forced[k] for k in self.relies if k in forced}

    def _conflict(self, forced: dict) -> str:
        return (f"CLBlast's {', '.join(sorted(forced))} parameters were overridden earlier in this process "
                f"(by another CLBlast backend) and CLBlast cannot restore its defaults: run this backend first, "
                f"or tune the device (`compare tune`) so that every CLBlast backend sets its own")

    def __call__(self) -> None:
        for kernel, params in self.sets:
            overrides.ensure(self.device, kernel, params)
        if self.relies and overrides.in_force(self.device).keys() & set(self.relies):
            raise RuntimeError(self._conflict(self._defaults_state()))


Sets = tuple   # ((kernel, ((name, value), ...)), ...): one call's overrides, hashable


def frozen(sets: list[tuple[str, dict]]) -> Sets:
    return tuple((kernel, tuple(sorted(params.items()))) for kernel, params in sets)


def switches_per_pass(layers: list[list[list[Sets]]]) -> int:
    """The fewest override calls one pass can make once it runs in a loop: layers[i] is layer i's ways (each
    the sets of its calls, in order).  Where every layer has one way (a backend that fixes its composition)
    the count is exact: a kernel switches when a call wants another set of it than the one in force.
    Where layers have several (clblast-best chooses at prepare), a bound from below: a layer each of whose
    ways needs a set of some kernel that no other layer uses must switch into it, unless it is that kernel's
    only user in the pass, and at most one layer per such kernel can be; so at least (those layers - those
    kernels) switches."""
    if any(len(ways) > 1 for ways in layers):
        owners: dict[tuple, set[int]] = {}
        for i, ways in enumerate(layers):
            for way in ways:
                for sets in way:
                    for pair in sets:
                        owners.setdefault(pair, set()).add(i)
        own = [[[pair for sets in way for pair in sets if owners[pair] == {i}] for way in ways]
               for i, ways in enumerate(layers)]
        bound = [i for i, ways in enumerate(own) if ways and all(ways)]
        kernels = {kernel for i in bound for way in own[i] for kernel, _ in way}
        return max(0, len(bound) - len(kernels))
    in_force: dict[str, tuple] = {}

    def one_pass() -> int:
        n = 0
        for ways in layers:
            for sets in (ways[0] if ways else []):
                for kernel, params in sets:
                    if in_force.get(kernel) != params:
                        in_force[kernel] = params
                        n += 1
        return n
    one_pass()           # the first pass starts from the database: the loop's passes are what a run times
    return one_pass()
