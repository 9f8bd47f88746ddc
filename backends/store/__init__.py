"""The one store under every search and every backend that reads what a
search chose: a device named one way (DeviceId), a file locked across
processes and threads (filelock) and written whole or not at all
(JsonFile), one loader that checks each file against its schema and sets
a damaged or foreign one aside with what could be kept (load.py), and the
checks of a schema's fields (schema.py).  Every store lives under the one
cache root (backends/cache.py: COMPARE_CACHE_DIR moves it).

Hours of search live in these files: losing one silently is the one thing
a store must not do."""
from __future__ import annotations

from .device import DeviceId
from .files import locked, read_json, set_aside, write_json
from .json_file import JsonFile
from .loader import MAX_BYTES, load, make_folder
from .salvage import PartialDict, PartialList, salvage, whole
from .schema import Foreign, Parsed, array, entries, need, number, obj, text, whole_number

__all__ = ["DeviceId", "Foreign", "JsonFile", "MAX_BYTES", "Parsed", "PartialDict", "PartialList", "array",
           "entries", "load", "locked", "make_folder", "need", "number", "obj", "read_json", "salvage", "set_aside",
           "text", "whole", "whole_number", "write_json"]
