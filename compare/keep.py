"""Files of finished work that cannot be written where asked (a full disk,
a quota, a folder gone read-only while a run took an hour) are written into
another folder instead, and one line names both: no run's work is lost to
a write that fails at the end.

A Keeper writes the files of one target folder, one by one, each staged and
renamed into place (compare/files.py).  When one cannot be written, it and
every file written before it go to a fresh folder under the first fallback
that takes them (the system's temporary folder, the current folder, home),
and the rest follow there: the set stays whole in one place, which a sweep
file, naming its results files relative to itself, needs.
"""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backends.atomic import atomic_path

Writer = Callable[[str], None]   # fills the file at the path it is given


def fallback_bases() -> list[Path]:
    return [Path(tempfile.gettempdir()), Path.cwd(), Path.home()]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _write(path: Path, write: Writer) -> None:
    with atomic_path(path) as tmp:
        write(tmp)


def text_writer(text: str) -> Writer:
    return lambda tmp: Path(tmp).write_text(text, encoding="utf-8")


class Keeper:
    """The files of target folder `asked`; `folder` is where they are now."""

    def __init__(self, asked: str | os.PathLike):
        self.asked = Path(asked)
        self.folder = self.asked
        self.error: OSError | None = None      # why the files are not (all) in `asked`
        self.failed_at: str | None = None      # the first file that could not be written there
        self.lost: str | None = None           # why no fallback took them either
        self._writers: dict[str, Writer] = {}
        self._tried: dict[Path, str] = {}      # fallback folders that failed, and why

    @property
    def written_before_failing(self) -> list[str]:
        """The files that were written where asked before one could not be (they stay there)."""
        names = list(self._writers)
        return names[:names.index(self.failed_at)] if self.failed_at else []

    def write(self, name: str, write: Writer) -> Path | None:
        """The file `name` written by `write` into the set's folder: its path,
        or None when neither the target nor any fallback took it."""
        self._writers[name] = write
        if self.lost is None:
            try:
                _write(self.folder / name, write)
                return self.folder / name
            except OSError as exc:
                if self.error is None:
                    self.error, self.failed_at = exc, name
                else:   # the fallback failed too: the next one takes the whole set
                    self._tried[self.folder.parent] = _why(exc)
                    shutil.rmtree(self.folder, ignore_errors=True)
                self._move_on()
        return None if self.lost is not None else self.folder / name

    def write_text(self, name: str, text: str) -> Path | None:
        return self.write(name, text_writer(text))

    def _move_on(self) -> None:
        """Every file so far written again into a fresh fallback folder."""
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        done = {self.asked.resolve()} | {p.resolve() for p in self._tried}
        for base in fallback_bases():
            if base.resolve() in done:
                continue
            done.add(base.resolve())
            folder = None
            try:
                folder = Path(tempfile.mkdtemp(prefix=f"compare-kept-{stamp}-", dir=base))
                for name, write in self._writers.items():
                    _write(folder / name, write)
            except OSError as exc:
                self._tried[base] = _why(exc)
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
                continue
            self.folder = folder
            return
        self.lost = "; ".join(f"{p}: {why}" for p, why in self._tried.items())

    def problem(self, what: str, noun: str, hint: str = "") -> str | None:
        """The one line that says what could not be written where, why, and
        where the set (`noun`) is instead; None when it all went where asked."""
        if self.error is None:
            return None
        at = f", at {self.failed_at}" if self.failed_at and len(self._writers) > 1 else ""
        head = f"cannot write {what} {self.asked} ({_why(self.error)}{at})"
        if self.lost is not None:
            return f"{head}, nor keep the {noun} anywhere else ({self.lost})"
        return f"{head}: {noun} kept whole in {self.folder}{os.sep} instead{hint}"


@dataclass
class Kept:
    """One file: where it is (None: nowhere), and the line that says why it
    is not where asked (None when it is)."""

    path: Path | None
    problem: str | None = None


def keep_file(path: str | os.PathLike, write: Writer, what: str, noun: str) -> Kept:
    """One file written at `path` by `write`, or kept in a fallback folder.
    `what` names the target in the message (e.g. '--out'), `noun` the file."""
    path = Path(path)
    keeper = Keeper(path.parent)
    written = keeper.write(path.name, write)
    if keeper.error is None:
        return Kept(written)
    head = f"cannot write {what} {path} ({_why(keeper.error)})"
    if written is None:
        return Kept(None, f"{head}, nor keep the {noun} anywhere else ({keeper.lost})")
    return Kept(written, f"{head}: {noun} kept in {written} instead")
