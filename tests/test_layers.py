"""Every backend, every layer type, fresh random inputs at several shapes
(odd sizes, channels not a multiple of 4, stride 2, padding, batch 1 and
more) against the float64 oracle.  Parametrised over every backend."""
import numpy as np
import pytest

import backends
from backends.isolated import call_isolated
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights
from conftest import backend_or_skip
from nets import Conv, Dense, MaxPool, Net, Subsample

# (net, batch): single layers first, then small chains that exercise the
# hand-offs between layers (padding kept or stripped, layouts changed).
CASES = {
    "conv3x3": (Net("t", (3, 7, 9), (Conv("l", "relu", out_channels=5, kernel=(3, 3)),)), 2),
    "conv3x3-pad": (Net("t", (6, 12, 10), (Conv("l", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)),)), 1),
    "conv5x5-stride2-pad2": (Net("t", (5, 11, 13), (Conv("l", "sigmoid", out_channels=4, kernel=(5, 5),
                                                          stride=(2, 2), pad=(2, 2)),)), 3),
    "conv-1ch-lenet-c1": (Net("t", (1, 32, 32), (Conv("l", "sigmoid", out_channels=6, kernel=(5, 5)),)), 4),
    "conv-rect-kernel": (Net("t", (7, 9, 6), (Conv("l", "none", out_channels=3, kernel=(3, 1), stride=(1, 2),
                                                    pad=(1, 0)),)), 2),
    "conv-1x1": (Net("t", (9, 5, 5), (Conv("l", "relu", out_channels=11, kernel=(1, 1)),)), 1),
    "subsample2x2": (Net("t", (3, 8, 10), (Subsample("l", "sigmoid"),)), 2),
    "subsample-odd": (Net("t", (5, 9, 7), (Subsample("l", "none", kernel=(3, 3), stride=(2, 2)),)), 1),
    "maxpool2x2": (Net("t", (3, 8, 8), (MaxPool("l"),)), 1),
    "maxpool-odd": (Net("t", (5, 9, 11), (MaxPool("l"),)), 3),
    "maxpool3x3-stride2": (Net("t", (6, 7, 7), (MaxPool("l", kernel=(3, 3), stride=(2, 2)),)), 2),
    "dense-batch1": (Net("t", (3, 4, 5), (Dense("l", "relu", out_features=9),)), 1),
    "dense-batch5": (Net("t", (1, 1, 17), (Dense("l", "sigmoid", out_features=10),)), 5),
    "mini-vgg": (Net("t", (3, 16, 12), (
        Conv("a", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)),
        MaxPool("c"),
        Conv("d", "relu", out_channels=12, kernel=(3, 3), pad=(1, 1)),
        MaxPool("e"),
        Dense("f", "relu", out_features=10),
        Dense("g", "none", out_features=7))), 1),
    "mini-lenet": (Net("t", (1, 20, 20), (
        Conv("a", "sigmoid", out_channels=6, kernel=(5, 5)),
        Subsample("b", "sigmoid"),
        Conv("c", "sigmoid", out_channels=10, kernel=(3, 3)),
        Subsample("d", "sigmoid"),
        Dense("e", "sigmoid", out_features=12),
        Dense("f", "sigmoid", out_features=5))), 3),
    "pad-after-pool": (Net("t", (4, 10, 10), (
        Conv("a", "relu", out_channels=5, kernel=(3, 3)),
        MaxPool("b"),
        Conv("c", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        Dense("d", "none", out_features=3))), 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_layers_match_the_oracle(backend, case):
    net, batch = CASES[case]
    seed = 1 + list(CASES).index(case)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    ref = oracle.forward(net, weights, x)
    prepared = backend.prepare(net, weights, batch)
    try:
        inputs = [x] + [r.astype(np.float32) for r in ref[:-1]]
        for i, layer in enumerate(net.layers):
            got = prepared.run_layer(i, inputs[i])
            result = compare_arrays(got, ref[i])
            assert result.passed, f"{case} layer {layer.name}: {result}"
        end = compare_arrays(prepared.forward(x), ref[-1])
        assert end.passed, f"{case} end to end: {end}"
        outs = prepared.layer_outputs(x)
        assert len(outs) == len(net.layers)
        assert compare_arrays(outs[-1], ref[-1]).passed
    finally:
        prepared.close()


def test_forward_is_repeatable_and_takes_new_inputs(backend):
    net, batch = CASES["mini-vgg"]
    weights = init_weights(net, 0)
    prepared = backend.prepare(net, weights, batch)
    try:
        rng = np.random.default_rng(7)
        for _ in range(3):  # reused buffers must not leak one input into the next
            x = rng.standard_normal((batch,) + net.input_shape).astype(np.float32)
            assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
    finally:
        prepared.close()


def test_run_timed_names_every_layer(backend):
    net, batch = CASES["mini-lenet"]
    prepared = backend.prepare(net, init_weights(net, 0), batch)
    try:
        x = np.zeros((batch,) + net.input_shape, np.float32)
        prepared.load_input(x)
        timings = prepared.run_timed()
        assert [t.name for t in timings] == [layer.name for layer in net.layers]
        for t in timings:
            assert t.steps
            if t.kernel_ms is not None:
                # device time is measured inside the host's clock around the layer
                assert 0 < t.kernel_ms <= t.wall_ms * 1.05 + 0.05, t
                assert all(s.how in ("event", "markers") for s in t.steps)
        assert compare_arrays(prepared.fetch_output(), oracle.forward(net, init_weights(net, 0), x)[-1]).passed
    finally:
        prepared.close()


# tinygrad and OpenCV enqueue through their own OpenCL bindings, not ours: their run() ends in their own
# clFinish (tinygrad's checked in tests/test_tinygrad.py, OpenCV's cv2.ocl.finish in backends/peers/opencv_peer.py)
OPENCL = [n for n in backends.names() if backends.backend_class(n).uses_opencl and n not in ("tinygrad", "opencv")]


@pytest.mark.parametrize("name", OPENCL)
def test_run_returns_only_when_the_device_work_is_done(name):
    # every event an OpenCL backend enqueues in run() (its kernels, markers around
    # each library routine) must have completed by the time run() returns;
    # looked at in a child process, where a backend of its own child runs too
    backend_or_skip(name)
    net, batch = CASES["mini-vgg"]
    events, late = call_isolated("run check", "run_checks", "events_after_run", name, net, batch)
    assert events >= 1 and late == 0, (events, late)   # one kernel for `fused`, one or more per layer else
