"""Files that several processes on one machine read and write at once (the
tuning store, the peak and tiles caches): every write holds a lock
(filelock), merges what is on disk with what the writer holds, and renames a
whole file into place (atomic.py), so no process loses another's work.

A file found damaged (cut short, not JSON, of another format) is never
overwritten: what can be read of it is kept, the file itself is renamed
aside, and one line on stderr names both.
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

from .atomic import write_text_atomic


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


class PartialDict(dict):
    """An object cut short: the pairs before the cut."""


class PartialList(list):
    """An array cut short: the elements before the cut."""


def whole(value) -> bool:
    return not isinstance(value, (PartialDict, PartialList))


class _Cut(Exception):
    pass


_DECODER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value(text: str, i: int):
    """(value, end); a container cut short comes back partial, a scalar cut short raises _Cut."""
    i = _skip(text, i)
    if i >= len(text):
        raise _Cut
    if text[i] == "{":
        return _container(text, i + 1, {}, "}")
    if text[i] == "[":
        return _container(text, i + 1, [], "]")
    try:
        value, end = _DECODER.raw_decode(text, i)
    except ValueError:
        raise _Cut from None
    if end >= len(text) and not isinstance(value, str):
        raise _Cut   # a number at the very end may have lost digits
    return value, end


def _container(text: str, i: int, out, close: str):
    while True:
        i = _skip(text, i)
        if i < len(text) and text[i] == close and not out:
            return out, i + 1
        try:
            if isinstance(out, dict):
                key, i = _value(text, i)
                i = _skip(text, i)
                if not isinstance(key, str) or i >= len(text) or text[i] != ":":
                    raise _Cut
                value, i = _value(text, i + 1)
            else:
                value, i = _value(text, i)
        except _Cut:
            return (PartialDict(out) if isinstance(out, dict) else PartialList(out)), len(text)
        if not whole(value):   # the cut is inside it: so it is inside this one too
            if isinstance(out, dict):
                out[key] = value
                return PartialDict(out), len(text)
            return PartialList(out + [value]), len(text)
        if isinstance(out, dict):
            out[key] = value
        else:
            out.append(value)
        i = _skip(text, i)
        if i < len(text) and text[i] == close:
            return out, i + 1
        if i >= len(text) or text[i] != ",":
            return (PartialDict(out) if isinstance(out, dict) else PartialList(out)), len(text)
        i += 1


def salvage(text: str):
    """The JSON value of `text`, or where it is damaged what can be read of it: containers cut short come
    back as PartialDict / PartialList holding what came before the cut (a number at the cut is dropped);
    None where not even that."""
    try:
        value, end = _value(text, 0)
    except (_Cut, RecursionError):
        return None
    if _skip(text, end) < len(text) and whole(value):   # something after a whole value: not a file we wrote
        return PartialDict(value) if isinstance(value, dict) else PartialList(value) if isinstance(value, list) \
            else None
    return value


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
