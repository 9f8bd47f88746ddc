"""Random nets through every backend, against the float64 oracle.

Hypothesis draws small valid nets: 1-4 spatial layers (convolution with
kernel 1-5, stride 1-3, padding 0-2 on each axis, 1-9 output channels;
max-pooling and subsampling with windows of 1-5 and strides of 1-3, so
windows overlap, tile or leave gaps), then 0-2 dense layers of 1-16
outputs; every activation on every kind of layer; inputs of 1-9 channels
and 1-13 rows and columns (odd and even), batches of 1-5.  Each layer is
drawn against the shape that reaches it, so every window fits.  For each
backend that runs here, every layer is checked alone on the oracle's input
(run_layer) and the net end to end (forward), relative L2 <= 1e-4.

Two tests per backend: `test_fixed_random_nets` always draws the same three
nets (a fixed @seed, for a given Hypothesis version; the first is the
simplest net there is), and `test_fresh_random_nets` draws two new ones
on every run.  Both are bounded so the file fits CI (about 35-45 s for
every backend on 2 cores with PoCL's kernel cache warm; the first CLBlast
compile on a cold cache adds about two minutes, once);
COMPARE_RANDOM_NETS=N draws N fresh nets per backend instead, for a longer
hunt.  No Hypothesis database is written.

A backend that says UNSUPPORTED for a net (nets.errors.Unsupported at
prepare, e.g. `fused` when the activations do not fit local memory) is not
failed for it: the example is set aside and counted as a Hypothesis event
(`pytest --hypothesis-show-statistics` lists them).

A failure is shrunk by Hypothesis to a small net, then prints every check
that failed and the net as Python, with its batch and seed (`Failing test
case: test_fresh_random_nets(name='vectorised', case=RandomCase(net=Net(
"random", (3, 9, 7), (Conv("l0", "relu", ...), ...)), batch=3, seed=17))`
and a `re-run: check_net(...)` line).  To re-run it, from the checkout's
root:

    .venv/bin/python - <<'EOF'
    import sys; sys.path.insert(0, "tests")
    from test_random_nets import check_net
    from nets import Conv, Dense, MaxPool, Net, Subsample
    check_net("vectorised", Net("random", (3, 9, 7), (
        Conv("l0", "relu", out_channels=5, kernel=(3, 3), stride=(2, 1), pad=(1, 0)),
        MaxPool("l1", "none", kernel=(2, 2), stride=(1, 1)),
        Dense("l2", "sigmoid", out_features=7))), batch=3, seed=17)
    EOF

check_net prints each check and raises AssertionError naming the ones that
failed (weights: nets.weights.init_weights(net, seed); input: standard
normal from numpy.random.default_rng(seed)).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, event, given, note, reject, seed, settings, strategies as st

import backends
from compare import oracle
from compare.checking import compare_arrays
from nets.errors import Unsupported
from conftest import backend_or_skip
from nets import Conv, Dense, MaxPool, Net, Subsample

# the chains' activations: the study's and MobileNet-v2's; the classification zoo's (hardswish, hardsigmoid,
# silu) go through the random graphs (tests/test_random_graphs.py), drawn per backend's declared features
ACTIVATIONS = ("none", "relu", "sigmoid", "relu6", "tanh")
from nets.weights import init_weights

FIXED_SEED = 20240611
FIXED_EXAMPLES = 3           # per backend, the same nets on every run
FRESH_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "2"))   # per backend, new on every run

MAX_CHANNELS = 9
MAX_SIZE = 13                # input rows and columns
MAX_WINDOW = 5
MAX_STRIDE = 3
MAX_PAD = 2
MAX_FEATURES = 16
MAX_BATCH = 5


# -- nets as Python a user can paste -------------------------------------------------------------

def _tuple(t) -> str:
    return "(" + ", ".join(str(int(v)) for v in t) + ")"


def layer_spec(layer) -> str:
    head = f'"{layer.name}", "{layer.activation}"'
    if layer.kind == "conv":
        return (f"Conv({head}, out_channels={layer.out_channels}, kernel={_tuple(layer.kernel)}, "
                f"stride={_tuple(layer.stride)}, pad={_tuple(layer.pad)})")
    if layer.kind in ("maxpool", "subsample"):
        cls = "MaxPool" if layer.kind == "maxpool" else "Subsample"
        return f"{cls}({head}, kernel={_tuple(layer.kernel)}, stride={_tuple(layer.stride)})"
    if layer.kind == "dense":
        return f"Dense({head}, out_features={layer.out_features})"
    raise ValueError(f"no spec for layer kind {layer.kind!r}")


def net_spec(net: Net) -> str:
    """`net` as a Python expression over nets.{Net, Conv, Subsample, MaxPool, Dense}."""
    layers = ", ".join(layer_spec(layer) for layer in net.layers)
    return f'Net("{net.name}", {_tuple(net.input_shape)}, ({layers}{"," if len(net.layers) == 1 else ""}))'


@dataclass(frozen=True)
class RandomCase:
    net: Net
    batch: int
    seed: int

    def __repr__(self):   # runnable Python, as short as the net
        return f"RandomCase(net={net_spec(self.net)}, batch={self.batch}, seed={self.seed})"

    def _repr_pretty_(self, printer, cycle):   # what Hypothesis prints for a failing example
        printer.text(repr(self))


def rerun_snippet(backend_name: str, case: RandomCase) -> str:
    return (f'check_net("{backend_name}", {net_spec(case.net)}, batch={case.batch}, seed={case.seed})'
            f"  # from test_random_nets; its docstring has the imports")


# -- drawing valid nets --------------------------------------------------------------------------

def draw_case(integer, choice) -> RandomCase:
    """A valid small net, its batch and seed, from `integer(lo, hi)` (inclusive) and
    `choice(options)`: Hypothesis's draws in the tests, the lowest ones for SIMPLEST."""
    def window(size: int, pad: int = 0) -> int:
        return integer(1, min(MAX_WINDOW, size + 2 * pad))

    shape = (integer(1, MAX_CHANNELS), integer(1, MAX_SIZE), integer(1, MAX_SIZE))
    input_shape = shape
    layers = []
    for i in range(integer(1, 4)):                    # spatial layers; "conv" first, so failures shrink to it
        kind = choice(("conv", "maxpool", "subsample"))
        activation = choice(ACTIVATIONS)
        _, h, w = shape
        if kind == "conv":
            out_channels = integer(1, MAX_CHANNELS)
            pad = (integer(0, MAX_PAD), integer(0, MAX_PAD))
            kernel = (window(h, pad[0]), window(w, pad[1]))
            stride = (integer(1, MAX_STRIDE), integer(1, MAX_STRIDE))
            layer = Conv(f"l{i}", activation, out_channels=out_channels, kernel=kernel, stride=stride, pad=pad)
        else:                                          # windows that overlap (stride < window), tile or skip
            kernel = (window(h), window(w))
            stride = (integer(1, MAX_STRIDE), integer(1, MAX_STRIDE))
            cls = MaxPool if kind == "maxpool" else Subsample
            layer = cls(f"l{i}", activation, kernel=kernel, stride=stride)
        shape = layer.out_shape(shape)
        layers.append(layer)
    for _ in range(integer(0, 2)):                    # a dense tail
        layers.append(Dense(f"l{len(layers)}", choice(ACTIVATIONS), out_features=integer(1, MAX_FEATURES)))
    net = Net("random", input_shape, tuple(layers))   # validates every shape once more
    return RandomCase(net, integer(1, MAX_BATCH), integer(0, 2 ** 16 - 1))


