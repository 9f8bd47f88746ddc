"""The `tinygrad` scope of `compare tune`: tinygrad's schedule search (BEAM)
of the kernels of the nets' passes, under the budget, resumable (loop.py),
its choices kept in the device's tuning folder
(backends/peers/tinygrad_choices.py) for the `tinygrad` backend's searched
modes.  The searchers: one child on this device (session.py), or one per
device of the kind on a farm's workers (farm.py)."""
from __future__ import annotations

from nets.errors import Unsupported, UserError

from ...peers.tinygrad_choices import Survey, net_key
from . import loop


def check(request, place) -> None:
    from .session import require
    require()
    if not place.on_farm:   # on a farm the store is named by the kind found there
        from .session import store_for
        request.harness.check_writable(str(store_for(request.runtime()).path), "tinygrad's choices file")


def run(request, budget, place) -> list[str]:
    if not place.on_farm:
        return _run_here(request, budget)
    from . import farm
    return farm.run(request, budget, place, loop.search)


def _run_here(request, budget) -> list[str]:
    from .session import LocalSearcher, store_for
    try:
        searcher = LocalSearcher(request.runtime().device, store_for(request.runtime()))
    except Unsupported as exc:
        raise UserError(f"--scope tinygrad: {exc}") from None
    try:
        return loop.search(request, store_for(request.runtime()), [searcher], budget).lines()
    except BaseException:   # an interrupt wherever it lands (the survey, between kernels): no grace to wait out
        searcher.stop()
        raise
    finally:
        searcher.close()


def show(request, place) -> str:
    """The depth of tinygrad's search on this device, per net, from the choices file alone ("" where
    tinygrad is missing or nothing was searched here and the scope was not asked for)."""
    from ...peers.tinygrad_device import tinygrad_version
    from .session import store_for
    if tinygrad_version() is None:
        return "" if request.scopes is None else "tinygrad: not installed here"
    store = store_for(request.runtime())
    if request.scopes is None and not store.path.exists():
        return ""
    choices = store.load()
    width = request.width
    info = request.runtime().info
    lines = [f"tinygrad search of {info['name']} ({info['driver']}, tinygrad {store.device.tinygrad}), "
             f"{store.path}: {len(choices.kernels)} kernels searched"
             + (f" at widths {', '.join(map(str, choices.widths()))}" if choices.kernels else "")]
    for net in request.nets:
        key = net_key(net.name, request.batch_of(net))
        lines.append(choices.depth_words(key, width))
        survey = choices.nets.get(Survey(key, width).name)
        for k, name, ms in survey.kernels if survey else ():
            c = choices.kernels.get(k)
            ms = c.heuristic_ms if c is not None else ms
            took = f"{ms:.4g} ms on the heuristics" if ms is not None else "untimed on the heuristics"
            done = ("not searched" if c is None else f"searched in {c.search_s:.0f} s"
                    + (f" on {c.where}" if c.where else "") + ": "
                    + (f"{c.searched_ms:.4g} ms" if c.searched_ms is not None else "untimed")
                    + (" (the heuristics' schedule, faster than the search's best)" if c.kept == "heuristics" else ""))
            lines.append(f"  {name}: {took}; {done}")
    return "\n".join(lines)

