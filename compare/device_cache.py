"""Writing an entry of the per-device cache (backends/cache.py reads it):
the whole file is rewritten atomically, so an interrupt leaves the old one."""
from __future__ import annotations

import json
from pathlib import Path

from backends import cache

from .files import write_text_atomic


def store(kind: str, info: dict, value) -> Path:
    data = cache.load(kind)
    data[cache.device_key(info)] = value
    path = cache.path(kind)
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return path
