"""What `compare tune` prints of a tuning: its depth per problem and per net
(`--show`, and after every run), and what the check in force found."""
from __future__ import annotations

import textwrap

from tabulate import tabulate

from ...clblast import problems as clblast_problems
from ...clblast.record import Store, net_key
from ...clblast.tuned import Tuning, percent
from . import Asked, Target
from .search import Search


def fresh_line(checked: list[tuple[str, str, str | None]]) -> str:
    """What Search.check_fresh and the nets' choices found, in one line: sets checked in force before any
    call, and those wrong there (no longer a choice)."""
    wrong = [f"{label} on {key} ({why})" for key, label, why in checked if why]
    return (f"checked in force before any call, as a backend runs them: {len(checked)} set-problem pairs, "
            f"{len(wrong)} wrong" + (": " + "; ".join(wrong) if wrong else ""))


def depth_rows(search: Search) -> list[list]:
    """One row per problem, in the search's order: what it costs a pass with CLBlast's database (all its
    calls), how much of CLBlast's default search was tried (all its stages), the best time found, and the
    verified choice against the database."""
    rows = []
    for rec in search.records.values():
        v = rec.verified
        win, db = (v.winner(), v.database()) if v else (None, None)
        cost = search.cost(rec.problem)
        verified = "not yet" if win is None else (
            f"{win.label} {win.ms:.4f}" + (f" (db {db.ms:.4f})" if db and db.ms and win is not db else ""))
        done, total = rec.depth()
        best = [b for b in (stage.best_ms() for stage in rec.stages.values()) if b is not None]
        rows.append([rec.problem.key, f"{cost:.4f}" if cost is not None else "-",
                     f"{done:,}/{total:,} {percent(done, max(total, 1))}",
                     f"{min(best):.4f}" if best else "-", verified])
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


def show(target: Target, nets, batch: int | None, as_tuner: list[str] | None = None) -> str:
    """The depth of the tuning of the nets' problems on this device: first per net and what to run next, then a
    row per problem (0% where none was searched), within 100 columns."""
    store, asked = target.store(), Asked.of(nets, batch, as_tuner)
    search = Search("", store, target.limits, asked.problems, calls=asked.calls, layers=asked.layers)
    records = list(search.records.values())
    done = sum(r.depth()[0] for r in records)
    total = sum(r.depth()[1] for r in records)
    complete = sum(r.complete() for r in records)
    verified = sum(1 for r in records if r.verified)
    head = [f"CLBlast's tuning of {store.device.name} ({store.device.driver}, {store.device.clblast}):",
            f"{percent(done, max(total, 1))} of CLBlast's default search ({done:,} of {total:,} configurations),",
            f"complete on {complete} of {len(records)} problems, verified on {verified}; kept in {store.folder}"]
    if as_tuner is None:
        head += net_lines(store, search.records, nets, batch)
    names = ",".join(n.name for n in nets)
    at = f" --batch {batch}" if batch else ""
    if complete < len(records):
        head.append(f"next: `compare tune --net {names}{at} --scope clblast --budget-s 3600` goes on where this "
                    f"stopped")
    elif verified < len(records):
        head.append(f"next: `compare tune --net {names}{at} --scope clblast --verify-only --budget-s 600`")
    else:
        head.append(f"done: `compare run --net {names}{at}` runs CLBlast with these")
    table = tabulate(depth_rows(search), headers=["problem", "db ms/pass", "tried", "best ms", "verified (ms)"],
                     disable_numparse=True, maxcolwidths=[30, None, None, None, 24])
    return "\n".join(textwrap.fill(line, 100, subsequent_indent="  ", break_on_hyphens=False)
                     for line in head) + "\n" + table
