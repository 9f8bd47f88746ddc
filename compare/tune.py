"""`compare tune`: CLBlast tuned as CLBlast means it, and our tiles, under
a time budget.  The searches themselves belong to their backends
(backends/clblast/search.py, backends/handwritten/tiles_search.py); this module splits the
budget, shows progress, and prints the depth reached (`--show`).

Budget: the CLBlast scope gets its share for the search of every problem
of the nets, less a part kept to verify what was found; of the search's
part, a little first times CLBlast's database on each problem not timed
yet, so the search goes by what each problem costs a pass, the costliest
first.  It resumes where the last run stopped, so the depth only grows.
"""
from __future__ import annotations

import time

from tabulate import tabulate

from backends.clblast import problems as clblast_problems
from backends.clblast.record import DeviceId, Store, net_key
from backends.clblast.search import COSTS_CAP_S, COSTS_SHARE, VERIFY_SHARE, Search, SearchFailed, verify_net
from backends.clblast.space import limits_from_device
from backends.clblast.tuned import Tuning, clblast_version, percent
from backends.handwritten import tiles_search
from backends.opencl.runtime import device_index

from nets.errors import UserError

from . import oracle
from .checking import compare_arrays

SCOPES = ("clblast", "tiles", "tinygrad")   # tinygrad: backends/peers/tinygrad_search.py


def _oracle_checker(one, weights, x):
    """A test of a tile candidate's output against the float64 oracle, as every backend's is checked."""
    ref = oracle.forward(one, weights, x)[-1]
    return lambda out: compare_arrays(out, ref).passed


def tune_tiles(rt, nets, batches: list[int], budget_s: float, progress):
    """vectorised-tiled's tiles on every conv layer of the nets, each candidate checked against the oracle."""
    return tiles_search.tune_tiles(rt, nets, batches, budget_s, _oracle_checker, progress)


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


def net_calls(nets, batch: int | None, as_tuner: list[str] | None = None) -> dict[clblast_problems.Problem, int]:
    """How many calls of each of net_problems' problems one pass of every net makes, summed over the nets;
    with `as_tuner`, 1 each (the kernel alone is no call of a net)."""
    if as_tuner is not None:
        return dict.fromkeys(net_problems(nets, batch, as_tuner), 1)
    calls: dict[clblast_problems.Problem, int] = {}
    for net in nets:
        for problem, n in clblast_problems.net_calls(net, batch or net.default_batch).items():
            calls[problem] = calls.get(problem, 0) + n
    return calls


def net_layers(nets, batch: int | None, as_tuner: list[str] | None = None) -> list:
    """Every net's layers as their CLBlast compositions (problems.net_compositions); none with `as_tuner`."""
    if as_tuner is not None:
        return []
    return [ways for net in nets for ways in clblast_problems.net_compositions(net, batch or net.default_batch)]


def store_for(rt) -> Store:
    return Store(DeviceId.of(rt.info, clblast_version()))


def tune_clblast(rt, nets, batch, budget_s: float, jobs: int, progress, verify_only: bool = False,
                 as_tuner: list[str] | None = None, routines: list[str] | None = None) -> tuple[Search, list]:
    """Search, then verify each problem, then choose one set per kernel for each net (or only verify);
    (the search, the problems verified this run).  `as_tuner`: see net_problems (no net-wide choice);
    `routines`: search and verify only those routines' problems (the net-wide choice still weighs all)."""
    from backends.clblast.library import require_library
    require_library()
    asked = net_problems(nets, batch, as_tuner)
    if routines is not None:
        asked = {p: layers for p, layers in asked.items() if p.routine in routines}
    search = Search(device_index(rt.device), store_for(rt), limits_from_device(rt.device),
                    asked, jobs, progress, net_calls(nets, batch, as_tuner), net_layers(nets, batch, as_tuner))
    end = time.monotonic() + budget_s
    try:
        if not verify_only:
            search_end = time.monotonic() + budget_s * (1 - VERIFY_SHARE)
            search.measure_costs(min(budget_s * (1 - VERIFY_SHARE) * COSTS_SHARE, COSTS_CAP_S))
            search.search(max(search_end - time.monotonic(), 0.0))
        verify_s = max(end - time.monotonic(), 0.0)   # a search that finished early leaves its time to this
        verified = search.verify(verify_s * 0.7)
        search.check_fresh(max(end - time.monotonic(), 0.0) * 0.5)
        for net in nets if as_tuner is None else ():
            b = batch or net.default_batch
            # weighed by the calls a pass makes: what the net pays
            verify_net(search, net_key(net.name, b), clblast_problems.net_calls(net, b), end - time.monotonic())
    except SearchFailed as exc:
        raise UserError(str(exc)) from None
    return search, verified


