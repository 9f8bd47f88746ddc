"""The user's cache of per-device figures (the measured peak, CLBlast's
tuned parameters): one JSON file per kind, keyed by the device.  Read here;
written by the harness (compare/device_cache.py), atomically.
COMPARE_CACHE_DIR moves it (the tests do)."""
from __future__ import annotations

import json
import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("COMPARE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clblast-compare")
    return Path(base)


def device_key(info: dict) -> str:
    """What tells one device and driver from another: figures never carry over."""
    return f"{info['platform']} | {info['name']} | {info['driver']}"


def path(kind: str) -> Path:
    return cache_dir() / f"{kind}.json"


def load(kind: str) -> dict:
    """Every device's entry in the `kind` file; {} when there is none or it is damaged."""
    try:
        data = json.loads(path(kind).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}   # no cache or a damaged one: measure again


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
