"""The user's cache of per-device figures (the measured peak, our tiles):
one JSON file per kind, keyed by the device.  Read here; written by the
harness (compare/device_cache.py), atomically, under the file's lock.  A
damaged or foreign file keeps every device's entry that can be read and is
of its kind's schema, and is set aside (store.py).  COMPARE_CACHE_DIR moves it (the tests do)."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import platformdirs

from . import store
from .store import DeviceId, JsonFile, locked, whole

APP = "clblast-compare"   # the cache folder's name under the user's cache root


def cache_dir() -> Path:
    # the user's cache folder of the platform (on Linux, as before: $XDG_CACHE_HOME or ~/.cache, then
    # clblast-compare); no author folder on Windows, the name is the project's own
    return Path(os.environ.get("COMPARE_CACHE_DIR") or platformdirs.user_cache_dir(APP, appauthor=False))


def path(kind: str) -> Path:
    return cache_dir() / f"{kind}.json"


def lock(kind: str):
    """The `kind` file's lock, for a read-merge-write of it."""
    return locked(cache_dir(), _lock_name(kind))


def _lock_name(kind: str) -> str:
    return f".{kind}.json.lock"


# a kind -> the function that checks one device's entry of it (raising store.Foreign), where its entries
# have a schema of their own here; imported only when the kind is read
ENTRY_CHECKS = {"tiles": "backends.handwritten.tiles_tuned:check_entry", "peak": "backends.cache:check_peak",
                "forms": "backends.handwritten.forms_tuned:check_entry"}


def check_peak(entry, where: str) -> None:
    """A peak entry (compare/peak.py writes it): its figures, where it has them, finite numbers."""
    for key in ("gflops", "bandwidth_gbs"):
        if store.obj(entry, where).get(key) is not None:
            store.number(entry[key], f"{where}.{key}")


def _entry_check(kind: str):
    """The check of one device's entry of `kind`: its key is a DeviceId's key, its value of the kind's schema."""
    where = ENTRY_CHECKS.get(kind)
    module, name = where.split(":") if where else ("backends.store", "obj")
    check = getattr(importlib.import_module(module), name)

    def checked(key, entry) -> None:
        if not isinstance(key, str) or key.count(" | ") < 2:
            raise store.Foreign(f"{key!r} is not a device's key (platform | name | driver)")
        check(entry, repr(key))
    return checked


def load(kind: str) -> dict:
    """Every device's entry in the `kind` file; {} when there is none.  A damaged or foreign file (cut
    short, not JSON, not an object of device entries, an entry not of the kind's schema) keeps the entries
    that can be read whole and are of the schema: they are written back, the file itself set aside, in one
    line (backends/store/)."""
    file, check = path(kind), _entry_check(kind)

    def parse(data) -> store.Parsed[dict]:
        kept, dropped = {}, 0
        for key, value in store.obj(data, "the file").items():
            if not whole(value):
                continue   # the entry at a cut
            try:
                check(key, value)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError):
                dropped += 1
                continue
            kept[key] = value
        return store.Parsed(kept, dropped)

    def said(kept: dict | None) -> str:
        n = len(kept or {})
        return f"the entries of {n} device{'s' if n != 1 else ''} kept"

    got = JsonFile(file, parse, said, dict, _lock_name(kind), empty=lambda kept: not kept).load()
    return got if got is not None else {}


def entry(kind: str, info: dict):
    return load(kind).get(DeviceId.of(info).key)


class DeviceEntry:
    """One device's entry of a cache file, or none; subclasses name the file's KIND."""

    KIND = ""

    def __init__(self, entry: dict | None):
        self.entry = entry if isinstance(entry, dict) else None

    @classmethod
    def for_device(cls, info: dict):
        """This device's entry (none when it has none)."""
        return cls(entry(cls.KIND, info))
