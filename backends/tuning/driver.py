"""`tune(request)`: the request checked whole before any budget is spent,
the place decided (here or the farm: place.py), the budget shared among
the scopes by weight (each scope's share starts when it does, on the one
clock), each scope handed its share and the place, a Summary back.
`show(request)`: each scope's depth on this device, from its files."""
from __future__ import annotations

import textwrap
from typing import Callable

from nets.errors import UserError

from . import place as places
from . import scopes as registry
from .budget import Budget, default_clock
from .request import Request, Summary

WIDTH = 100


def resolve(request: Request) -> list[str]:
    """The scopes the request runs (None asked: the default), each refused in one line where the request
    rules it out; with --scheduler a default scope that runs only here (our tiles) is left out."""
    asked = request.scopes
    names = list(asked) if asked is not None else list(registry.DEFAULT)
    if request.as_tuner is not None:
        if asked is not None and names != ["clblast"]:
            raise UserError("--as-tuner searches CLBlast's Xgemm kernel alone; it takes --scope clblast")
        names = ["clblast"]
    if request.scheduler is not None:
        here_only = [n for n in names if not registry.SCOPES[n].farm]
        if here_only and asked is not None:
            raise UserError(f"--scheduler spreads {', '.join(n for n in registry.SCOPES if registry.SCOPES[n].farm)}"
                            f" over the workers; {', '.join(here_only)} run here: tune "
                            f"{'it' if len(here_only) == 1 else 'them'} without --scheduler")
        names = [n for n in names if registry.SCOPES[n].farm]
    elif request.every_kind:
        raise UserError("--devices all tunes every device kind among a farm's workers: it needs --scheduler")
    return [n for n in registry.SCOPES if n in names]   # the registry's order: forms after the tiles it uses


def check(request: Request, place=None) -> list[str]:
    """The scopes to run, each scope's own check passed (before any budget is spent)."""
    place = place or places.of(request)
    if not request.budget_s > 0:
        raise UserError(f"--budget-s must be a positive number of seconds, not {request.budget_s}")
    if not request.nets:
        raise UserError("--net names no net: give one or more, comma-separated")
    names = resolve(request)
    for name in names:
        registry.module(name).check(request, place)
    return names


def tune(request: Request, clock: Callable[[], float] | None = None) -> Summary:
    """`clock`: what the budget is counted on (None: the wall clock, or budget.Steps under the tests' hook)."""
    place = places.of(request)
    names = check(request, place)
    budget = Budget(request.budget_s, clock or default_clock())
    seconds = budget.shares({n: registry.SCOPES[n].weight for n in names})
    summary = Summary()
    try:
        for name in names:
            summary.lines += registry.module(name).run(request, budget.share(seconds[name]), place)
    finally:
        place.close()
    where = place.words(request)
    summary.lines.append(f"on {where}, budget {request.budget_s:.0f} s; `compare run` uses these "
                         f"(--clblast-params database ignores CLBlast's); run it again to go deeper")
    summary.unwritten = [u for u in request.unwritten if u]
    return summary


def shown(request: Request) -> list[tuple[str, str]]:
    """(scope, how deep its search went on this device, in lines; "" where it has nothing to say) for each
    scope asked for (default: every scope)."""
    names = list(request.scopes) if request.scopes is not None else list(registry.SCOPES)
    place = places.of(request)
    try:
        return [(name, registry.module(name).show(request, place) or "") for name in names]
    finally:
        place.close()


def show(request: Request) -> str:
    """How deep each scope asked for (default: every scope with files here) went on this device."""
    out = [text for _, text in shown(request) if text]
    lines = "\n".join(out).splitlines() if out else ["nothing tuned for these nets on this device yet"]
    # a terminal of 100 columns: a long line wraps at its words, indented under itself
    return "\n".join(textwrap.fill(line, WIDTH, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 4),
                                   break_on_hyphens=False)
                     if len(line) > WIDTH else line for line in lines)
