"""tinygrad's search loop: survey each net that still has kernels not
searched (its pass compiled as the backend compiles it: which distinct
kernels it has, and what each takes under tinygrad's heuristics), then
search those, the costliest first over all the nets, one kernel at a time
per searcher (a child here, session.LocalSearcher, or one per device on a
farm's workers, farm.FarmSearcher), each taking the next kernel as it
finishes one, each choice saved as it comes with the searcher that made
it.  At the deadline the kernels in search are given up (tinygrad's search
cannot be resumed inside a kernel); the next run continues with what is
left."""
from __future__ import annotations

import dataclasses
import queue
import threading
from dataclasses import dataclass, field

from ...peers.tinygrad_choices import ChoiceStore, Choices, Survey, net_key
from ..budget import Budget

STOP_S = 2.0   # how long an interrupt waits for the search threads once their searchers are stopped


@dataclass
class Outcome:
    store: ChoiceStore
    width: int
    where: str = ""
    searched_now: int = 0
    search_s: float = 0.0
    cut: str | None = None           # what the budget's end interrupted, if anything
    left: int = 0                    # kernels of the nets still not searched
    depths: list = field(default_factory=list)
    by: dict = field(default_factory=dict)   # searcher -> kernels it searched this run

    def lines(self) -> list[str]:
        out = [self.where] if self.where else []
        out.append(f"tinygrad: {self.searched_now} kernels searched this run at width {self.width} "
                   f"({self.search_s:.0f} s of search), {self.left} left; written to {self.store.path}")
        if len(self.by) > 1:
            out.append("tinygrad: searched by " + ", ".join(f"{w} {n}" for w, n in self.by.items()))
        if self.cut:
            out.append(f"tinygrad: the budget ended {self.cut}; the next run continues")
        return out + [f"tinygrad: {d}" for d in self.depths]


def search(request, store: ChoiceStore, searchers: list, budget: Budget, where: str = "") -> Outcome:
    """Survey the nets not searched to the end (on the first searcher), then search their kernels, the
    costliest first, each searcher taking the next as it finishes one, within `budget`."""
    width, progress = request.width, request.progress
    choices = store.load()
    result = Outcome(store, width, where)
    keys = [net_key(n.name, request.batch_of(n)) for n in request.nets]
    first = searchers[0]
    for net, key in zip(request.nets, keys):
        depth, last = choices.depth(key, width), choices.nets.get(Survey(key, width).name)
        if depth is not None and depth[0] == depth[1] and last.covers():
            continue   # all its kernels searched, on every way of building its pass: nothing to survey
        what = f"compiling {net.name} at batch {request.batch_of(net)} to find its kernels"
        progress(f"tinygrad: {what}")   # said once: the display shows the time going by (compare/progress.py)
        found = first.survey(net, request.batch_of(net), width, budget.left())
        if found is None:
            result.cut = f"while {what}"
            break
        costs = {k: ms for k, _, ms in last.kernels} if last else {}
        choices.nets[found.name] = Survey(key, width, [(k, name, ms if ms is not None else costs.get(k))
                                                       for k, name, ms in found.kernels], found.ways)
        store.save(choices)
    todo = [] if result.cut else _costliest_first(choices, keys, width)
    if todo:
        _search_all(request, store, choices, searchers, todo, budget, result)
    result.left = sum(1 for _ in _unsearched(choices, keys, width))
    result.depths = [choices.depth_words(k, width) for k in keys]
    return result


def _search_all(request, store, choices: Choices, searchers: list, todo: list, budget: Budget,
                result: Outcome) -> None:
    """Each searcher in a thread of its own takes the next kernel of `todo` until none is left or the budget
    ends; each choice saved as it comes (this process is the store's only writer)."""
    waiting: queue.Queue = queue.Queue()
    for i, item in enumerate(todo):
        waiting.put((i, *item))
    guard = threading.Lock()
    busy: dict[str, str] = {}
    t0 = budget.clock()

    def say() -> None:   # each time a searcher takes or ends a kernel
        with guard:
            doing = "; ".join(f"{w}: {k}" for w, k in busy.items())
            text = (f"tinygrad: {result.searched_now} of {len(todo)} kernels searched at width {request.width} "
                    f"({doing or 'starting'})")
        request.progress(text)

    failed: list[BaseException] = []

    def work(searcher) -> None:
        # a searcher's own failure is raised here once every thread ended; one that ends with an interrupt
        # (whose signal can reach the searcher's processes before this thread learns of it) is not said
        try:
            take(searcher)
        except BaseException as exc:  # noqa: BLE001
            failed.append(exc)

    def take(searcher) -> None:
        while True:
            try:
                i, key, name = waiting.get_nowait()
            except queue.Empty:
                return
            left = budget.left()
            what = f"kernel {i + 1} of {len(todo)} ({name})"
            if budget.expired():
                with guard:
                    result.cut = result.cut or f"before {what}"
                return
            with guard:
                busy[searcher.name] = name
            say()
            choice = searcher.search(key, left)
            with guard:
                busy.pop(searcher.name, None)
                if choice is None:
                    result.cut = result.cut or f"while searching {what}"
                    return
                choices.kernels[key] = dataclasses.replace(choice, where=searcher.name)
                store.save(choices)
                result.searched_now += 1
                result.by[searcher.name] = result.by.get(searcher.name, 0) + 1
            say()

    say()
    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in searchers]
    try:   # the starts too: a thread started has a search in its child before the others start
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:   # Ctrl-C: every searcher stopped now, not after the search it is in
        for s in searchers:
            getattr(s, "stop", lambda: None)()
        for t in threads:
            if t.ident is not None:   # started
                t.join(STOP_S)
        raise
    if failed:
        raise failed[0]
    result.search_s = budget.clock() - t0


def _unsearched(choices: Choices, nets: list[str], width: int):
    """(key, name, ms) of every distinct kernel of the surveyed nets not searched yet, each once."""
    seen = set()
    for net in nets:
        survey = choices.nets.get(Survey(net, width).name)
        for key, name, ms in survey.kernels if survey else ():
            if key not in choices.kernels and key not in seen:
                seen.add(key)
                yield key, name, ms


def _costliest_first(choices: Choices, nets: list[str], width: int) -> list[tuple[str, str]]:
    """The kernels to search, those of the longest heuristic time first (untimed ones last, in order)."""
    found = list(_unsearched(choices, nets, width))
    order = sorted(range(len(found)), key=lambda i: (found[i][2] is None, -(found[i][2] or 0.0), i))
    return [(found[i][0], found[i][1]) for i in order]
