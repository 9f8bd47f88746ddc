"""Random small graphs with the newer layer kinds, on the reference against
the float64 oracle, and with batch norms folded against the unfolded graph.

Hypothesis draws 1-5 spatial layers, each reading the layer before or, with
some chance, any earlier output of the same shape: convolutions with groups
(1, depthwise, or a divisor of the channels), strides 1-2 and asymmetric
padding 0-2 per side; MobileNet-v2's depthwise convolution followed by a
1x1 one that alone reads it (`vectorised` folds the pair into one kernel);
max-pools with padding; adds of two earlier outputs of one shape; an
optional batch norm after a convolution; every activation; and the kinds of
the classification zoo (issue 36): concatenations of earlier outputs of one
height and width, elementwise multiplies and squeeze-and-excitation gates
(global pool, 1x1 convs, a multiply by the (N, C, 1, 1) gate), padded and
ceil-mode average pools counting the padding or not, channel selections
(shuffles, slices), dilated convolutions;
then a global average pool or not, a dense tail or not, and a softmax after
it or not.  A backend's graphs hold only the kinds, features and activations
it declares.  Few examples, so the suite stays fast; COMPARE_RANDOM_NETS=N
draws N instead.

The peers (torch, tensorflow) run the same graphs in every mode they list,
on fewer examples still (each mode prepares and traces anew); so do the
hand-written backends that run graphs (baseline, vectorised,
vectorised-tiled), each prepare compiling a kernel per layer.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, note, settings, strategies as st

from backends.handwritten.dw_pw import foldable_depthwise
from backends.reference.numpy_backend import NumpyNet
from compare import oracle
from compare.checking import compare_arrays
from nets import (ACTIVATIONS, NET_INPUT, STUDY_KINDS, Add, AvgPool, BatchNorm, Channels, Concat, Conv, Dense, Feature, GlobalAvgPool,
                  LayerKind, MaxPool, Mul, Net, Softmax)
from nets.spec import _ACTIVATION_FEATURE
from nets.batchnorm import fold_batchnorm
from nets.weights import init_weights

from conftest import backend_or_skip
from peer_graph_checks import check_every_mode

EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "15"))
PEER_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "4"))
HANDWRITTEN_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "5"))
CLBLAST_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "3"))
TINYGRAD_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "1"))   # its compiles: 10-20 s a graph here
OPENCV_EXAMPLES = int(os.environ.get("COMPARE_RANDOM_NETS", "2"))


EVERYTHING = (frozenset(LayerKind), frozenset(Feature))


@st.composite
def graphs(draw, with_batchnorm: bool = False, runs: tuple = EVERYTHING) -> tuple[Net, int, int]:
    """A random graph, its batch and seed; `runs`: the (kinds, features) a backend declares."""
    kinds, features = runs
    integer = lambda lo, hi: draw(st.integers(lo, hi))   # noqa: E731
    activations = [a for a in ACTIVATIONS if _ACTIVATION_FEATURE.get(a, None) in features | {None}]
    activation = lambda: draw(st.sampled_from(activations))   # noqa: E731
    c = integer(1, 6)
    outputs = {NET_INPUT: (c, integer(3, 9), integer(3, 9))}   # name -> shape per image
    layers, previous = [], NET_INPUT
    for i in range(integer(1, 5)):
        name, shape = f"l{i}", outputs[previous]
        same = [n for n, s in outputs.items() if s == shape and n != previous]
        beside = [n for n, s in outputs.items() if s[1:] == shape[1:] and n != previous]
        choices = ["conv", "conv", "dw-pw", "maxpool"] + (["add"] if same else [])
        choices += [k for k, kind in (("concat", LayerKind.CONCAT), ("avgpool", LayerKind.AVGPOOL),
                                      ("channels", LayerKind.CHANNELS)) if kind in kinds]
        if LayerKind.MUL in kinds:
            choices += (["mul"] if same else []) + (["gate"] if Feature.GATE in features else [])
        kind = draw(st.sampled_from(choices))
        reads = (previous,)
        if kind == "add":
            layer = Add(name, activation(), inputs=(previous, draw(st.sampled_from(same))))
        elif kind == "mul":
            layer = Mul(name, activation(), inputs=(previous, draw(st.sampled_from(same))))
        elif kind == "concat":
            joined = (previous,) + tuple(draw(st.lists(st.sampled_from([previous] + beside), min_size=1, max_size=2)))
            layer = Concat(name, activation(), inputs=joined)
        elif kind == "channels":
            order = draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=2 * shape[0]))
            layer = Channels(name, activation(), inputs=reads, order=tuple(order))
        elif kind == "gate":   # squeeze-and-excitation: the mean of each channel, two 1x1 convs, a multiply
            for part in (GlobalAvgPool(f"se{i}_pool", inputs=reads),
                         Conv(f"se{i}_reduce", activation(), out_channels=integer(1, 4), kernel=(1, 1)),
                         Conv(f"se{i}_expand", activation(), out_channels=shape[0], kernel=(1, 1))):
                layers.append(part)
            layer = Mul(name, activation(), inputs=(previous, f"se{i}_expand"))
        elif kind == "dw-pw":   # a depthwise conv, then a 1x1 stride-1 one reading it alone
            cin, h, w = shape
            pad = tuple(integer(0, 2) for _ in range(4))
            kernel = (integer(1, min(3, h + pad[0] + pad[2])), integer(1, min(3, w + pad[1] + pad[3])))
            dw = Conv(f"dw{i}", activation(), inputs=reads, out_channels=cin, kernel=kernel,
                      stride=(integer(1, 2), integer(1, 2)), pad=pad, groups=cin)
            layers.append(dw)
            outputs[dw.name] = dw.out_shape(shape)
            layer = Conv(name, activation(), inputs=(dw.name,), out_channels=integer(1, 9), kernel=(1, 1))
            shape = outputs[dw.name]
        elif kind == "conv":
            cin, h, w = shape
            groups = draw(st.sampled_from(sorted({1, cin} | {g for g in range(2, cin) if cin % g == 0})))
            pad = tuple(integer(0, 2) for _ in range(4))
            dilation = (1, 1)
            if Feature.DILATION in features and draw(st.integers(0, 3)) == 0:
                dilation = (integer(1, 2), integer(1, 2))
            span = lambda n, d: (n + d - 1) // d   # noqa: E731 - the largest kernel whose dilated span fits n
            kernel = (integer(1, min(3, span(h + pad[0] + pad[2], dilation[0]))),
                      integer(1, min(3, span(w + pad[1] + pad[3], dilation[1]))))
            layer = Conv(name, activation(), inputs=reads, out_channels=groups * integer(1, 3), kernel=kernel,
                         stride=(integer(1, 2), integer(1, 2)), pad=pad, groups=groups, dilation=dilation)
        else:
            _, h, w = shape
            kernel = (integer(1, min(3, h)), integer(1, min(3, w)))
            pad = (integer(0, kernel[0] - 1), integer(0, kernel[1] - 1), integer(0, kernel[0] - 1),
                   integer(0, kernel[1] - 1))
            stride = (integer(1, 2), integer(1, 2))
            if kind == "avgpool":
                layer = AvgPool(name, activation(), inputs=reads, kernel=kernel, stride=stride, pad=pad,
                                ceil_mode=draw(st.booleans()), count_include_pad=draw(st.booleans()))
            else:
                layer = MaxPool(name, activation(), inputs=reads, kernel=kernel, stride=stride, pad=pad)
        layers.append(layer)
        gates = {f"se{i}_expand": (shape[0], 1, 1)}   # read by the multiply alone, never drawn again
        outputs[name] = layer.out_shape_of([{**outputs, **gates}[n] for n in layer.inputs])
        if with_batchnorm and kind == "conv" and draw(st.booleans()):
            layers[-1] = dataclasses.replace(layer, activation="none")
            layers.append(BatchNorm(f"bn{i}", layer.activation, eps=1e-3))
            outputs[f"bn{i}"] = outputs.pop(name)   # the norm alone reads its conv, so it folds
            name = f"bn{i}"
        # the next layer reads this one, or now and then an earlier output (a skip)
        previous = name if draw(st.integers(0, 3)) else draw(st.sampled_from(sorted(outputs)))
    if draw(st.booleans()):
        layers.append(GlobalAvgPool("gap", inputs=(layers[-1].name,)))
    if draw(st.booleans()):
        layers.append(Dense("fc", activation(), inputs=(layers[-1].name,), out_features=integer(1, 5)))
    if LayerKind.SOFTMAX in kinds and draw(st.booleans()):
        layers.append(Softmax("softmax", inputs=(layers[-1].name,)))
    net = Net("random-graph", outputs[NET_INPUT], tuple(layers))
    return net, integer(1, 3), integer(0, 2 ** 16 - 1)


def test_random_graphs_hold_depthwise_convs_that_vectorised_folds_into_the_1x1_after():
    """So that the backends' property test below meets dw_pw (backends/handwritten/dw_pw.py)."""
    def folds(case):
        net = case[0]
        return any(foldable_depthwise(net, i) is not None for i in range(len(net.layers)))
    # the study's kinds only: with the zoo's too, a fold is rarer and the search slower
    net, _, _ = find(graphs(runs=(frozenset(STUDY_KINDS), frozenset(Feature))), folds, settings=settings(database=None))
    assert folds((net,))


