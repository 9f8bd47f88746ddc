"""Files that several processes on one machine read and write at once (the
tuning stores, the peak and tiles caches): every write holds the folder's
lock (filelock), and renames a whole file into place (backends/atomic.py),
so no process loses another's work or sees half of it.

A file found damaged (cut short, not JSON, of another format) is never
overwritten: it is renamed aside, and one line on stderr says so.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from ..atomic import write_text_atomic
from .salvage import salvage, whole


_GUARD = threading.Lock()
_LOCKS: dict[str, FileLock] = {}   # lock file -> its one FileLock in this process (one per path: reentrant)


@contextmanager
def locked(folder: Path, name: str = ".lock"):
    """Hold the lock of `folder` (its file `name`) for the block, against other processes and this one's
    other threads; a thread holding it may take it again (filelock counts the holds of each thread).
    Where the lock file cannot be made (a read-only folder) the block runs unlocked: its write will fail
    and say so."""
    key = str(Path(folder) / name)
    with _GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = FileLock(key, mode=0o666, thread_local=True)
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


_SAID: set[str] = set()


def set_aside(path: Path, what: str, kept: str) -> Path | None:
    """Rename the damaged file `path` beside itself and say so in one line on stderr; `what` is what was
    wrong with it, `kept` what was kept of it.  The new name, or None where it could not be renamed (gone:
    another process set it aside first)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    try:
        os.replace(path, aside)
    except OSError:
        return None
    if str(path) not in _SAID:
        _SAID.add(str(path))
        print(f"warning: {path} was damaged ({what}): {kept}; the file is set aside as {aside.name}",
              file=sys.stderr, flush=True)
    return aside


def read_json(path: Path):
    """(the file's JSON value or what could be read of it, whether the file was whole): (None, True) where
    there is no file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, True
    except (OSError, UnicodeDecodeError):
        return None, False
    value = salvage(text)
    return value, value is not None and whole(value) and bool(text.strip())


def write_json(path: Path, data, indent: int | None = None) -> None:
    text = json.dumps(data, indent=indent) if indent else json.dumps(data, separators=(",", ":"))
    write_text_atomic(path, text + "\n")   # an interrupt leaves the last good file
