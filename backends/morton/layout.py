"""Hybrid Morton Order matrix layouts (Rovder 2017, chapter 8 and appendix
12.5): names, the index of an element, and numpy converters.

A layout name is the study's shortened grammar

    Layout -> Base0 ( "_" Y "_" X "_" Base )*        Base -> R | C

e.g. "R", "C", "R_2_4_R", "C_4_2_C", "R_4_4_R", "R_8_8_C_2_4_R".  The matrix
is cut into tiles of Y1 rows by X1 columns laid out one after another in
Base0 order (R: row-major order of tiles, C: column-major); each tile is
cut into Y2 x X2 tiles in Base1 order, and so on; the last level's tiles
hold their elements in the last Base's order.  Y counts rows and X columns:
that is what the study's Morton 4-2 kernel needs (its left matrix, R_2_4_R,
is read as float4 quadruplets along a row, rows 2i and 2i+1 of one tile
side by side; its right matrix, C_4_2_C, as quadruplets down a column).
The study's full form may end in "_1_1_A" (1x1 tiles, arbitrary order); it
is accepted and dropped.  Each level's tile must divide the one above it.

The index (the study's MIndex recursion, 0-based) of element (row, col) of
a matrix padded to P rows and Q columns is, with (Y0, X0) = (P, Q) and
(Yn+1, Xn+1) = (1, 1),

    sum_k  Index(Base_k, Yk/Yk+1, Xk/Xk+1, (row % Yk) / Yk+1, (col % Xk) / Xk+1) * Yk+1 * Xk+1

    Index(R, rows, cols, r, c) = r * cols + c     Index(C, rows, cols, r, c) = c * rows + r

The OCR'd study prints the tile counts to Index as (X/X', Y/Y'): with Y as
rows (which the kernel and row / Y' fix) it must be (Y/Y', X/X'), as here;
and its terminal MIndex(1, 1, ...) = 1 is a 1-based count, 0 here.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BASES = ("R", "C")


@dataclass(frozen=True)
class Layout:
    name: str
    bases: tuple      # Base0 .. Basen, outermost first
    tiles: tuple      # ((Y1, X1), .., (Yn, Xn)): tile (rows, cols) of levels 1..n

    # -- sizes
    @property
    def tile(self) -> tuple[int, int]:
        """(rows, cols) the matrix is padded to multiples of."""
        return self.tiles[0] if self.tiles else (1, 1)

    def padded_shape(self, rows: int, cols: int, pad_to: tuple | None = None) -> tuple[int, int]:
        """The stored shape: (rows, cols) rounded up to the tile, or `pad_to`
        when given (it must hold the matrix and be a multiple of the tile)."""
        ty, tx = self.tile
        if pad_to is None:
            return -(-rows // ty) * ty, -(-cols // tx) * tx
        p, q = (int(v) for v in pad_to)
        if p < rows or q < cols or p % ty or q % tx:
            raise ValueError(f"{self.name}: cannot store a {rows} x {cols} matrix as {p} x {q}: the padded shape "
                             f"must hold the matrix and be a multiple of the {ty} x {tx} tile")
        return p, q

    def _levels(self, p: int, q: int):
        """(base, tile rows, tile cols, sub-tile rows, sub-tile cols) per level."""
        outer = ((p, q),) + self.tiles
        inner = self.tiles + ((1, 1),)
        return [(b, y, x, yy, xx) for b, (y, x), (yy, xx) in zip(self.bases, outer, inner)]

    # -- the index function
    def index(self, row: int, col: int, rows: int, cols: int, pad_to: tuple | None = None) -> int:
        """Memory index of element (row, col) of a rows x cols matrix."""
        p, q = self.padded_shape(rows, cols, pad_to)
        if not (0 <= row < p and 0 <= col < q):
            raise IndexError(f"({row}, {col}) is outside the {p} x {q} padded matrix")
        total = 0
        for base, y, x, yy, xx in self._levels(p, q):
            r, c = (row % y) // yy, (col % x) // xx
            nr, nc = y // yy, x // xx
            total += (r * nc + c if base == "R" else c * nr + r) * yy * xx
        return total

    def indices(self, rows: int, cols: int, pad_to: tuple | None = None) -> np.ndarray:
        """The index of every element of the padded matrix, (P, Q) int64:
        the same sum as index(), on broadcast row and column vectors."""
        p, q = self.padded_shape(rows, cols, pad_to)
        row = np.arange(p, dtype=np.int64)[:, None]
        col = np.arange(q, dtype=np.int64)[None, :]
        total = np.zeros((p, q), np.int64)
        for base, y, x, yy, xx in self._levels(p, q):
            r, c = (row % y) // yy, (col % x) // xx
            nr, nc = y // yy, x // xx
            total += (r * nc + c if base == "R" else c * nr + r) * (yy * xx)
        return total

    # -- converters: a reshape into one axis per tile level, then a transpose
    def _axes(self, p: int, q: int):
        """The padded matrix as axes (r0, .., rn, c0, .., cn), r_k counting
        level-k tiles within a level-(k-1) tile, and the order in memory."""
        levels = self._levels(p, q)
        shape = [y // yy for _, y, _, yy, _ in levels] + [x // xx for _, _, x, _, xx in levels]
        n = len(levels)
        order = []
        for k, (base, *_rest) in enumerate(levels):
            order += [k, n + k] if base == "R" else [n + k, k]
        return shape, order

    def to_layout(self, matrix: np.ndarray, pad_to: tuple | None = None) -> np.ndarray:
        """A row-major (rows, cols) matrix as this layout: 1-D float32 of P*Q
        elements, the padding zero."""
        matrix = np.asarray(matrix, np.float32)
        if matrix.ndim != 2:
            raise ValueError(f"{self.name}: expected a 2-D matrix, got shape {matrix.shape}")
        rows, cols = matrix.shape
        p, q = self.padded_shape(rows, cols, pad_to)
        padded = np.zeros((p, q), np.float32)
        padded[:rows, :cols] = matrix
        shape, order = self._axes(p, q)
        return np.ascontiguousarray(padded.reshape(shape).transpose(order)).ravel()

    def from_layout(self, flat: np.ndarray, rows: int, cols: int, pad_to: tuple | None = None) -> np.ndarray:
        """The (rows, cols) row-major matrix held in `flat` (padding dropped)."""
        p, q = self.padded_shape(rows, cols, pad_to)
        flat = np.asarray(flat).ravel()
        if flat.size < p * q:
            raise ValueError(f"{self.name}: {flat.size} elements cannot hold a {p} x {q} padded matrix")
        shape, order = self._axes(p, q)
        stored = flat[:p * q].reshape([shape[a] for a in order])
        return np.ascontiguousarray(stored.transpose(np.argsort(order)).reshape(p, q)[:rows, :cols])


@lru_cache(maxsize=None)
def parse(name: str) -> Layout:
    """The layout a name describes; ValueError naming the problem otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"layout name must be a non-empty string like 'R_2_4_R', not {name!r}")
    parts = name.strip().split("_")
    if parts[-3:] == ["1", "1", "A"] and len(parts) > 3:   # the study's redundant terminal
        parts = parts[:-3]
    if (len(parts) - 1) % 3:
        raise ValueError(f"layout {name!r}: expected Base followed by Y_X_Base triplets "
                         f"(e.g. 'R_2_4_R'), got {len(parts)} parts")
    bases = parts[0::3]
    for b in bases:
        if b not in BASES:
            raise ValueError(f"layout {name!r}: base {b!r} must be R (row-major) or C (column-major)")
    tiles = []
    for k in range(1, len(parts), 3):
        y, x = parts[k], parts[k + 1]
        if not (y.isdigit() and x.isdigit()) or int(y) < 1 or int(x) < 1:
            raise ValueError(f"layout {name!r}: tile sizes must be natural numbers, got {y!r} x {x!r}")
        tiles.append((int(y), int(x)))
    for (y0, x0), (y1, x1) in zip(tiles, tiles[1:]):
        if y0 % y1 or x0 % x1:
            raise ValueError(f"layout {name!r}: tile {y1}x{x1} does not divide the tile {y0}x{x0} above it "
                             f"(each level's rows and columns must divide the previous level's)")
    return Layout(name, tuple(bases), tuple(tiles))


def to_layout(name: str, matrix: np.ndarray, pad_to: tuple | None = None) -> np.ndarray:
    return parse(name).to_layout(matrix, pad_to)


def from_layout(name: str, flat: np.ndarray, rows: int, cols: int, pad_to: tuple | None = None) -> np.ndarray:
    return parse(name).from_layout(flat, rows, cols, pad_to)
