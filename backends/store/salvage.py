"""What can be read of a JSON file cut short (an interrupt, a full disk):
the containers before the cut, marked partial so a store's parse knows
the file is not whole and keeps what it can."""
from __future__ import annotations

import json


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
    try:   # a whole file, as nearly every one is, in the parser's C speed (the walk below took seconds of a run)
        value = json.loads(text)
        if isinstance(value, (dict, list)):
            return value
    except ValueError:
        pass
    try:
        value, end = _value(text, 0)
    except (_Cut, RecursionError):
        return None
    if _skip(text, end) < len(text) and whole(value):   # something after a whole value: not a file we wrote
        return PartialDict(value) if isinstance(value, dict) else PartialList(value) if isinstance(value, list) \
            else None
    return value
