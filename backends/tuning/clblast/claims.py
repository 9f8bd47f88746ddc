"""Which configurations each search on a tuning folder is timing now, so
that two searches on one folder divide the work instead of repeating it.

A search claims the configurations it hands a child (claims.json in the
store's folder, read and written under the folder's lock), and another
search skips them.  A claim lapses when its search is gone: on this
machine, when no process of its id and start time runs; from another
machine, when it was not renewed (each search renews its own at every
write of its records) for TTL_S.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from ...clblast.record import Store
from ...store import read_json, write_json

from .watch import start_ticks

SCHEMA = "clblast-compare/clblast-claims"
VERSION = 1
FILE = "claims.json"
TTL_S = 600.0


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: int | None   # the process's start time in clock ticks since boot (None where not readable)

    @classmethod
    def me(cls) -> "Owner":
        return cls(socket.gethostname(), os.getpid(), start_ticks(os.getpid()))

    def alive(self, renewed: float, now: float) -> bool:
        if self.host != socket.gethostname():
            return now - renewed < TTL_S
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass   # another user's live process
        return self.start is None or start_ticks(self.pid) in (None, self.start)


def plan_key(problem_key: str, stage: str, order: str) -> tuple[str, str, str]:
    return (problem_key, stage, order)


class Claims:
    """This search's claims, and the others' as last read, in `store`'s folder."""

    def __init__(self, store: Store):
        self.store, self.me = store, Owner.me()
        self.path = store.folder / FILE
        self.others: dict[tuple, set[int]] = {}
        self._kept: list[dict] = []

    def _read(self) -> list[dict]:
        data, _ = read_json(self.path)   # a damaged claims file claims nothing: it is rewritten
        claims = data.get("claims") if isinstance(data, dict) else None
        return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []

    def read(self) -> None:
        """The others' live claims (the caller holds the folder's lock until `write`)."""
        now = time.time()
        self._kept, self.others = [], {}
        for c in self._read():
            try:
                owner = Owner(str(c["host"]), int(c["pid"]), c.get("start"))
                key, indices, renewed = plan_key(*c["plan"]), c["indices"], float(c["renewed"])
            except (KeyError, TypeError, ValueError):
                continue
            if owner == self.me or not owner.alive(renewed, now):
                continue
            self._kept.append(c)
            self.others.setdefault(key, set()).update(int(i) for i in indices)

    def write(self, mine: dict[tuple, set[int]]) -> None:
        """The others' claims as read, and ours as `mine` says (plan key -> indices), renewed now."""
        kept = self._kept + [{"host": self.me.host, "pid": self.me.pid, "start": self.me.start, "renewed": time.time(),
                              "plan": list(key), "indices": sorted(indices)} for key, indices in mine.items() if indices]
        if kept:
            write_json(self.path, {"schema": SCHEMA, "version": VERSION, "claims": kept})
        else:   # none left: no file (a finished tuning folder holds the records only)
            self.path.unlink(missing_ok=True)

    def sync(self, mine: dict[tuple, set[int]]) -> None:
        """Under the folder's lock (the caller holds it): read the others' claims, write ours."""
        self.read()
        self.write(mine)

    def taken(self, key: tuple) -> set[int]:
        """The indices of the plan `key` that other searches are timing (as of the last sync)."""
        return self.others.get(key, set())
