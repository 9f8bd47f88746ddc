"""The search of `compare tune --scope forms`: each net prepared once by
`vectorised` and `vectorised-tiled` as a run prepares it (every form of every
layer built, checked against the layer's direct kernel and timed: winograd.py),
with the device's committed tiles, and its output checked by the caller's
`checker_for` (the harness's float64 oracle); the forms each layer chose are
kept per device (backends/handwritten/forms_tuned.py reads them back).  A
net whose output fails keeps nothing."""
from __future__ import annotations

import datetime as _dt

from nets import Net
from nets.errors import Unsupported
from nets.weights import init_weights, make_input

from ...handwritten.forms_tuned import form_key
from ...handwritten.tiled import TiledNet
from ...handwritten.tiles_tuned import TunedTiles
from ...handwritten.vectorised import VectorisedNet
from ..budget import Budget

BACKENDS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}


def _prepared(rt, backend: str, net: Net, weights: dict, batch: int):
    if backend == "vectorised-tiled":   # the direct kernel a Winograd form must beat: the committed tile's
        return TiledNet(rt, net, weights, batch, tuned=TunedTiles.for_device(rt.info))
    return BACKENDS[backend](rt, net, weights, batch)


def choices(rt, backend: str, net: Net, batch: int, checker_for) -> tuple[dict[str, str], dict[str, list[str]], int,
                                                                         str | None]:
    """(layer key -> the Winograd form `backend` chose at prepare, layer key -> the forms it was chosen from,
    layers measured, why none is kept)."""
    weights = init_weights(net, 0)
    x = make_input(net, batch, 0)
    try:
        prepared = _prepared(rt, backend, net, weights, batch)
    except Unsupported as exc:
        return {}, {}, 0, f"{backend} cannot run {net.name}: {str(exc).splitlines()[0]}"
    try:
        if not checker_for(net, weights, x)(prepared.forward(x)):
            return {}, {}, 0, f"{backend}'s output of {net.name} failed the check against float64"
        record = prepared.config.get("winograd", {})
        found, offered = {}, {}
        for i, layer in enumerate(net.layers):
            chosen = record.get(layer.name, {}).get("chosen")
            if chosen is not None:
                key = form_key(backend, batch, net.in_shape(i), layer)
                found[key] = chosen
                if "ms" in record[layer.name]:   # a run measures again where the code offers a form not among these
                    offered[key] = sorted({*record[layer.name]["ms"], *record[layer.name].get("refused", {})})
        measured = sum(1 for r in record.values() if "ms" in r)
        return found, offered, measured, None
    finally:
        prepared.close()


def pair_label(backend: str, net: Net, batch: int) -> str:
    return f"{backend} {net.name} batch {batch}"


def tune_forms(rt, runs: list[tuple[Net, int, list[str]]], budget: Budget, checker_for, progress=lambda s: None,
               kept: dict | None = None):
    """Each (net, batch, its backends) of `runs` until `budget` expires, but those the device's entry `kept`
    says were measured (a tune goes on where the last stopped): the forms cache's entry, one table row
    each, and the lines saying what was left out."""
    found, offered, rows, said, pairs_done = {}, {}, [], [], {}
    done = (kept or {}).get("measured", {}) if isinstance((kept or {}).get("measured"), dict) else {}
    pairs = [(net, batch, b) for net, batch, names in runs for b in names]
    skipped = [pair_label(b, n, bt) for n, bt, b in pairs if pair_label(b, n, bt) in done]
    if skipped:
        said.append(f"forms: {', '.join(skipped)} kept as measured before (remove the device's entry from the forms' "
                    f"cache to measure again)")
    pairs = [(n, bt, b) for n, bt, b in pairs if pair_label(b, n, bt) not in done]
    for k, (net, batch, backend) in enumerate(pairs):
        if budget.expired():
            said.append(f"forms: the budget ran out before {', '.join(f'{b} on {n.name}' for n, _, b in pairs[k:])}")
            break
        progress(f"forms {backend} {net.name}: every form of every layer built and timed")
        got, among, measured, why = choices(rt, backend, net, batch, checker_for)
        budget.worked()
        if why:
            said.append(f"forms: {why}; nothing kept")
            continue
        found.update(got)
        offered.update(among)
        pairs_done[pair_label(backend, net, batch)] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        winograd = sum(1 for f in got.values() if f != "direct")
        rows.append(["forms", backend, f"{net.name} batch {batch}", len(got), measured,
                     f"{winograd} Winograd, {len(got) - winograd} direct", f"{budget.spent():.0f}"])
    entry = {"device": rt.info["name"], "tuned": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "winograd": found, "offered": offered, "measured": pairs_done}
    return entry, rows, said


def merged(there: dict | None, new: dict) -> dict:
    """The device's forms after a tune: the layers it measured over those measured before (another net's stay)."""
    old = there.get("winograd") if isinstance(there, dict) else None
    if not isinstance(old, dict):
        return new
    pairs = there.get("measured") if isinstance(there.get("measured"), dict) else {}
    among = there.get("offered") if isinstance(there.get("offered"), dict) else {}
    return {**new, "winograd": {**old, **new["winograd"]}, "offered": {**among, **new.get("offered", {})},
            "measured": {**pairs, **new.get("measured", {})}}
