"""CLBlast's search on a farm's workers (backends/tuning/farm.py found them
and their device kinds): each worker runs the same children `--jobs` runs
here (children.run_child, on the worker's own OpenCL device), each line
they write comes back to this process as it comes (a worker's log event),
and this process is the store's only writer.

Only the places of the device kind tuned take part.  A worker lost mid-search loses only the
configurations its children had not answered: the search hands them to
the others and says which.  Dask is an optional extra (`farm`): nothing
else of the project imports this module.
"""
from __future__ import annotations

import itertools
import math
import queue
import threading
import time
import uuid

import distributed

from ..farm import Place
from .children import QUIET_GPU_S, QUIET_S, Ended, answers, run_child

LOST_POLL_S = 2.0     # how often the scheduler is asked which workers are there
STOP_POLL_S = 2.0     # how often a worker's child asks whether the search stopped it
RESULT_MARGIN_S = 60.0


# -- on the workers
def child_on_worker(req: dict, topic: str, child: int, stop_name: str, quiet_s: float = QUIET_S) -> dict:
    """One search child on this worker, stopped when silent `quiet_s`: each line sent to the client as it
    comes, and all of them again with how the child ended."""
    worker = distributed.get_worker()
    stop = distributed.Event(stop_name)
    lines: list[str] = []
    asked = [0.0, False]

    def emit(line: str) -> None:
        lines.append(line)
        worker.log_event(topic, {"child": child, "line": line})

    def should_stop() -> bool:
        now = time.monotonic()
        if now - asked[0] >= STOP_POLL_S:
            asked[0] = now
            try:
                asked[1] = stop.is_set()
            except Exception:  # noqa: BLE001 - the scheduler gone: the client is, too
                asked[1] = True
        return asked[1]
    ended = run_child(req, emit, float("inf"), quiet_s, should_stop=should_stop)
    return {"lines": lines, "code": ended.code, "why": ended.why, "stopped": ended.stopped,
            "last_words": ended.last_words}


def answers_on_worker(req: dict, timeout: float) -> tuple[list[dict], bool]:
    return answers(req, timeout)


# -- on the client
class DaskPool:
    """The search's children on the workers of `places`, `jobs` side by side on each device (default: one
    on a CPU device, whose compiles take every core; half the worker's cores up to 8 on a GPU), at most as
    many as the worker has threads (`dask worker --nthreads`)."""

    def __init__(self, client, places: list[Place], jobs: int | None = None):
        self.client = client
        self.places = {p.name: p for p in places}
        self.jobs = {p.name: min(p.threads, jobs or (max(1, min(8, p.cores // 2)) if p.gpu else 1)) for p in places}
        self.topic = f"clblast-tune-{uuid.uuid4().hex[:10]}"
        self._ids = itertools.count()
        self._children: dict[int, tuple] = {}   # child id -> (handle, events, future, stop event's name, worker)
        self._of: dict[int, int] = {}           # id(handle) -> child id
        self._gone: set[str] = set()
        self._asked = 0.0
        self._lock = threading.Lock()
        client.subscribe_topic(self.topic, self._line)

    def slots(self) -> list[str]:
        return [name for name in self.places if name not in self._gone for _ in range(self.jobs[name])]

    def lost(self) -> list[str]:
        """The workers gone since last asked (at most every LOST_POLL_S)."""
        now = time.monotonic()
        if now - self._asked < LOST_POLL_S:
            return []
        self._asked = now
        try:
            live = set(self.client.scheduler_info().get("workers", {}))
        except Exception:  # noqa: BLE001 - the scheduler unreachable: every worker is lost to us
            live = set()
        gone = [name for name, p in self.places.items() if p.worker not in live and name not in self._gone]
        self._gone.update(gone)
        return gone

    def start(self, req: dict, place: str, events: queue.Queue, handle) -> None:
        cid = next(self._ids)
        stop_name = f"{self.topic}-stop-{cid}"
        where = self.places[place]
        future = self.client.submit(child_on_worker, {**req, "device": where.index}, self.topic, cid, stop_name,
                                    QUIET_GPU_S if where.gpu else QUIET_S,
                                    workers=[where.worker], allow_other_workers=False, pure=False, retries=0,
                                    key=f"{self.topic}-child-{cid}")
        with self._lock:
            self._children[cid] = (handle, events, future, stop_name, place)
            self._of[id(handle)] = cid
        future.add_done_callback(lambda f, cid=cid: self._done(cid, f))

    def _line(self, event) -> None:
        _, msg = event
        with self._lock:
            got = self._children.get(msg.get("child")) if isinstance(msg, dict) else None
        if got is not None:
            got[1].put((got[0], msg["line"]))

    def _done(self, cid: int, future) -> None:
        with self._lock:
            got = self._children.pop(cid, None)
        if got is None:
            return
        handle, events = got[:2]
        self._of.pop(id(handle), None)
        try:
            r = future.result()
        except Exception as exc:  # noqa: BLE001 - its worker lost, or the task cancelled: no blame
            events.put((handle, Ended(None, None, True, f"the worker's task ended: {type(exc).__name__}")))
            return
        for line in r["lines"]:   # those already come as log events are dropped by the search
            events.put((handle, line))
        events.put((handle, Ended(r["code"], r["why"], r["stopped"], r["last_words"])))

    def stop(self, handle) -> None:
        """Ask the child to stop (its worker kills it within STOP_POLL_S); on a worker gone, drop its task."""
        with self._lock:
            cid = self._of.get(id(handle))
            got = self._children.get(cid) if cid is not None else None
        if got is None:
            return
        _, _, future, stop_name, place = got
        if place in self._gone:
            future.cancel()
            return
        try:
            distributed.Event(stop_name, client=self.client).set()
        except Exception:  # noqa: BLE001 - the scheduler unreachable: the task is lost anyway
            future.cancel()

    def answers(self, req: dict, timeout: float) -> tuple[list[dict], bool]:
        """One child on the first worker still there (the verification's children run alone)."""
        live = [p for name, p in self.places.items() if name not in self._gone]
        if not live:
            return [], False
        future = self.client.submit(answers_on_worker, {**req, "device": live[0].index}, timeout,
                                    workers=[live[0].worker], allow_other_workers=False, pure=False, retries=0)
        try:
            return future.result(timeout=None if math.isinf(timeout) else timeout + RESULT_MARGIN_S)
        except Exception:  # noqa: BLE001 - the worker lost meanwhile: nothing came of it
            future.cancel()
            return [], False

    def close(self) -> None:
        with self._lock:
            names = [got[3] for got in self._children.values()]
        for name in names:
            try:
                distributed.Event(name, client=self.client).set()
            except Exception:  # noqa: BLE001
                pass
        try:
            self.client.unsubscribe_topic(self.topic)
        except Exception:  # noqa: BLE001
            pass
