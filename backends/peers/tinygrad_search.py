"""`compare tune --scope tinygrad`: tinygrad's schedule search (BEAM) of the
kernels of the nets' passes on this device, under the tuner's budget,
resumable, its choices kept in the device's tuning folder
(tinygrad_choices.py) for the `tinygrad` backend's searched modes.

A run first compiles each net's pass as the backend does (a survey: which
distinct kernels it has, and what each takes under tinygrad's heuristics),
for the nets that still have kernels not searched; then searches those,
the costliest first over all the nets, one kernel at a time with
tinygrad's own search, saving each choice as it is made.  At the end of
the budget the kernel in search is given up (tinygrad's search cannot be
resumed inside a kernel); the next run continues with what is left.  So a
budget must hold at least a survey and one kernel's search.

The work runs in a child on the device (tinygrad_device.py); the child is
told the time left, stops its search softly when it is spent, and is
stopped by force GRACE_S later if it does not answer.
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field

from nets.errors import PassTimeout, Unsupported, UserError
from nets.weights import init_weights

from .tinygrad_choices import ChoiceStore, Choices, DeviceId, Survey, net_key
from .tinygrad_device import Child, open_device, tinygrad_version

GRACE_S = 30.0


class BudgetSpent(BaseException):
    """Raised in the child's main thread when its time is up (a BaseException: tinygrad's search
    catches Exception around each candidate, and must not swallow this)."""


def _budget_spent(signum, frame):
    raise BudgetSpent()


# -- in the child
class SearchSession:
    """The child's side: the device opened, the choices seeded, the schedule search recording the
    kernels it is asked for (tinygrad_beam.BeamHook)."""

    def __init__(self, target, store: ChoiceStore):
        from .tinygrad_beam import BeamHook, seed
        self.device = open_device(target)
        choices = store.load()
        seed(choices, self.device.tinygrad)
        self.hook = BeamHook.install(set(choices.kernels))
        self.hook.recording = True
        self._seen: dict[str, str] = {}

    # what TinygradNet asks of its owner
    def compile_pass(self, prepared, net, batch, width):
        from tinygrad.codegen import to_program_cache
        to_program_cache.clear()   # tinygrad asks the search once per kernel and process: every kernel anew
        with self.hook.watching() as seen:
            prepared.capture()
        self._seen = dict(seen)
        return sum(1 for k in seen if k in self.hook.known), len(seen)

    def search_line(self, *args) -> str:
        return ""

    def searched_depth(self, *args) -> None:
        return None

    def survey(self, net, batch: int, width: int) -> list[tuple[str, str, float | None]]:
        """The distinct kernels of the net's pass at `width`, in compile order: (key, name, ms under the
        heuristics; None where known already or not timeable)."""
        from .tinygrad_peer import TinygradNet
        prepared = TinygradNet(net, init_weights(net, 0), batch, self, width)
        prepared.close()
        return [(key, name, self.hook.time_heuristic(key) if key in self.hook.pending else None)
                for key, name in self._seen.items()]

    def search(self, key: str, seconds: float):
        """tinygrad's search of pending kernel `key`: its Choice, or None when `seconds` ran out first."""
        from tinygrad.engine.worker import terminate_worker_pool
        main = threading.main_thread().ident
        previous = signal.signal(signal.SIGUSR1, _budget_spent)
        timer = threading.Timer(max(seconds, 0.0), signal.pthread_kill, (main, signal.SIGUSR1))
        timer.daemon = True
        timer.start()
        try:
            return self.hook.search(key, self.device.tinygrad)
        except BudgetSpent:
            terminate_worker_pool()   # its workers may still compile candidates of the abandoned search
            return None
        finally:
            timer.cancel()
            signal.signal(signal.SIGUSR1, previous)


# -- in the parent
@dataclass
class TuneResult:
    store: ChoiceStore
    width: int
    searched_now: int = 0
    search_s: float = 0.0
    cut: str | None = None           # what the budget's end interrupted, if anything
    left: int = 0                    # kernels of the nets still not searched
    depths: list = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"tinygrad: {self.searched_now} kernels searched this run at width {self.width} "
               f"({self.search_s:.0f} s of search), {self.left} left; written to {self.store.path}"]
        if self.cut:
            out.append(f"tinygrad: the budget ended {self.cut}; the next run continues")
        return out + [f"tinygrad: {d}" for d in self.depths]


def store_for(rt) -> ChoiceStore:
    return ChoiceStore(DeviceId.of(rt.info, tinygrad_version() or "none"))


def require() -> None:
    """A UserError where the tinygrad scope cannot run here."""
    from .tinygrad_peer import TinygradBackend
    why = TinygradBackend.unavailable_reason()
    if why:
        raise UserError(f"--scope tinygrad: {why}")


