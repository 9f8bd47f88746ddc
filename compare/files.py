"""Writing files so that a reader never sees half of one."""
from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path


def kind(path: str | os.PathLike) -> str | None:
    """What is at `path` (links followed), in words: 'a regular file',
    'a folder', 'a character device', ...; None when nothing is."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a special file"


def _umask() -> int:
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
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
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


@contextmanager
def staged_folder(out_dir: str | os.PathLike):
    """Yield a fresh folder beside `out_dir` to write a set of files into;
    when the block finishes, move each into `out_dir` with Ctrl-C and SIGTERM
    held back, so the set lands whole or, on an exit by exception, not at
    all (the staging folder is removed and `out_dir` is as it was)."""
    out = Path(out_dir)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    stage = None
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if str(out.parent) else "."))
        yield stage
        held = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            for f in sorted(stage.iterdir()):
                os.chmod(f, 0o666 & ~_umask())
                os.replace(f, out / f.name)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)   # a signal held back arrives now
    except BaseException:
        if made:   # the folder this call made goes too, unless something landed in it
            try:
                out.rmdir()
            except OSError:
                pass
        raise
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


RESULTS_ROOM = 2**20   # about the largest results file (VGG-16, every backend: 600 KB)


def check_writable(path: str | os.PathLike, what: str, folder: bool = False, room: int = RESULTS_ROOM) -> None:
    """UserError now, before any work, when `path` could not be written later:
    an existing path of the wrong kind, no writable folder to make it in, or
    a folder where a staging file of `room` bytes cannot be made (a full disk,
    a quota).  A device, a pipe or a socket is refused, never replaced by a file."""
    from .errors import UserError
    path = Path(path)
    there = kind(path)
    wanted = "a folder" if folder else "a regular file"
    if there is not None and there != wanted:
        if there in ("a folder", "a regular file"):
            raise UserError(f"{what} {path} is {'a file' if there == 'a regular file' else there}; "
                            f"give {'a folder' if folder else 'a file name'} there")
        raise UserError(f"{what} {path} is {there}, not {wanted}: refused, since writing there would replace it; "
                        f"give {'a folder' if folder else 'a file name'} there")
    ancestor = path if folder and there else path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path} cannot be written: {ancestor} is not a folder this user may write to")
    try:
        _probe(ancestor, room)
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be written: {exc.strerror or exc} in {ancestor} (a staging file "
                        f"of {room / 2**20:.1f} MiB was tried before any work)") from None


def _probe(folder: Path, room: int) -> None:
    """Make a staging file in `folder` with `room` bytes reserved, and remove it."""
    fd, tmp = tempfile.mkstemp(prefix=".compare-probe.", suffix=".tmp", dir=folder)
    try:
        try:
            os.posix_fallocate(fd, 0, room)
        except (AttributeError, OSError) as exc:   # no fallocate here, or a file system that cannot reserve
            if isinstance(exc, OSError) and exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            os.write(fd, bytes(min(room, RESULTS_ROOM)))
            os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(tmp)
