"""Where each side wins, by the kind of work: the layers of a run grouped
by category (conv 3x3, conv 1x1, depthwise 3x3, dense, add, pooling; see
nets/spec.py layer_category) and each backend's time on each group against
CLBlast at its best's, with the 95% interval.

A group's time in one timed pass is the sum of its layers' wall times in
that pass (each layer synced alone), so a group has one value per repeat
and the interval is the same bootstrap as every other ratio's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import analysis as an
from ..results import BackendResult, LayerInfo, RunResult
from ..speedup import Speedup

# what a layer of a file written before categories were recorded is taken as
_BY_KIND = {"maxpool": "pooling", "subsample": "pooling", "global_avgpool": "pooling"}


def category(layer: LayerInfo) -> str:
    return layer.category or _BY_KIND.get(layer.kind, layer.kind)


def groups(res: RunResult) -> dict[str, list[int]]:
    """Category -> the indices of its layers, in the order the net first meets them."""
    found: dict[str, list[int]] = {}
    for i, layer in enumerate(res.net.layers):
        found.setdefault(category(layer), []).append(i)
    return found


def group_values(b: BackendResult, layers: list[int]) -> list[float]:
    """The group's time in each timed pass (ms); [] where a layer kept no raw values."""
    walls = [b.timing.layers[i].wall.values if b.timing.layers[i].wall else [] for i in layers]
    n = min((len(w) for w in walls), default=0)
    return [float(sum(w[r] for w in walls)) for r in range(n)]


@dataclass
class KindCell:
    ms: float | None
    speedup: Speedup | None                    # CLBlast at its best's time here over this backend's; None for itself
    # where these layers' work was done instead: "before" (adds fused into the conv before them),
    # "after" (depthwise convs fused into the 1x1 after them); "" where they were timed
    folded: str = ""
    # where only some were folded: how many were timed; the time and ratio are over those alone,
    # against CLBlast at its best on the same layers
    timed: int | None = None


def _folded(b: BackendResult, res: RunResult, layers: list[int]) -> tuple[str, list[int]]:
    """Where the backend folded these layers into another's kernel ("before" or "after" them:
    analysis.folded; "" where it folded none, or on both sides), and the layers it timed itself."""
    fused = an.folded(b)
    sides = {fused[res.net.layers[i].name][0] for i in layers if res.net.layers[i].name in fused}
    own = [i for i in layers if res.net.layers[i].name not in fused]
    return (sides.pop() if len(sides) == 1 else ""), own


@dataclass
class KindTable:
    categories: list[str]
    layer_counts: list[int]
    mflops: list[float]
    references: list[str | None]               # per category, the fastest CLBlast backend there
    names: list[str]                           # the backends' names, in the order of `backends`
    backends: list[str]                        # their labels (with the mode in use)
    cells: list[list[KindCell]]                # [backend][category]


def kind_table(res: RunResult) -> KindTable | None:
    """None without a timed CLBlast backend that passed.  CLBlast at its best is taken per
    kind of layer: the CLBlast backend fastest on those layers, so each kind
    meets CLBlast's best composition for it.  Only backends whose output passed are in it."""
    timed = an.trusted(res)
    clblast = [b for b in timed if b.family == "clblast"]
    if not clblast:
        return None
    found = groups(res)
    values = {(b.name, cat): group_values(b, layers) for b in timed for cat, layers in found.items()}
    median = {key: float(np.median(v)) if v else None for key, v in values.items()}
    refs = []
    for cat in found:
        ran = [b.name for b in clblast if median[(b.name, cat)] is not None]
        refs.append(min(ran, key=lambda n: median[(n, cat)]) if ran else None)

    def cell(b: BackendResult, cat: str, ref: str | None) -> KindCell:
        where, own = _folded(b, res, found[cat])
        if not own:
            return KindCell(None, None, where)
        mine, theirs, timed_ = values[(b.name, cat)], values.get((ref, cat)), None
        if len(own) < len(found[cat]):   # the folded ones cost ~0 here: held against CLBlast on the rest alone
            mine, timed_ = group_values(b, own), len(own)
            theirs = group_values(res.backend(ref), own) if ref else None
        ms = float(np.median(mine)) if mine else None
        versus = Speedup.of(theirs, mine) if ref and ref != b.name and theirs and mine else None
        return KindCell(ms, versus, where, timed_)
    cells = [[cell(b, cat, ref) for cat, ref in zip(found, refs)] for b in timed]
    return KindTable(list(found), [len(v) for v in found.values()],
                     [sum(res.net.layers[i].flops for i in v) / 1e6 for v in found.values()],
                     refs, [b.name for b in timed], [b.label for b in timed], cells)


def verdicts(t: KindTable) -> list[str]:
    """Per category, in words: the fastest backend against CLBlast at its best,
    or by how much CLBlast at its best beats the next where it is the fastest."""
    out = []
    for k, cat in enumerate(t.categories):
        ran = [i for i, row in enumerate(t.cells) if row[k].ms is not None and row[k].timed is None]
        part = [i for i, row in enumerate(t.cells) if row[k].timed is not None and row[k].speedup is not None]
        folded = {}
        for i, row in enumerate(t.cells):
            if row[k].folded and row[k].timed is None:
                folded.setdefault(row[k].folded, []).append(t.backends[i])
        if t.references[k] is None or (len(ran) < 2 and not part):
            continue
        ref = t.names.index(t.references[k])
        label = f"CLBlast at its best ({t.backends[ref]})"
        also = "".join(f" ({', '.join(who)} folded these into the layers {where} them: their time is counted there)"
                       for where, who in folded.items())
        parts = [_part(t.backends[i], t.cells[i][k], t.layer_counts[k], label) for i in part]
        also += "".join(f" ({p})" for p in parts)
        head = f"{cat} ({t.layer_counts[k]} layer{'s' if t.layer_counts[k] > 1 else ''})"
        if len(ran) < 2:   # no one else timed them all: only what the folding backends did on the rest
            out.append(f"{head}: " + "; ".join(parts) + ".")
            continue
        fastest = min(ran, key=lambda i: t.cells[i][k].ms)
        if fastest == ref:
            nxt = min((i for i in ran if i != ref), key=lambda i: t.cells[i][k].ms)
            s = t.cells[nxt][k].speedup
            out.append(f"{head}: **CLBlast wins**: {label} is {s.inverse().bounds()} faster than the next, "
                       f"{t.backends[nxt]}" + ("" if s.clear else f" ({s.words()})") + also + ".")
        else:
            s = t.cells[fastest][k].speedup
            lead = f"{t.backends[fastest]} is fastest" if s.clear else f"{t.backends[fastest]} has the lowest median"
            out.append(f"{head}: {lead}, {s.versus(label)}" + also + ".")
    return out


def _part(backend: str, c: KindCell, count: int, label: str) -> str:
    """The clause for a backend that folded some of a kind's layers: how it did on the others."""
    s = c.speedup
    return (f"{backend} folded {count - c.timed} of these into the layers {c.folded or 'beside'} them; on the "
            f"other {c.timed} it is {s.versus(label)} on the same layers")
