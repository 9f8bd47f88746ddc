"""One JSON file of a store, locked and atomic: read through the one
loader (load.py: checked against its schema, a damaged or foreign file set
aside with what could be kept written back), and changed under its lock by
reading what is on disk, merging, and renaming the whole into place, so two
writers on one machine lose nothing of each other's."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from .files import locked, write_json
from .loader import load, make_folder
from .schema import Parsed

T = TypeVar("T")


@dataclass(frozen=True)
class JsonFile(Generic[T]):
    path: Path
    parse: Callable[[Any], Parsed[T]]   # the file's JSON to its value, checked (schema.Foreign where not of it)
    kept: Callable[[T | None], str]     # what was kept of a damaged file, in words
    dump: Callable[[T], Any]            # the value to the file's JSON
    lock_name: str = ".lock"            # the lock file beside it (one per folder, or one per file)
    indent: int | None = 1
    empty: Callable[[T], bool] | None = None   # a value not worth a file: what a damaged file left is not written

    def lock(self):
        return locked(self.path.parent, self.lock_name)

    def load(self) -> T | None:
        """The file's value; None where there is none."""
        return load(self.path, self.parse, self.kept, self._write_back, self.lock)

    def _write_back(self, value: T) -> None:
        if self.empty is None or not self.empty(value):
            self.write(value)

    def write(self, value: T) -> None:
        write_json(self.path, self.dump(value), indent=self.indent)

    def update(self, change: Callable[[T | None], T]) -> T:
        """Under the lock: `change(the value on disk, or None)` written whole; what it made."""
        make_folder(self.path.parent)
        with self.lock():
            value = change(self.load())
            self.write(value)
        return value
