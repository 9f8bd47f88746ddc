"""The user's cache of per-device figures (the measured peak, our tiles):
one JSON file per kind, keyed by the device.  Read here; written by the
harness (compare/device_cache.py), atomically, under the file's lock.  A
damaged file keeps every device's entry that can be read and is set aside
(shared_files.py).  COMPARE_CACHE_DIR moves it (the tests do)."""
from __future__ import annotations

import os
from pathlib import Path

from .shared_files import locked, read_json, set_aside, whole, write_json


def cache_dir() -> Path:
    base = os.environ.get("COMPARE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clblast-compare")
    return Path(base)


def device_key(info: dict) -> str:
    """What tells one device and driver from another: figures never carry over."""
    return f"{info['platform']} | {info['name']} | {info['driver']}"


def path(kind: str) -> Path:
    return cache_dir() / f"{kind}.json"


def lock(kind: str):
    """The `kind` file's lock, for a read-merge-write of it."""
    return locked(cache_dir(), f".{kind}.json.lock")


def load(kind: str) -> dict:
    """Every device's entry in the `kind` file; {} when there is none.  A damaged file keeps the entries
    that can be read whole: they are written back, the file itself set aside, in one line."""
    file = path(kind)
    data, is_whole = read_json(file)
    if is_whole:
        return data if isinstance(data, dict) else {}
    kept = {k: v for k, v in data.items() if whole(v)} if isinstance(data, dict) else {}
    with lock(kind):
        again, now_whole = read_json(file)
        if now_whole and isinstance(again, dict):   # another process mended it meanwhile
            return again
        devices = f"{len(kept)} device{'s' if len(kept) != 1 else ''}"
        if set_aside(file, "cut short or not JSON", f"the entries of {devices} kept") is not None and kept:
            write_json(file, kept, indent=1)
    return kept


def entry(kind: str, info: dict):
    return load(kind).get(device_key(info))


class DeviceEntry:
    """One device's entry of a cache file, or none; subclasses name the file's KIND."""

    KIND = ""

    def __init__(self, entry: dict | None):
        self.entry = entry if isinstance(entry, dict) else None

    @classmethod
    def for_device(cls, info: dict):
        """This device's entry (none when it has none)."""
        return cls(entry(cls.KIND, info))
