"""The one loader of every tuning store (tinygrad's choices, CLBlast's
records and net choices, the tiles' and peak caches, OpenCV's summary).

A store is read and checked against its schema.  One that is damaged (cut
short, not JSON) or foreign (JSON of other types or fields, of another
version or device) is never overwritten: it is renamed aside with its date
(shared_files.set_aside), named in one line on stderr, what could be read
of it kept, and the search starts afresh beside it.  Hours of search live
in these files: losing one silently is the one thing a loader must not do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from nets.errors import UserError
from nets.userfile import kind

from .shared_files import locked, read_json, set_aside, whole

T = TypeVar("T")

MAX_BYTES = 256 * 2**20   # the largest store written so far is a few MiB; far more is no store of ours


class Foreign(ValueError):
    """The store's JSON is not of its schema; the message says where and how."""


@dataclass
class Parsed(Generic[T]):
    """What a store's parse made of its JSON, and how many of its entries were not of the schema (left out:
    the file is then set aside with the rest kept)."""

    value: T
    dropped: int = 0


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


# -- checks of a schema's fields: each raises Foreign naming the field ---------------------------------------

def obj(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise Foreign(f"{where} holds {_kind(value)}, not an object")
    return value


def array(value, where: str) -> list:
    if not isinstance(value, list):
        raise Foreign(f"{where} holds {_kind(value)}, not an array")
    return value


def text(value, where: str) -> str:
    if not isinstance(value, str):
        raise Foreign(f"{where} holds {_kind(value)}, not a string")
    return value


def whole_number(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Foreign(f"{where} holds {_kind(value)}, not a whole number")
    return value


def number(value, where: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Foreign(f"{where} holds {_kind(value)}, not a finite number")
    return float(value)


def need(d: dict, key: str, check, where: str, *extra):
    """d[key] checked by `check`; absent is Foreign too."""
    if key not in d:
        raise Foreign(f"{where} has no {key!r}")
    return check(d[key], f"{where}.{key}", *extra)


def entries(values: list, parse_one, where: str) -> Parsed[list]:
    """Each whole entry of `values` that `parse_one(entry, where)` accepts; those it refuses are counted (an
    entry at a cut is left out without counting: the file is known cut short)."""
    out, dropped = [], 0
    for i, v in enumerate(values):
        if not whole(v):
            continue
        try:
            out.append(parse_one(v, f"{where}[{i}]"))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            dropped += 1
    return Parsed(out, dropped)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return "an object"
