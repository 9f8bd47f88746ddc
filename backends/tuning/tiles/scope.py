"""The `tiles` scope of `compare tune`: vectorised-tiled's tiles on every
conv layer of the nets it runs (search.py), each candidate checked against
the float64 oracle (the harness's check), kept in the tiles' cache per
device.  It runs here only (scopes.py: the driver keeps it off a farm)."""
from __future__ import annotations

from nets.errors import UserError


def check(request, place) -> None:
    from ... import backend_class, cache
    from ...handwritten.tiles_tuned import KIND
    tiled_backend = backend_class("vectorised-tiled")
    request.tiled = [n for n in request.nets if tiled_backend.unsupported(n) is None]
    skipped = [n for n in request.nets if n not in request.tiled]
    if skipped and not request.tiled and request.scopes == ["tiles"]:
        raise UserError(f"cannot tune tiles for {skipped[0].name}: {tiled_backend.unsupported(skipped[0])}")
    if skipped:
        request.progress(f"tiles: {', '.join(n.name for n in skipped)} left out (vectorised-tiled cannot run "
                         f"{'it' if len(skipped) == 1 else 'them'})")
    request.harness.check_writable(cache.path(KIND), "the tiles' cache")


def run(request, budget, place) -> list[str]:
    if not request.tiled:
        return []
    from tabulate import tabulate

    from ...handwritten.tiles_tuned import KIND
    from . import search
    rt = request.runtime()
    tiles, rows = search.tune_tiles(rt, request.tiled, [request.batch_of(n) for n in request.tiled],
                                   budget, request.harness.checker_for, request.progress)
    kept = request.harness.store_cache(KIND, rt.info, tiles, "the tiles' cache", merge=search.merged)
    request.unwritten.append(kept.problem)
    return [tabulate(rows, headers=["scope", "tuner", "for", "sizes", "tried", "matched", "best", "s"],
                     disable_numparse=True),
            f"vectorised-tiled: {len(tiles['layers'])} conv layers timed in {tiles['took_s']:.0f} s; "
            f"written to {kept.path or 'nowhere'}"]


def show(request, place) -> str:
    return ""   # the tiles' cache holds one choice per layer: `compare run` says which it used
