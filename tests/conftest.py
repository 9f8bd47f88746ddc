"""Shared fixtures: every backend by name, and the two nets with weights,
input and float64 reference computed once per session."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

# The suite never reads or writes the user's cache (a tuning found there would
# change what clblast-best runs with): an empty one per session, as CI has.
os.environ["COMPARE_CACHE_DIR"] = tempfile.mkdtemp(prefix="compare-cache-")

import backends
from compare import oracle
from nets.weights import init_weights, make_input
from nets import LENET, VGG16, Net

# `make test` sets this: there every backend but those named in
# COMPARE_OPTIONAL must be available, so a broken install fails instead of skipping.
REQUIRE_ALL = os.environ.get("COMPARE_REQUIRE_ALL") == "1"
OPTIONAL = set(filter(None, os.environ.get("COMPARE_OPTIONAL", "").split(",")))

_instances: dict[str, backends.Backend] = {}


def backend_or_skip(name: str) -> backends.Backend:
    if name not in _instances:
        reason = backends.unavailable_reason(name)
        if reason:
            if REQUIRE_ALL and name not in OPTIONAL:
                pytest.fail(f"backend {name} must be available under `make test`: {reason}")
            pytest.skip(f"backend {name} unavailable here: {reason}")
        _instances[name] = backends.get(name)
    return _instances[name]


def module_or_skip(name: str, extra: str):
    """Module `name`, or a skip saying which extra brings it; under `make test` a failure instead."""
    if REQUIRE_ALL:
        import importlib
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} comes with the {extra} extra")


@pytest.fixture(params=backends.names())
def backend(request):
    return backend_or_skip(request.param)


class Case:
    """A net with seeded weights, an input batch and the oracle's outputs."""

    def __init__(self, net, batch, seed=0):
        self.net = net
        self.batch = batch
        self.weights = init_weights(net, seed)
        self.x = make_input(net, batch, seed)
        self.ref = oracle.forward(net, self.weights, self.x)


@pytest.fixture(scope="session")
def lenet_case():
    return Case(LENET, 100)


@pytest.fixture(scope="session")
def vgg_case():
    """VGG-16's layers on a 64x64 input: every layer kind and composition of the full net at a twelfth of
    its work (the full 224x224 net, 15.5 GFLOP a pass, runs in `make demo` and `compare check`)."""
    return Case(Net(f"{VGG16.name}@64", (VGG16.input_shape[0], 64, 64), VGG16.layers), 1)


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_borders_zero(prepared) -> None:
    """Every activation buffer of a hand-written net still zero outside its layer's pixels and channels
    (its borders and padding channels: the kernels read them as the convolutions' zero padding).  A slice
    of a concatenation's buffer is checked as that buffer."""
    for i, (lay, buf) in enumerate(zip(prepared.layouts, prepared.activations)):
        if lay.is_view:
            continue
        raw = prepared.rt.read(buf, lay.stored_shape)
        inside = np.zeros(lay.stored_shape, bool)
        rows, cols = slice(lay.pad_h, lay.pad_h + lay.h), slice(lay.pad_w, lay.pad_w + lay.w)
        if lay.order == "nchw":
            inside[:, :lay.c, rows, cols] = True
        else:
            inside[:, rows, cols, :lay.c] = True
        assert np.all(raw[~inside] == 0), f"border or padding channels of buffer {i} not zero"


def joined_rows(lines) -> list[str]:
    """The rows of a terminal table (compare/terminal.py), each with the lines its wrapped cells continue on
    (those that start with a space) joined to it."""
    rows: list[str] = []
    for line in lines:
        if line[:1] == " " and rows:
            rows[-1] += " " + line.strip()
        elif line.strip():
            rows.append(line)
    return rows


def pytest_collection_modifyitems(items):
    """The tests marked `long` first, each group in its own order: the two xdist workers of `make test`
    then end together, not one idle while the other runs a last long test (a 99 s one came last)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
