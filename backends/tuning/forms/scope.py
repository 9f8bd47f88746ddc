"""The `forms` scope of `compare tune`: our hand-written backends' prepare-time
choices measured once per net (search.py), each net's output checked against
the float64 oracle (the harness's check), kept in the forms cache per device.
It runs here only (scopes.py: the driver keeps it off a farm)."""
from __future__ import annotations

from nets.errors import UserError


def _runs(request) -> list[tuple]:
    """(net, the backends of search.BACKENDS that run it)."""
    from ... import backend_class
    from .search import BACKENDS
    out = []
    for net in request.nets:
        names = [b for b in BACKENDS if backend_class(b).unsupported(net) is None]
        if names:
            out.append((net, names))
    return out


def check(request, place) -> None:
    from ... import cache
    from ...handwritten.forms_tuned import KIND
    if not _runs(request) and request.scopes == ["forms"]:
        raise UserError(f"cannot tune forms for {request.nets[0].name}: neither vectorised nor vectorised-tiled "
                        f"runs it")
    request.harness.check_writable(cache.path(KIND), "the forms' cache")


def run(request, budget, place) -> list[str]:
    runs = _runs(request)
    if not runs:
        return []
    from tabulate import tabulate

    from ...handwritten.forms_tuned import KIND, TunedForms
    from . import search
    rt = request.runtime()
    entry, rows, said = search.tune_forms(rt, [(net, request.batch_of(net), names) for net, names in runs], budget,
                                          request.harness.checker_for, request.progress,
                                          kept=TunedForms.for_device(rt.info).entry)
    if not rows:
        return said
    if not entry["winograd"]:
        said.append(f"forms: no layer of {', '.join(n.name for n, _ in runs)} has forms to choose from "
                    f"(Winograd's: a 3x3 stride-1 conv)")
    kept = request.harness.store_cache(KIND, rt.info, entry, "the forms' cache", merge=search.merged)
    request.unwritten.append(kept.problem)
    return [tabulate(rows, headers=["scope", "backend", "net", "layers", "measured", "chosen", "s"],
                     disable_numparse=True), *said,
            f"forms: {len(entry['winograd'])} layers' Winograd choices written to {kept.path or 'nowhere'}"]


def show(request, place) -> str:
    return ""   # one choice per layer: `compare run` says which it used (config["winograd"][layer]["how"])
