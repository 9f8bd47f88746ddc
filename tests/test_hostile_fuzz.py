"""Fuzzing what a user's files may hold (issue 44): results files with one
value replaced by a hostile one, and .npy headers of any shape, dtype and
length.  Either the file is refused with a UserError, or what is accepted
is sane (finite, non-negative numbers; a batch and repeats of one or more;
an array exactly as large as the bytes it came from) and renders; never
another exception, and never an allocation of what a header only claims."""
from __future__ import annotations

import io
import json
import math

import numpy as np
from hypothesis import HealthCheck, event, given, settings, strategies as st

from compare.results import RunResult, parse_results
from compare.tables import check_table, layer_table, summary_table
from nets.errors import UserError
from nets.npy import load_checked
from results_factory import small_results_dict

EXAMPLES = 120   # a fresh draw each run (no example database): CI explores anew every time


# -- results files -------------------------------------------------------------------

def _places(obj, at=()):
    """Every path into parsed JSON `obj` (the root excluded)."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return
    for k, v in items:
        yield at + (k,)
        yield from _places(v, at + (k,))


PLACES = list(_places(small_results_dict()))
# the places that hold a summary of samples: a whole consistent summary put there, of any values
SAMPLES = [at for at in PLACES if isinstance(_at := __import__("functools").reduce(lambda d, k: d[k], at,
                                                                                      small_results_dict()), dict)
           and {"median", "values"} <= _at.keys()]

BENIGN = st.one_of(st.floats(min_value=0, max_value=1e6), st.integers(min_value=1, max_value=1000), st.text(max_size=8))
HOSTILE = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -1, -1e-9, 0, 0.0, -(2**63), 2**64, 1e308,
                     True, None, "", "NaN", [], {}]),
    st.integers(min_value=-10**6, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.integers(min_value=20, max_value=60).map(lambda n: json.loads("[" * n + "]" * n)),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
)


def _summary(values: list[float]) -> dict:
    """A summary as compare run writes one (compare.results.Samples), of any values, NaN included."""
    from dataclasses import asdict

    from compare.results import Samples
    return asdict(Samples.of(values))


def _put(d, at, value):
    for k in at[:-1]:
        d = d[k]
    d[at[-1]] = value


def _numbers(obj, at=(), signed=False):
    """(path, number, may be negative) of every number in a decoded result (free-form dicts skipped)."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return
    if isinstance(obj, (int, float)):
        yield at, obj, signed
        return
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, at + (i,), signed)
        return
    if hasattr(obj, "__dataclass_fields__"):
        for name, f in obj.__dataclass_fields__.items():
            if name in ("info", "config", "details", "gpu_state"):   # free-form records, shown as they are
                continue
            yield from _numbers(getattr(obj, name), at + (name,), signed or f.metadata.get("signed", False))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, at + (k,), signed)


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(places=st.lists(st.sampled_from(PLACES), max_size=2),
       values=st.lists(st.one_of(HOSTILE, BENIGN), min_size=2, max_size=2),
       summaries=st.lists(st.tuples(st.sampled_from(SAMPLES),
                                    st.lists(st.one_of(st.floats(-1.0, 1e9), st.sampled_from([0.0, float("nan")])),
                                             min_size=1, max_size=5)), max_size=3))
def test_a_spoilt_results_file_is_refused_or_sane_and_renders(places, values, summaries):
    d = small_results_dict()
    for at, xs in summaries:
        _put(d, at, _summary(xs))
    for at, value in zip(places, values):
        try:
            _put(d, at, value)
        except (KeyError, IndexError, TypeError):   # an earlier replacement took the place away
            pass
    text = json.dumps(d)
    try:
        res = parse_results(text, "fuzz.json")
    except UserError as exc:
        assert "\n" not in str(exc) and "fuzz.json" in str(exc)
        event("refused")
        return
    event("accepted")
    assert isinstance(res, RunResult)
    for at, number, signed in _numbers(res):
        assert math.isfinite(number), at
        assert signed or number >= 0, at
    assert res.net.batch >= 1 and res.settings.repeats >= 1
    summary_table(res)
    check_table(res)
    for b in res.backends:
        if b.ok and b.timing:
            layer_table(res, b)


# -- .npy headers ----------------------------------------------------------------------

DESCRS = ["<f4", ">f4", "<f8", "|u1", "<i8", "|b1", "<c8", "|O", "V8", "<U4", "[('a', '<f4')]", "<f4x", "f4",
          "('<f4', (2,))", "object"]
SHAPES = st.one_of(
    st.lists(st.integers(min_value=0, max_value=40), max_size=4).map(tuple),
    st.lists(st.integers(min_value=1, max_value=6), max_size=4).map(tuple),
    st.lists(st.integers(min_value=-3, max_value=10**15), max_size=5).map(tuple),
    st.sampled_from(["()", "(3,)", "(-1,)", "(1.5,)", "'x'", "None", "(2, 'a')", "[2, 3]", "(True,)",
                     "(10**9,)", "__import__('os')"]),
)


def _header(descr, shape, fortran, version, pad) -> bytes:
    shape_text = shape if isinstance(shape, str) else repr(shape)
    text = f"{{'descr': {descr if descr.startswith(('[', '(')) else repr(descr)}, 'fortran_order': {fortran}, " \
           f"'shape': {shape_text}, }}"
    text += " " * pad + "\n"
    size = len(text).to_bytes(2 if version[0] == 1 else 4, "little")
    return b"\x93NUMPY" + bytes(version) + size + text.encode("latin1")


def _honest_size(descr, shape) -> int | None:
    """The bytes `shape` of `descr` takes, where both are what numpy writes; else None."""
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError):
        return None
    if isinstance(shape, str) or min(shape, default=0) < 0 or math.prod(shape) * dtype.itemsize > 4096:
        return None
    return math.prod(shape) * dtype.itemsize


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(descr=st.sampled_from(DESCRS), shape=SHAPES, fortran=st.booleans(),
       version=st.sampled_from([(1, 0)] * 4 + [(2, 0)] * 2 + [(3, 0), (0, 1), (1, 1)]), pad=st.integers(0, 80),
       data=st.binary(max_size=600), honest=st.sampled_from([True, True, False]),
       off=st.sampled_from([0, 0, 0, 0, -1, 1, -4]),
       cut=st.one_of(st.none(), st.none(), st.integers(0, 200)))
def test_a_forged_npy_header_is_refused_or_read_exactly_as_large_as_its_data(descr, shape, fortran, version, pad,
                                                                            data, honest, off, cut):
    size = _honest_size(descr, shape)
    if honest and size is not None:   # as many bytes as the header claims, or a few more or fewer
        data = (data * (size // max(len(data), 1) + 2))[:max(size + off, 0)] if data else bytes(max(size + off, 0))
    raw = _header(descr, shape, fortran, version, pad) + data
    cut_short = cut is not None and cut < len(raw)
    raw = raw[:cut] if cut_short else raw
    try:
        array = load_checked(raw, "fuzz.npy")
    except UserError as exc:
        assert "\n" not in str(exc) and "fuzz.npy" in str(exc)
        event("refused")
        return
    event("accepted")
    assert not cut_short and array.nbytes == len(data)
    assert array.dtype.kind in "biuf" and not array.dtype.hasobject
    expected = np.load(io.BytesIO(raw), allow_pickle=False)   # what numpy itself reads from the same bytes
    assert array.shape == expected.shape and array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected)