def fresh_line(checked: list[tuple[str, str, str | None]]) -> str:
    """What Search.check_fresh and the nets' choices found, in one line: sets checked in force before any
    call, and those wrong there (no longer a choice)."""
    wrong = [f"{label} on {key} ({why})" for key, label, why in checked if why]
    return (f"checked in force before any call, as a backend runs them: {len(checked)} set-problem pairs, "
            f"{len(wrong)} wrong" + (": " + "; ".join(wrong) if wrong else ""))


def depth_rows(search: Search) -> list[list]:
    """Per problem, in the search's order: what it costs a pass with CLBlast's database (all its calls, and
    those of the cheapest composition of each layer: problems.cheapest_costs), the verified choice;
    per stage: tried against CLBlast's default count, the best time."""
    rows = []
    for rec in search.records.values():
        v = rec.verified
        win, db = (v.winner(), v.database()) if v else (None, None)
        cost, cheapest = search.cost(rec.problem), search.cheapest_cost(rec.problem)
        verified = "not yet" if win is None else (
            f"{win.label}: {win.ms:.4f} ms" + (f" (database {db.ms:.4f})" if db and db.ms and win is not db else ""))
        for n, stage in enumerate(rec.stages.values()):
            best = stage.best_ms()
            head = [rec.problem.key, f"{cost:.4f}" if cost is not None else "-",
                    f"{cheapest:.4f}" if cheapest is not None else "-"] if n == 0 else ["", "", ""]
            rows.append(head + [stage.stage, f"{stage.done()}/{stage.default_count}",
                                percent(stage.done(), max(stage.default_count, 1)),
                                f"{best:.4f}" if best is not None else "-", verified if n == 0 else ""])
    return rows


def net_lines(store: Store, records: dict, nets, batch) -> list[str]:
    """`records`: the nets' problems' (as the search loaded them).  Per net: its depth (with the share of
    CLBlast's time its complete problems make, once known), and the one set per kernel chosen for all its
    calls, against the database, summed over its layers."""
    out = []
    for net in nets:
        b = batch or net.default_batch
        name = net_key(net.name, b)
        tuning = Tuning(records, clblast_problems.net_calls(net, b), apply=False,
                        layers=clblast_problems.net_compositions(net, b))
        out.append(f"{name}: {tuning.depth()}")
        choice = store.load_net(name)
        problems = clblast_problems.net_problems(net, b)
        waiting = [p for p in problems if (r := records.get(p)) is None or r.verified is None]
        routines = sorted({p.routine for p in waiting})
        if choice is None:
            out.append(f"{name}: no set per kernel chosen yet ("
                       + (f"{len(waiting)} of its {len(problems)} problems not verified yet)" if waiting else
                          f"its problems are verified, but choosing across them did not finish: "
                          f"`compare tune --net {net.name} --verify-only --budget-s 600`)"))
            continue
        parts = [f"{family} {f['ms']:.4f} ms against the database's {f['database_ms']:.4f}"
                 + ("" if choice.sets(family) else " (database kept)")
                 for family, f in choice.families.items() if f.get("database_ms") is not None]
        if routines:   # verify_net leaves them with the database until every problem of theirs is verified
            parts.append(f"{', '.join(routines)} keep the database ({len(waiting)} of the net's problems not "
                         f"verified yet)")
        out.append(f"{name}: one set per kernel for the whole net, summed over its layers: " + "; ".join(parts))
    return out


def show(rt, nets, batch: int | None, as_tuner: list[str] | None = None) -> str:
    """The depth of the tuning of the nets' problems on this device (0% where none was searched)."""
    store = store_for(rt)
    search = Search("", store, limits_from_device(rt.device), net_problems(nets, batch, as_tuner),
                    calls=net_calls(nets, batch, as_tuner), layers=net_layers(nets, batch, as_tuner))
    records = list(search.records.values())
    done = sum(r.depth()[0] for r in records)
    total = sum(r.depth()[1] for r in records)
    head = (f"CLBlast tuning of {rt.info['name']} ({rt.info['driver']}, {store.device.clblast}), {store.folder}:\n"
            f"{percent(done, max(total, 1))} of CLBlast's default search ({done:,} of {total:,} configurations), "
            f"complete on {sum(r.complete() for r in records)} of {len(records)} problems, "
            f"verified on {sum(1 for r in records if r.verified)}\n")
    return head + tabulate(depth_rows(search), headers=["problem", "database ms per pass",
                                                       "in the cheapest pass", "stage", "tried",
                                                       "of default", "best ms",
                                                       "verified choice (ms: median wall; Xgemm alone: least kernel event)"],
                           disable_numparse=True) + ("\n" + "\n".join(net_lines(store, search.records, nets, batch))
                                                     if as_tuner is None else "")
