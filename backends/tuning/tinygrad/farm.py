"""tinygrad's search on a farm's workers (`compare tune --scope tinygrad
--scheduler tcp://HOST:PORT`): one searcher per device of the kind tuned
(backends/tuning/farm.py found them), each a Dask task at a time on its
worker, so a searcher that finishes a kernel takes the next (loop.py).

On a worker, a search session (session.py: a tinygrad
child on that worker's device, by its 'P:D' index) is kept between tasks,
so each net is compiled there once; it searches the kernels it is handed
and returns each choice to this process, the store's only writer.  Only
workers of the device's kind with this process's tinygrad version take
part (a kernel's key means nothing to another version); the others are
left out and named.  A worker lost mid-kernel loses that kernel only: the
next run searches it again.
"""
from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from nets.errors import UserError

from ...peers.tinygrad_choices import ChoiceStore, Survey, net_key
from ...store import DeviceId
from .. import farm as farm_module

GRACE_S = 60.0   # past a task's own time: its worker compiles the nets first, and answers through the scheduler

# -- on the workers
_SESSIONS: dict = {}           # (device index, width) -> (LocalSearcher, set of net keys surveyed there)
_GUARD = threading.Lock()


def _searcher(index: str, width: int):
    from ...opencl.runtime import device_info, select_device
    from ...peers.tinygrad_device import tinygrad_version
    from .session import LocalSearcher
    with _GUARD:
        got = _SESSIONS.get((index, width))
        if got is None:
            device = select_device(index)
            # no seeds: this worker searches what it is handed; the client holds the choices
            store = ChoiceStore(DeviceId.of(device_info(device), tinygrad=tinygrad_version() or "none"),
                                Path(tempfile.mkdtemp(prefix="compare-tinygrad-farm-")))
            got = _SESSIONS[(index, width)] = (LocalSearcher(device, store), set())
        return got


def survey_on_worker(index: str, net, batch: int, width: int, seconds: float):
    searcher, surveyed = _searcher(index, width)
    found = searcher.survey(net, batch, width, seconds)
    if found is not None:
        surveyed.add((net.name, batch))
    return found


def search_on_worker(index: str, nets: list, batch_of: dict, width: int, key: str, seconds: float):
    """The Choice of kernel `key`, after compiling each of `nets` this worker's session has not compiled
    (the search needs the kernel as its net's pass made it); None when `seconds` ran out first."""
    end = time.monotonic() + seconds
    searcher, surveyed = _searcher(index, width)
    for net in nets:
        if (net.name, batch_of[net.name]) in surveyed:
            continue
        if searcher.survey(net, batch_of[net.name], width, end - time.monotonic()) is None:
            return None
        surveyed.add((net.name, batch_of[net.name]))
    return searcher.search(key, end - time.monotonic())


def close_sessions() -> int:
    with _GUARD:
        found = list(_SESSIONS.values())
        _SESSIONS.clear()
    for searcher, _ in found:
        searcher.close()
    return len(found)


# -- on the client
class FarmSearcher:
    """A searcher on one place of the farm: what loop.py asks of a searcher, as Dask tasks."""

    def __init__(self, client, place: farm_module.Place, request, store: ChoiceStore):
        self.client, self.place, self.name, self.store = client, place, place.name, store
        self.nets = request.nets
        self.batch_of = {n.name: request.batch_of(n) for n in request.nets}

    def _nets_of(self, key: str, width: int) -> list:
        """The nets whose pass has kernel `key` (as surveyed): the worker compiles only those."""
        choices = self.store.load()
        found = [n for n in self.nets
                 if any(k == key for k, _, _ in getattr(choices.nets.get(
                     Survey(net_key(n.name, self.batch_of[n.name]), width).name), "kernels", ()))]
        return found or self.nets

    def _wait(self, future, seconds: float):
        try:
            return future.result(timeout=seconds + GRACE_S)
        except Exception:  # noqa: BLE001 - the worker lost, or its task failed: nothing came of it
            future.cancel()
            return None

    def survey(self, net, batch: int, width: int, seconds: float):
        f = self.client.submit(survey_on_worker, self.place.index, net, batch, width, seconds,
                               workers=[self.place.worker], allow_other_workers=False, pure=False, retries=0)
        return self._wait(f, seconds)

    def search(self, key: str, seconds: float):
        width = int(key.split("|", 1)[0])
        f = self.client.submit(search_on_worker, self.place.index, self._nets_of(key, width), self.batch_of,
                               width, key, seconds,
                               workers=[self.place.worker], allow_other_workers=False, pure=False, retries=0)
        return self._wait(f, seconds)

    def close(self) -> None:
        pass


def run(request, budget, place, search) -> list[str]:
    """The search loop (`search`: loop.search) over every place of the kind tuned on the farm `place`
    (place.OnFarm, connected within the budget); each kind among the workers in turn with --devices all
    (their stores are apart)."""
    from ...peers.tinygrad_device import tinygrad_version
    mine = tinygrad_version()
    farm, kinds = place.kinds(request, budget.wall_s())
    try:
        lines: list[str] = []
        for kind in kinds:
            same = [p for p in kind.places if p.tinygrad == mine]
            other = [f"{p.name} (tinygrad {p.tinygrad or 'missing'})" for p in kind.places if p.tinygrad != mine]
            where = place.where(kind) + (
                f"; left out, not tinygrad {mine}: {', '.join(other)}" if other else "")
            if not same:
                raise UserError(f"--scheduler {farm.address}: no worker of {kind.words()} has tinygrad {mine}, "
                                f"which made this machine's choices' keys: {', '.join(other)}")
            store = ChoiceStore(kind.device.with_tinygrad(mine))
            searchers = [FarmSearcher(farm.client, p, request, store) for p in same]
            lines += search(request, store, searchers, budget, where).lines()
        return lines
    finally:
        try:
            farm.client.run(close_sessions)
        except Exception:  # noqa: BLE001 - a worker gone: its children went with it
            pass
