"""The Hybrid Morton Order layout library: names, the index function and
the numpy converters, against memory orders written out by hand and by
round trips on random shapes.  No OpenCL needed."""
import numpy as np
import pytest

from backends.morton.layout import from_layout, parse, to_layout

# Memory index of every element, written out by hand.
# 4x8 in R_2_4_R: 2-row x 4-column tiles in row-major order, each tile row-major
# (the Morton 4-2 kernel's left matrix: rows 2i and 2i+1 of a tile as two float4s).
R_2_4_R_4x8 = [
    [0, 1, 2, 3, 8, 9, 10, 11],
    [4, 5, 6, 7, 12, 13, 14, 15],
    [16, 17, 18, 19, 24, 25, 26, 27],
    [20, 21, 22, 23, 28, 29, 30, 31],
]
# 8x4 in C_4_2_C: 4-row x 2-column tiles in column-major order, each tile
# column-major (the kernel's right matrix: columns 2j and 2j+1 as two float4s).
C_4_2_C_8x4 = [
    [0, 4, 16, 20],
    [1, 5, 17, 21],
    [2, 6, 18, 22],
    [3, 7, 19, 23],
    [8, 12, 24, 28],
    [9, 13, 25, 29],
    [10, 14, 26, 30],
    [11, 15, 27, 31],
]
# 4x8 in C_2_2_R: 2x2 tiles in column-major order, each tile row-major.
C_2_2_R_4x8 = [
    [0, 1, 8, 9, 16, 17, 24, 25],
    [2, 3, 10, 11, 18, 19, 26, 27],
    [4, 5, 12, 13, 20, 21, 28, 29],
    [6, 7, 14, 15, 22, 23, 30, 31],
]
# 3x5 in R_2_4_R: padded to 4x8, the padding positions keep their indices.
R_2_4_R_3x5 = [row[:5] for row in R_2_4_R_4x8[:3]]

NAMES = ["R", "C", "R_2_4_R", "C_4_2_C", "R_4_4_R", "C_4_4_C", "C_2_2_R", "R_8_4_C_2_2_R",
         "C_6_4_R_3_2_C_1_1_R", "R_2_4_R_1_1_A"]


@pytest.mark.parametrize("name, shape, table", [
    ("R_2_4_R", (4, 8), R_2_4_R_4x8),
    ("C_4_2_C", (8, 4), C_4_2_C_8x4),
    ("C_2_2_R", (4, 8), C_2_2_R_4x8),
    ("R_2_4_R", (3, 5), R_2_4_R_3x5),
])
def test_index_matches_the_hand_written_order(name, shape, table):
    layout = parse(name)
    rows, cols = shape
    table = np.array(table)
    got = [[layout.index(r, c, rows, cols) for c in range(cols)] for r in range(rows)]
    assert got == table.tolist()
    assert np.array_equal(layout.indices(rows, cols)[:rows, :cols], table)
    # the converter puts element (r, c) at that index
    m = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) + 1
    flat = to_layout(name, m)
    assert np.array_equal(flat[table], m)


def test_hand_written_memory_order_as_a_list():
    # Reading the R_2_4_R buffer of a 4x8 matrix whose elements are 10*row + col
    m = np.array([[10 * r + c for c in range(8)] for r in range(4)], np.float32)
    assert to_layout("R_2_4_R", m).tolist() == [
        0, 1, 2, 3, 10, 11, 12, 13, 4, 5, 6, 7, 14, 15, 16, 17,
        20, 21, 22, 23, 30, 31, 32, 33, 24, 25, 26, 27, 34, 35, 36, 37]
    m = np.array([[10 * r + c for c in range(4)] for r in range(8)], np.float32)
    assert to_layout("C_4_2_C", m).tolist() == [
        0, 10, 20, 30, 1, 11, 21, 31, 40, 50, 60, 70, 41, 51, 61, 71,
        2, 12, 22, 32, 3, 13, 23, 33, 42, 52, 62, 72, 43, 53, 63, 73]


def test_plain_layouts_are_row_and_column_major():
    m = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    assert np.array_equal(to_layout("R", m), m.ravel())
    assert np.array_equal(to_layout("C", m), m.T.ravel())


