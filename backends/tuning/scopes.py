"""The scopes of `compare tune`, registered as backends are: a name, the
module that runs it (imported only when asked for, so a missing library
makes its scope unavailable and the others still run), its part of the
budget beside the others asked for, and whether a farm spreads it.

A scope's module (its scope.py) has three functions, each given the
Request and the place the driver chose (place.py: here, or a farm's
workers): `check(request, place)` refuses in one line, before any budget
is spent, what it cannot do; `run(request, budget, place) -> list[str]`
searches within its share of the budget (a deadline it asks: budget.py)
and says what it did; `show(request, place) -> str` says how deep the
search of the nets went on this device, from its files alone.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from nets.errors import UserError


@dataclass(frozen=True)
class Scope:
    name: str
    module: str
    weight: float    # its part of the budget beside the other scopes asked for
    farm: bool       # `--scheduler` spreads it over a farm's workers
    help: str


SCOPES: dict[str, Scope] = {s.name: s for s in (
    Scope("clblast", "backends.tuning.clblast.scope", 9.0, True,
          "CLBlast's own default search on each problem of the nets, then the best verified against its database"),
    Scope("tiles", "backends.tuning.tiles.scope", 1.0, False,
          "vectorised-tiled's tiles per conv layer (a tenth of the budget beside CLBlast's)"),
    Scope("forms", "backends.tuning.forms.scope", 1.0, False,
          "vectorised's and vectorised-tiled's Winograd forms per 3x3 conv, measured once as a run's prepare "
          "measures them (run after tiles: it uses them)"),
    Scope("tinygrad", "backends.tuning.tinygrad.scope", 10.0, True,
          "tinygrad's schedule search (BEAM) of each kernel of the nets, the costliest first"),
    Scope("opencv", "backends.tuning.opencv.scope", 1.0, False,
          "OpenCV DNN's auto-tuning of its OpenCL convolutions (ocl4dnn) for the nets' layers"),
)}
DEFAULT = ("clblast", "tiles")


def parse(text: str) -> list[str]:
    """--scope's names, checked: 'all' or a comma-separated list of SCOPES."""
    if text.strip() == "all":
        return list(SCOPES)
    names = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    bad = [s for s in names if s not in SCOPES]
    if bad or not names:
        raise UserError(f"--scope takes {', '.join(SCOPES)} or all (comma-separated), not {text!r}")
    return names


def module(name: str):
    return importlib.import_module(SCOPES[name].module)
