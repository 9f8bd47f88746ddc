"""Writing files so that a reader never sees half of one."""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from backends.atomic import current_umask, kind, signals_held


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
        with signals_held():
            for f in sorted(stage.iterdir()):
                os.chmod(f, 0o666 & ~current_umask())
                os.replace(f, out / f.name)
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
    from nets.errors import UserError
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


@dataclass(frozen=True)
class Output:
    """A path a command writes: a file (no `names`), or a folder and the names (globs) it writes into it."""

    flag: str
    path: str | os.PathLike
    names: tuple[str, ...] = ()


def _same(a: Path, b: Path) -> bool:
    """One file under two names: the same path once links are followed, or one inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_apart(outputs: list[Output], inputs: list[tuple[str, str | os.PathLike | None]]) -> None:
    """UserError (exit 2), before any work, when a path the command would write is one it reads:
    `inputs` pairs each input's flag (e.g. '--net') with the path given, None where none was.  Paths
    are compared with links followed, so a link or a hard link to an input clashes too."""
    from nets.errors import UserError
    given = [(flag, Path(p)) for flag, p in inputs if p is not None and os.path.lexists(p)]
    for out in outputs:
        target = Path(out.path)
        for flag, src in given:
            if not out.names:
                if _same(target, src):
                    raise UserError(f"{out.flag} {target} is the {flag} file {src}: writing there would destroy "
                                    f"it; give {out.flag} another file name")
                continue
            folder = os.path.realpath(target)
            for name in out.names:
                concrete = not any(ch in name for ch in "*?[")
                clash = (_same(target / name, src) if concrete and os.path.lexists(target / name) else
                         os.path.dirname(os.path.realpath(src)) == folder
                         and fnmatch(os.path.basename(os.path.realpath(src)), name))
                if clash:
                    raise UserError(f"{out.flag} {target} would get {name if concrete else src.name} written "
                                    f"into it, which is the {flag} file {src}: writing there would destroy it; "
                                    f"give {out.flag} another folder")
