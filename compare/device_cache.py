"""Writing an entry of the per-device cache (backends/cache.py reads it):
the whole file is rewritten atomically under its lock, what other processes
wrote kept, so an interrupt leaves the old one;
one that cannot be written is kept elsewhere (compare/keep.py), since it can
hold a tuning that took a quarter of an hour."""
from __future__ import annotations

import json

from backends import cache
from backends.store import DeviceId

from .keep import Kept, keep_file, text_writer


def store(kind: str, info: dict, value, what: str = "the cache file", merge=None) -> Kept:
    """`value` as this device's entry of the `kind` file, or `merge(entry there or None, value)` where
    given (read and written under the lock, so two tunes of one device keep each other's parts); where
    the file went (Kept.problem says why when not into the cache: copy it there to use it)."""
    with cache.lock(kind):   # another process's entries written meanwhile are kept
        data = cache.load(kind)
        key = DeviceId.of(info).key
        data[key] = value if merge is None else merge(data.get(key), value)
        kept = keep_file(cache.path(kind), text_writer(json.dumps(data, indent=1) + "\n"), what, "the new cache file")
    if kept.problem and kept.path:
        kept.problem += f"; copy it to {cache.path(kind)} to use it"
    return kept