def test_column_layout_is_the_transposed_row_layout():
    m = np.random.default_rng(1).standard_normal((12, 20)).astype(np.float32)
    assert np.array_equal(to_layout("C_4_2_C", m), to_layout("R_2_4_R", m.T))
    assert np.array_equal(to_layout("C_4_4_C", m), to_layout("R_4_4_R", m.T))


@pytest.mark.parametrize("name", NAMES)
def test_round_trips_on_random_shapes(name):
    layout = parse(name)
    rng = np.random.default_rng(len(name))
    for rows, cols in [(1, 1), (3, 5), (7, 13), (24, 16), (33, 2), (2, 41)] + \
            [tuple(rng.integers(1, 60, 2)) for _ in range(4)]:
        m = rng.standard_normal((rows, cols)).astype(np.float32)
        flat = layout.to_layout(m)
        p, q = layout.padded_shape(rows, cols)
        ty, tx = layout.tile
        assert (p % ty, q % tx) == (0, 0) and p - rows < ty and q - cols < tx
        assert flat.shape == (p * q,) and flat.dtype == np.float32
        assert np.array_equal(layout.from_layout(flat, rows, cols), m)
        idx = layout.indices(rows, cols)
        assert np.array_equal(np.sort(idx.ravel()), np.arange(p * q))        # a permutation
        assert np.array_equal(flat[idx[:rows, :cols]], m)                      # agrees with the index
        pad = np.ones(p * q, bool)
        pad[idx[:rows, :cols].ravel()] = False
        assert not flat[pad].any()                                             # padding is zero


@pytest.mark.parametrize("name", NAMES)
def test_index_function_agrees_with_the_vectorised_one(name):
    layout = parse(name)
    rows, cols = 13, 10
    idx = layout.indices(rows, cols)
    p, q = layout.padded_shape(rows, cols)
    assert all(layout.index(r, c, rows, cols) == idx[r, c] for r in range(p) for c in range(q))


def test_pad_to_a_larger_multiple():
    # the Morton GEMM wants its matrices padded past the tile: rows to 8, columns to 32
    m = np.random.default_rng(2).standard_normal((5, 37)).astype(np.float32)
    flat = to_layout("C_4_2_C", m, pad_to=(8, 64))
    assert flat.size == 8 * 64
    assert np.array_equal(from_layout("C_4_2_C", flat, 5, 37, pad_to=(8, 64)), m)
    full = from_layout("C_4_2_C", flat, 8, 64)
    assert np.array_equal(full[:5, :37], m) and not full[5:].any() and not full[:, 37:].any()
    with pytest.raises(ValueError, match="multiple of the 4 x 2 tile"):
        to_layout("C_4_2_C", m, pad_to=(6, 64))
    with pytest.raises(ValueError, match="hold the matrix"):
        to_layout("C_4_2_C", m, pad_to=(4, 64))


@pytest.mark.parametrize("name, problem", [
    ("", "non-empty"),
    ("X", "must be R"),
    ("R_2_4_Q", "must be R"),
    ("R_2_4", "triplets"),
    ("R_2_4_R_2", "triplets"),
    ("R_0_4_R", "natural numbers"),
    ("R_2_x_R", "natural numbers"),
    ("R_-2_4_R", "natural numbers"),
    ("R_4_4_R_3_2_C", "does not divide"),
    ("C_4_2_C_4_4_R", "does not divide"),
])
def test_bad_names_are_refused_with_the_problem(name, problem):
    with pytest.raises(ValueError, match=problem):
        parse(name)


def test_large_conversions_are_vectorised():
    # VGG-16's largest im2col matrix (576 x 50176) converts both ways without
    # a Python loop over elements; correctness on a sample of elements
    layout = parse("C_4_2_C")
    m = np.random.default_rng(3).standard_normal((576, 50176)).astype(np.float32)
    flat = layout.to_layout(m)
    rng = np.random.default_rng(4)
    for r, c in zip(rng.integers(0, 576, 50), rng.integers(0, 50176, 50)):
        assert flat[layout.index(r, c, 576, 50176)] == m[r, c]
    assert np.array_equal(layout.from_layout(flat, 576, 50176), m)