@st.composite
def random_cases(draw) -> RandomCase:
    return draw_case(lambda lo, hi: draw(st.integers(lo, hi)), lambda options: draw(st.sampled_from(options)))


# What Hypothesis tries first (every draw at its lowest): the fixed test always runs it,
# so the fresh one skips it and spends its few examples on nets that are new.
SIMPLEST = draw_case(lambda lo, hi: lo, lambda options: options[0])


# -- the check -----------------------------------------------------------------------------------

def check_net(backend, net: Net, batch: int, seed: int, verbose: bool = True) -> None:
    """`net` on `backend` (a name or an instance) against the oracle: each layer alone on the
    oracle's input, then end to end.  Raises AssertionError naming every check that failed;
    nets.errors.Unsupported passes through."""
    name = backend if isinstance(backend, str) else backend.name
    instance = backends.get(backend) if isinstance(backend, str) else backend
    case = RandomCase(net, batch, seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + tuple(net.input_shape)).astype(np.float32)
    ref = oracle.forward(net, weights, x)
    prepared = instance.prepare(net, weights, batch)
    results = []
    try:
        inputs = [x] + [r.astype(np.float32) for r in ref[:-1]]
        for i, layer in enumerate(net.layers):
            results.append((f"layer {layer.name} ({layer.kind}, alone)",
                            compare_arrays(prepared.run_layer(i, inputs[i]), ref[i], name=layer.name)))
        results.append(("end to end (forward)", compare_arrays(prepared.forward(x), ref[-1])))
    finally:
        prepared.close()
    lines = [f"  {what}: {'ok' if r.passed else 'FAIL'} rel_l2={r.rel_l2} max_abs={r.max_abs}"
             + (f" ({r.note})" if r.note else "") for what, r in results]
    if verbose and isinstance(backend, str):
        print(f"{name} on {net_spec(net)}, batch={batch}, seed={seed}:\n" + "\n".join(lines))
    failed = [line for line, (_, r) in zip(lines, results) if not r.passed]
    assert not failed, (f"{name} differs from the float64 oracle on a random net:\n" + "\n".join(failed)
                        + f"\n  shapes per image: {' -> '.join(_tuple(s) for s in net.shapes)}"
                        + f"\nre-run: {rerun_snippet(name, case)}")


