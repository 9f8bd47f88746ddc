"""`tune(request)`: the request checked whole before any budget is spent,
the budget shared among the scopes by weight (each scope's Budget starts
when it does), each scope run here or on the farm, a Summary back.
`show(request)`: each scope's depth on this device, from its files."""
from __future__ import annotations

import textwrap

from nets.errors import UserError

from . import scopes as registry
from .budget import Budget
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
    return names


def check(request: Request) -> list[str]:
    """The scopes to run, each scope's own check passed (before any budget is spent)."""
    if not request.budget_s > 0:
        raise UserError(f"--budget-s must be a positive number of seconds, not {request.budget_s}")
    if not request.nets:
        raise UserError("--net names no net: give one or more, comma-separated")
    names = resolve(request)
    for name in names:
        registry.module(name).check(request)
    return names


def tune(request: Request) -> Summary:
    names = check(request)
    budget = Budget(request.budget_s)
    seconds = budget.shares({n: registry.SCOPES[n].weight for n in names})
    summary = Summary()
    for name in names:
        summary.lines += registry.module(name).run(request, Budget(seconds[name]))
    where = (request.runtime().info["name"] if request.scheduler is None
             else f"the workers of {request.scheduler}")
    summary.lines.append(f"on {where}, budget {request.budget_s:.0f} s; `compare run` uses these "
                         f"(--clblast-params database ignores CLBlast's); run it again to go deeper")
    summary.unwritten = [u for u in request.unwritten if u]
    return summary


def show(request: Request) -> str:
    """How deep each scope asked for (default: every scope with files here) went on this device."""
    names = list(request.scopes) if request.scopes is not None else list(registry.SCOPES)
    out = []
    for name in names:
        text = registry.module(name).show(request)
        if text:
            out.append(text)
    lines = "\n".join(out).splitlines() if out else ["nothing tuned for these nets on this device yet"]
    # a terminal of 100 columns: a long line wraps at its words, indented under itself
    return "\n".join(textwrap.fill(line, WIDTH, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 4),
                                   break_on_hyphens=False)
                     if len(line) > WIDTH else line for line in lines)
