"""CLBlast's tuner, as one part: what is asked (the problems of some nets),
the device tuned (Target), where the children run (children.LocalPool
here, farm.DaskPool over a Dask cluster), and a Budget; `tune` runs the
phases in order (costs, search, verification, the check in force from
the start, one set per kernel for each net) within it and returns what it
did.  The search (search.py), its children (child.py, children.py,
watch.py), the spaces (space.py) and the measurement (measure.py) live
here; the tuning files they fill are backends/clblast/record.py's, which
the CLBlast backends read.  Dask is imported only by farm.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nets.errors import UserError

from ...clblast import problems as clblast_problems
from ...clblast.record import Store, net_key
from ...store import DeviceId
from ..budget import Budget
from .phases import Phases
from .search import Search, SearchFailed
from .space import DeviceLimits, limits_from_device
from .verify import verify_net

__all__ = ["Asked", "Budget", "Outcome", "Search", "SearchFailed", "Target", "tune"]


@dataclass(frozen=True)
class Target:
    """The device kind tuned: what names its tuning folder, and the limits its configuration spaces
    depend on (the same on every device of the kind)."""

    device: DeviceId
    limits: DeviceLimits
    gpu: bool = False

    @classmethod
    def of(cls, rt, clblast: str) -> "Target":
        return cls(DeviceId.of(rt.info, clblast), limits_from_device(rt.device), "GPU" in rt.info["type"])

    def store(self) -> Store:
        return Store(self.device)


@dataclass
class Asked:
    """The problems to tune: each with the 'net:layer' names posing it, the calls one pass of the nets
    makes of each, the nets' layers as CLBlast compositions, and each net's calls (its choice weighs
    them); `as_tuner`: the Xgemm kernel alone instead (no net-wide choice)."""

    problems: dict
    calls: dict
    layers: list
    nets: dict = field(default_factory=dict)   # 'lenet batch 100' -> {problem: calls per pass}
    as_tuner: bool = False

    @classmethod
    def of(cls, nets, batch: int | None, as_tuner: list[str] | None = None,
           routines: list[str] | None = None) -> "Asked":
        found = net_problems(nets, batch, as_tuner)
        if routines is not None:
            found = {p: layers for p, layers in found.items() if p.routine in routines}
        calls = net_calls(nets, batch, as_tuner)
        layers = [] if as_tuner is not None else [
            ways for net in nets for ways in clblast_problems.net_compositions(net, batch or net.default_batch)]
        each = {} if as_tuner is not None else {
            net_key(n.name, batch or n.default_batch): clblast_problems.net_calls(n, batch or n.default_batch)
            for n in nets}
        return cls(found, calls, layers, each, as_tuner is not None)


def net_problems(nets, batch: int | None, as_tuner: list[str] | None = None) -> dict:
    """Every CLBlast problem of the nets, with the 'net:layer' names that pose it; with `as_tuner` (layer
    names, or ['all']) instead those layers' im2col GEMMs as CLBlast's xgemm tuner runs them (the kernel
    alone), so what our search finds can be held against the tuner's own figures."""
    found: dict = {}
    for net in nets:
        for problem, layers in clblast_problems.net_problems(net, batch or net.default_batch).items():
            if as_tuner is not None:
                asked = [n for n in layers if "all" in as_tuner or n in as_tuner]
                if not asked or problem.routine != clblast_problems.GEMM or problem.sizes[3] != 1:
                    continue
                problem, layers = clblast_problems.xgemm_alone(problem), asked
            found.setdefault(problem, []).extend(f"{net.name}:{name}" for name in layers)
    if as_tuner is not None and not found:
        raise UserError(f"--as-tuner {','.join(as_tuner)}: no batch-1 GEMM of {', '.join(n.name for n in nets)} is "
                        f"posed by those layers; name conv layers of a batch-1 net, or 'all'")
    return found


def net_calls(nets, batch: int | None, as_tuner: list[str] | None = None) -> dict:
    """How many calls of each of net_problems' problems one pass of every net makes, summed over the nets;
    with `as_tuner`, 1 each (the kernel alone is no call of a net)."""
    if as_tuner is not None:
        return dict.fromkeys(net_problems(nets, batch, as_tuner), 1)
    calls: dict = {}
    for net in nets:
        for problem, n in clblast_problems.net_calls(net, batch or net.default_batch).items():
            calls[problem] = calls.get(problem, 0) + n
    return calls


@dataclass
class Outcome:
    search: Search
    verified: list   # the problems verified this run


def tune(target: Target, asked: Asked, budget: Budget, pool, progress=lambda s: None,
         verify_only: bool = False) -> Outcome:
    """Search, then verify each problem, then check the fastest sets in force from the start, then choose
    one set per kernel for each net (or only verify), each phase until its deadline in `budget` (phases.py).
    Raises SearchFailed where the children cannot run at all."""
    search = Search(pool, target.store(), target.limits, asked.problems, progress=progress, calls=asked.calls,
                    layers=asked.layers,
                    nets={net: [p for p in calls if p in asked.problems] for net, calls in asked.nets.items()})
    phases = Phases(budget)
    if not verify_only:
        search.measure_costs(budget.wall_s(phases.costs()))
        search.search(budget.share(budget.left(phases.search_end())))
    verified = search.verify(budget.wall_s(phases.verify()))   # a search that finished early leaves its time here
    search.check_fresh(budget.wall_s(phases.fresh()))
    for net, calls in asked.nets.items():   # weighed by the calls a pass makes: what the net pays
        verify_net(search, net, calls, budget.wall_s(phases.nets()))
    return Outcome(search, verified)