def random_input(net: Net, batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch,) + tuple(net.input_shape)).astype(np.float32)


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(case=graphs())
def test_the_reference_runs_random_graphs_as_the_oracle_does(case):
    net, batch, seed = case
    note(repr(net))
    weights, x = init_weights(net, seed), random_input(net, batch, seed)
    ref = oracle.forward(net, weights, x)
    prepared = NumpyNet(net, weights, batch)
    for i, layer in enumerate(net.layers):
        inputs = [x if s < 0 else ref[s].astype(np.float32) for s in net.sources(i)]
        got = prepared.run_layer(i, inputs if len(inputs) > 1 else inputs[0])
        assert compare_arrays(got, ref[i]).passed, f"layer {layer.name} ({layer.kind}) alone"
    assert compare_arrays(prepared.forward(x), ref[-1]).passed, "end to end"


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(case=graphs(with_batchnorm=True))
def test_folding_batch_norms_keeps_the_output(case):
    net, batch, seed = case
    note(repr(net))
    weights, x = init_weights(net, seed), random_input(net, batch, seed)
    folded, folded_weights = fold_batchnorm(net, weights)
    assert not any(layer.kind == LayerKind.BATCHNORM for layer in folded.layers)   # each follows its own conv
    unfolded_out = oracle.forward(net, weights, x)[-1]
    # the folded weights are float32, rounded once: 1e-5 is far above that rounding and far below
    # any error of the algebra (a wrong fold is off by order 1)
    assert compare_arrays(oracle.forward(folded, folded_weights, x)[-1], unfolded_out, tol=1e-5).passed
    assert compare_arrays(NumpyNet(folded, folded_weights, batch).forward(x), unfolded_out).passed


# every backend that runs graphs, with as many examples as its compiles allow
GRAPH_BACKENDS = {"torch": PEER_EXAMPLES, "tensorflow": PEER_EXAMPLES, "baseline": HANDWRITTEN_EXAMPLES,
                  "vectorised": HANDWRITTEN_EXAMPLES, "vectorised-tiled": HANDWRITTEN_EXAMPLES, "clblast": CLBLAST_EXAMPLES,
                  "clblast-convgemm": CLBLAST_EXAMPLES, "clblast-best": CLBLAST_EXAMPLES,
                  "tinygrad": TINYGRAD_EXAMPLES, "opencv": OPENCV_EXAMPLES}


@pytest.mark.parametrize("name", list(GRAPH_BACKENDS))
def test_the_backends_run_random_graphs_as_the_oracle_does(name):
    backend = backend_or_skip(name)

    @settings(max_examples=GRAPH_BACKENDS[name], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=graphs(runs=(backend.supported_kinds, backend.supported_features)))
    def check(case):
        net, batch, seed = case
        note(repr(net))
        check_every_mode(backend, net, init_weights(net, seed), random_input(net, batch, seed))
    check()
