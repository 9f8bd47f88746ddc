"""The one loader of every tuning store (tinygrad's choices, CLBlast's
records and net choices, the tiles' and peak caches, OpenCV's summary).

A store is read and checked against its schema.  One that is damaged (cut
short, not JSON) or foreign (JSON of other types or fields, of another
version or device) is never overwritten: it is renamed aside with its date
(files.set_aside), named in one line on stderr, what could be read
of it kept, and the search starts afresh beside it.  Hours of search live
in these files: losing one silently is the one thing a loader must not do.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

from nets.errors import UserError
from nets.userfile import kind

from .files import locked, read_json, set_aside
from .schema import Foreign, Parsed

T = TypeVar("T")

MAX_BYTES = 256 * 2**20   # the largest store written so far is a few MiB; far more is no store of ours


def load(path: Path, parse: Callable[[Any], Parsed[T]], kept: Callable[[T | None], str],
         write_back: Callable[[T], None] | None = None, lock: Callable | None = None) -> T | None:
    """`parse` of the store at `path`, or None where there is none.  A damaged or foreign one is set aside
    in one line saying what `kept(value)` says was kept (value: what `parse` made of it, or None); with
    `write_back`, that value is written in its place.  `lock()` (default the folder's lock) guards the set-aside
    against another process mending the file meanwhile.  A path that is no regular file, or one too large
    to be a store, is refused in one line (never renamed: it is not ours)."""
    _check_is_a_store(path)
    data, is_whole = read_json(path)
    if data is None and is_whole:
        return None
    got, what = None, "cut short or not JSON"
    try:
        parsed = parse(data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        if is_whole:
            what = str(exc) if isinstance(exc, Foreign) else f"not of its schema: {_short(exc)}"
    else:
        got = parsed.value
        if is_whole and not parsed.dropped:
            return got
        if is_whole:
            what = f"{parsed.dropped} entr{'y' if parsed.dropped == 1 else 'ies'} not of its schema"
    with (lock() if lock else locked(path.parent)):
        again, now_whole = read_json(path)
        if now_whole and again is not None and again != data:   # another process wrote it meanwhile
            return load(path, parse, kept, write_back, lock)
        if set_aside(path, what, kept(got)) is not None and write_back is not None and got is not None:
            write_back(got)
    return got


def make_folder(folder: Path) -> Path:
    """`folder` made where it is missing; refused in one line where something else is at its place (never
    removed: it is not ours)."""
    for place in [folder, *folder.parents]:
        there = kind(place)
        if there is None:
            continue
        if there != "a folder":
            raise UserError(f"tuning folder {folder} cannot be made: {place} is {there}; move it away and tune again")
        break
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _check_is_a_store(path: Path) -> None:
    there = kind(path)
    if there not in (None, "a regular file"):
        raise UserError(f"tuning store {path} is {there}, not a regular file: move it away and tune again")
    if there is not None and path.stat().st_size > MAX_BYTES:
        raise UserError(f"tuning store {path} holds {path.stat().st_size:,} bytes, more than any store of ours "
                        f"({MAX_BYTES:,}): move it away and tune again")


def _short(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 120 else text[:117] + "..."
