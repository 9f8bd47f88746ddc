"""The checks of a store's schema, field by field: each raises Foreign
naming the field and what it holds instead."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from .salvage import whole

T = TypeVar("T")


class Foreign(ValueError):
    """The store's JSON is not of its schema; the message says where and how."""


@dataclass
class Parsed(Generic[T]):
    """What a store's parse made of its JSON, and how many of its entries were not of the schema (left out:
    the file is then set aside with the rest kept)."""

    value: T
    dropped: int = 0


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