class _Ticker:
    """Redraws a progress line every second while the child works (it answers only when done)."""

    def __init__(self, progress, text):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(progress, text), daemon=True)

    def _run(self, progress, text):
        t0 = time.monotonic()
        while not self._stop.wait(1.0):
            progress(text(time.monotonic() - t0))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def tune(rt, nets, batch: int | None, budget_s: float, width: int, progress) -> TuneResult:
    """Survey and search the nets' kernels at `width` within `budget_s` seconds (see the module)."""
    require()
    store = store_for(rt)
    choices = store.load()
    result = TuneResult(store, width)
    end = time.monotonic() + budget_s
    batches = {n.name: batch or n.default_batch for n in nets}
    try:
        child = Child(rt.device, "tinygrad search")
    except Unsupported as exc:
        raise UserError(f"--scope tinygrad: {exc}") from None
    try:
        session = child.worker.request("new", __name__, "SearchSession", (child.target, store))
        call = _caller(child, session, end)
        for net in nets:
            key = net_key(net.name, batches[net.name])
            depth = choices.depth(key, width)
            if depth is not None and depth[0] == depth[1]:
                continue   # all its kernels searched: nothing to survey
            what = f"compiling {net.name} at batch {batches[net.name]} to find its kernels"
            with _Ticker(progress, lambda s: f"tinygrad: {what} ({s:.0f} s, {end - time.monotonic():.0f} s left)"):
                found = call("survey", net, batches[net.name], width)
            if found is None:
                result.cut = f"while {what}"
                break
            old = choices.nets.get(Survey(key, width).name)
            costs = {k: ms for k, _, ms in old.kernels} if old else {}
            choices.nets[Survey(key, width).name] = Survey(key, width, [(k, name, ms if ms is not None else
                                                                         costs.get(k)) for k, name, ms in found])
            store.save(choices)
        todo = _costliest_first(choices, [net_key(n.name, batches[n.name]) for n in nets], width, surveyed_now=result)
        for i, (key, name) in enumerate(todo):
            if result.cut:
                break
            left = end - time.monotonic()
            what = f"searching kernel {i + 1} of {len(todo)} ({name})"
            if left <= 0:
                result.cut = f"before {what}"
                break
            t0 = time.monotonic()
            with _Ticker(progress, lambda s: f"tinygrad: {what} at width {width} ({s:.0f} s, "
                                             f"{end - time.monotonic():.0f} s left)"):
                choice = call("search", key)
            result.search_s += time.monotonic() - t0
            if choice is None:
                result.cut = f"while {what}"
                break
            choices.kernels[key] = choice
            store.save(choices)
            result.searched_now += 1
    finally:
        child.close()
    result.left = sum(1 for _ in _unsearched(choices, [net_key(n.name, batches[n.name]) for n in nets], width))
    result.depths = [choices.depth_words(net_key(n.name, batches[n.name]), width) for n in nets]
    return result


def _caller(child: Child, session: int, end: float):
    """A call into the child's session that gives up (None) when the budget ends before it answers."""
    def call(method: str, *args):
        left = end - time.monotonic()
        if left <= 0:
            return None
        margs = args + ((left,) if method == "search" else ())
        try:
            return child.worker.request("call", session, method, margs, False, timeout_s=left + GRACE_S)
        except PassTimeout:
            return None
    return call


def _unsearched(choices: Choices, nets: list[str], width: int):
    """(key, name, ms) of every distinct kernel of the surveyed nets not searched yet, each once."""
    seen = set()
    for net in nets:
        survey = choices.nets.get(Survey(net, width).name)
        for key, name, ms in survey.kernels if survey else ():
            if key not in choices.kernels and key not in seen:
                seen.add(key)
                yield key, name, ms


def _costliest_first(choices: Choices, nets: list[str], width: int, surveyed_now: TuneResult):
    """The kernels to search, those of the longest heuristic time first (untimed ones last, in order)."""
    if surveyed_now.cut:
        return []
    found = list(_unsearched(choices, nets, width))
    order = sorted(range(len(found)), key=lambda i: (found[i][2] is None, -(found[i][2] or 0.0), i))
    return [(found[i][0], found[i][1]) for i in order]


def show(rt, nets, batch: int | None, width: int) -> str:
    """The depth of tinygrad's search on this device, per net, from the choices file alone."""
    store = store_for(rt)
    choices = store.load()
    lines = [f"tinygrad search of {rt.info['name']} ({rt.info['driver']}, tinygrad {store.device.tinygrad}), "
             f"{store.path}: {len(choices.kernels)} kernels searched"
             + (f" at widths {', '.join(map(str, choices.widths()))}" if choices.kernels else "")]
    for net in nets:
        key = net_key(net.name, batch or net.default_batch)
        lines.append(choices.depth_words(key, width))
        survey = choices.nets.get(Survey(key, width).name)
        for k, name, ms in survey.kernels if survey else ():
            c = choices.kernels.get(k)
            ms = c.heuristic_ms if c is not None else ms
            took = f"{ms:.4g} ms on the heuristics" if ms is not None else "untimed on the heuristics"
            done = ("not searched" if c is None else f"searched in {c.search_s:.0f} s: "
                    + (f"{c.searched_ms:.4g} ms" if c.searched_ms is not None else "untimed")
                    + (" (the heuristics' schedule, faster than the search's best)" if c.kept == "heuristics" else ""))
            lines.append(f"  {name}: {took}; {done}")
    return "\n".join(lines)
