"""Reading numpy's .npy format from a user's file (an input) or a member of
an .npz archive (weights) with the header checked against the data before
anything is allocated: a header may claim any shape, and numpy allocates
what it claims before it finds the data missing (a 4-byte file claiming a
terabyte is a MemoryError, or the kernel's out-of-memory killer).

`Header` is what the header says; `header_of` reads and checks it (the
format's magic and version, a plain numeric dtype: never an object array,
which would be a pickle); `check_holds` holds its claim against the bytes
that follow it; `read_data` then reads exactly those bytes.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from .errors import UserError

MAX_HEADER = 10_000   # numpy's own limit for a header read without allow_pickle
SAVE_AGAIN = "save it again with numpy.save"


@dataclass(frozen=True)
class Header:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int          # bytes of magic and header before the data

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def header_of(f, source: str) -> Header:
    """The header of the .npy stream `f` (at its start), checked; UserError naming `source` otherwise."""
    fmt = np.lib.format
    try:
        major, minor = fmt.read_magic(f)
    except (ValueError, EOFError, OSError) as exc:
        raise UserError(f"{source} is not a .npy array ({_first(exc)}); {SAVE_AGAIN}") from None
    if (major, minor) not in ((1, 0), (2, 0)):
        raise UserError(f"{source} is a .npy array of format version {major}.{minor}, which this reads not "
                        f"(1.0 and 2.0 only); {SAVE_AGAIN}")
    read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
    try:
        shape, fortran_order, dtype = read(f, max_header_size=MAX_HEADER)
    except (ValueError, EOFError, OSError, TypeError, SyntaxError, MemoryError) as exc:
        raise UserError(f"{source} has a damaged .npy header ({_first(exc)}); {SAVE_AGAIN}") from None
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                               for d in shape):
        raise UserError(f"{source}: its .npy header claims shape {shape!r}, which is no array's; {SAVE_AGAIN}")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biuf":
        raise UserError(f"{source} holds dtype {dtype}, not numbers (an array of objects would be a pickle, "
                        f"never loaded); {SAVE_AGAIN} as float32")
    if math.prod(d for d in shape if d) * max(dtype.itemsize, 1) >= 2**63:   # even with a 0 in it
        raise UserError(f"{source}: its .npy header claims shape {shape}, larger than any array can be; {SAVE_AGAIN}")
    return Header(tuple(shape), dtype, bool(fortran_order), f.tell())


def check_holds(header: Header, data_bytes: int, source: str) -> None:
    """UserError unless the `data_bytes` after the header are exactly what it claims."""
    if header.nbytes != data_bytes:
        said = "cut short, or its header forged" if header.nbytes > data_bytes else "bytes past its data"
        raise UserError(f"{source}: its .npy header claims shape {header.shape} of {header.dtype} "
                        f"({header.nbytes:,} bytes), but it holds {data_bytes:,} bytes of data ({said}); {SAVE_AGAIN}")


def read_data(f, header: Header, source: str) -> np.ndarray:
    """The array whose header `header_of` read from `f` and `check_holds` checked."""
    data = f.read(header.nbytes)
    if len(data) != header.nbytes:   # the file changed since it was measured
        raise UserError(f"{source} was cut short while it was read ({len(data):,} of {header.nbytes:,} bytes)")
    order = "F" if header.fortran_order else "C"
    return np.frombuffer(data, header.dtype).reshape(header.shape, order=order).copy(order="C")


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def load_checked(raw: bytes, source: str) -> np.ndarray:
    """A whole .npy held in memory, checked as above (for tests and small files)."""
    f = io.BytesIO(raw)
    header = header_of(f, source)
    check_holds(header, len(raw) - header.offset, source)
    return read_data(f, header, source)
