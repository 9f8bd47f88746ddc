"""Opening a file the user named, the one way every reader does it: the
path is checked to be a regular file (links followed) of a plausible size
before a byte is read, so a named pipe never hangs a command, a device
such as /dev/zero never fills the memory, and a folder or a device is
called what it is rather than "not found".  Every refusal is a UserError
naming the file, what was found there and what to do.

This module sits in nets/ (the bottom of the import order) so that the
weights, the model importers and the harness's results readers share it;
`kind` is also what the writers (backends/atomic.py) ask.
"""
from __future__ import annotations

import errno
import gzip
import os
import stat
import zlib
from pathlib import Path

from .errors import UserError

GiB = 2**30


def kind(path: str | os.PathLike) -> str | None:
    """What is at `path` (links followed), in words: 'a regular file',
    'a folder', 'a character device', ...; None when nothing is."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:   # a loop of links, a name too long: nothing readable is there
        return None
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a special file"


def size_text(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} bytes"


def regular_file(path: str | os.PathLike, what: str, max_bytes: int | None = None, fix: str = "",
                 empty_ok: bool = False) -> Path:
    """`path` as a Path, once it is known to be a regular file (links
    followed) of at most `max_bytes` bytes (and not empty unless `empty_ok`);
    else a UserError that begins with `what` and the path (e.g. "results file
    r.json") and ends with `fix`, what to do (a clause without the leading
    '; ')."""
    path = Path(path)
    there = kind(path)
    tail = f"; {fix}" if fix else ""
    if there is None:
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UserError(f"{what} {path} is a loop of links, which leads to no file{tail}") from None
            raise UserError(f"{what} {path} is a link to {os.readlink(path)}, where nothing is{tail}")
        raise UserError(f"{what} {path} not found{tail}")
    if there == "a folder":
        raise UserError(f"{what} {path} is a folder, not a file{tail}")
    if there != "a regular file":   # a pipe may never end, /dev/zero never does: neither is read
        raise UserError(f"{what} {path} is {there}, not a regular file, and is not read (a device, a pipe or a "
                        f"socket may never end){tail}")
    size = os.stat(path).st_size
    if not empty_ok and size == 0:
        raise UserError(f"{what} {path} is empty{tail}")
    if max_bytes is not None and size > max_bytes:
        raise UserError(f"{what} {path} is {size_text(size)}, more than any such file can be "
                        f"(at most {size_text(max_bytes)}){tail}")
    if not os.access(path, os.R_OK):
        raise UserError(f"{what} {path} cannot be read by this user (its permissions){tail}")
    return path


def read_text(path: str | os.PathLike, what: str, max_bytes: int, fix: str = "") -> str:
    """The text of a user's UTF-8 file, checked by `regular_file` first; a name ending in .gz is
    read through gzip, and refused where it does not decompress or decompresses past `max_bytes`."""
    path = regular_file(path, what, max_bytes, fix)
    packed = str(path).endswith(".gz")
    try:
        with (gzip.open(path, "rb") if packed else open(path, "rb")) as f:
            data = f.read(max_bytes + 1)   # the file may have grown since it was checked
    except (OSError, EOFError, zlib.error) as exc:   # a truncated or spoilt gzip file among them
        tail = f"; {fix}" if fix else ""
        if packed:
            raise UserError(f"{what} {path} is not a whole gzip file ({exc}){tail}") from None
        raise UserError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        if packed:
            raise UserError(f"{what} {path} decompresses past {size_text(max_bytes)}: no such file is this tool's")
        raise UserError(f"{what} {path} grew past {size_text(max_bytes)} while it was read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        tail = f"; {fix}" if fix else ""
        raise UserError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start}){tail}") from None