def _run_case(name: str, case: RandomCase) -> None:
    backend = backend_or_skip(name)
    note(f"backend {name}; re-run: {rerun_snippet(name, case)}")
    event(f"{len(case.net.layers)} layers, last {case.net.layers[-1].kind}")
    try:
        check_net(backend, case.net, case.batch, case.seed, verbose=False)
    except Unsupported as exc:          # an honest "cannot", never faked: set aside, counted
        event(f"UNSUPPORTED: {str(exc).splitlines()[0][:80]}")
        reject()


BACKENDS = backends.names()


@pytest.mark.parametrize("name", BACKENDS)
@seed(FIXED_SEED)
@settings(max_examples=FIXED_EXAMPLES, deadline=None, database=None, derandomize=False, print_blob=False)
@given(case=random_cases())
def test_fixed_random_nets(name, case):
    _run_case(name, case)


@pytest.mark.parametrize("name", BACKENDS)
@settings(max_examples=FRESH_EXAMPLES, deadline=None, database=None, derandomize=False, print_blob=False)
@given(case=random_cases())
def test_fresh_random_nets(name, case):
    assume(case != SIMPLEST)     # the fixed test always runs that one
    _run_case(name, case)


@settings(max_examples=200, deadline=None, database=None)
@given(case=random_cases())
def test_drawn_nets_are_small_and_print_as_python_that_rebuilds_them(case):
    # no backend here: the strategy draws only valid small nets, and what a failure
    # prints rebuilds the very net (and batch and seed) that failed
    rebuilt = eval(repr(case), {"RandomCase": RandomCase, "Net": Net, "Conv": Conv, "Dense": Dense,
                                "MaxPool": MaxPool, "Subsample": Subsample})
    assert rebuilt == case and rebuilt.net.shapes == case.net.shapes
    assert 1 <= case.batch <= MAX_BATCH
    assert all(np.prod(s) <= MAX_CHANNELS * (MAX_SIZE + 4 * 2 * MAX_PAD) ** 2 for s in case.net.shapes)
    event(" ".join(layer.kind for layer in case.net.layers))
