"""Writing a file so that a reader never sees half of it: the one atomic
writer of every layer (the harness's results and the backends' tuning
files alike); compare/files.py builds the rest on it."""
from __future__ import annotations

import errno
import os
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

from nets.userfile import kind   # what is at a path, in words: shared with the readers of users' files


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM held back for the block (and for any process it starts, which inherits the
    mask), then delivered: for work that a signal must not cut in half."""
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)   # a signal held back arrives now


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; rename it over `path` only when
    the block finishes.  On any exit by exception (Ctrl-C included) the
    temporary file is removed and `path` keeps its old content."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the usual mode
    try:
        yield tmp
        there = kind(path)
        if there not in (None, "a regular file"):   # the rename would replace a device or a pipe
            raise OSError(errno.EEXIST, f"{there} is there, not a regular file, and is left alone", str(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
