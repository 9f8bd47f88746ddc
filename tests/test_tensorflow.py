"""The `tensorflow` backend: its modes (graph, xla), layout conversions,
padding choices, timing, and the independent check of our float64 oracle
and numpy backend against TensorFlow's kernels (two implementations that
share no code).  TensorFlow runs in the backend's child process only: this
process never imports it (PoCL breaks where it is loaded)."""
import importlib.util
import sys

import numpy as np
import pytest

from backends.reference.numpy_backend import NumpyNet
from compare import oracle
from compare.checking import compare_arrays
from nets.errors import UserError
from nets.weights import init_weights
from nets import Conv, Dense, Net

from conftest import backend_or_skip, rng


@pytest.fixture(scope="module")
def tf_backend():
    return backend_or_skip("tensorflow")


MODES = ["graph", "xla"]


def test_modes_are_graph_then_xla(tf_backend):
    assert tf_backend.modes() == MODES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("which", ["lenet_case", "vgg_case"])
def test_oracle_and_numpy_agree_with_tensorflow(tf_backend, which, mode, request):
    case = request.getfixturevalue(which)
    prepared = tf_backend.prepare(case.net, case.weights, case.batch, mode=mode)
    assert prepared.config["mode"] == mode
    try:
        got = prepared.forward(case.x)
    finally:
        prepared.close()
    against_oracle = compare_arrays(got, case.ref[-1])
    assert against_oracle.passed and against_oracle.top1 == 1.0, against_oracle
    ours = NumpyNet(case.net, case.weights, case.batch).forward(case.x)
    against_numpy = compare_arrays(ours, got.astype(np.float64))
    assert against_numpy.passed and against_numpy.top1 == 1.0, against_numpy


@pytest.mark.parametrize("kernel, stride, pad, size, want", [
    ((3, 3), (1, 1), (0, 0), 9, "valid"),
    ((3, 3), (1, 1), (1, 1), 9, "same"),
    ((5, 3), (1, 1), (2, 1), 9, "same"),
    ((3, 3), (2, 2), (1, 1), 9, "same"),        # odd size: 'same' pads one row each side, as we do
    ((3, 3), (2, 2), (1, 1), 10, None),         # even size: 'same' pads only the bottom row
    ((3, 3), (2, 2), (0, 0, 1, 1), 10, "same"),  # ... which asymmetric padding can be
    ((2, 2), (1, 1), (1, 1, 0, 0), 9, None),    # 'same' puts the odd row at the bottom, not the top
    ((4, 4), (1, 1), (2, 2), 9, None),          # even kernel: one output more than 'same'
    ((3, 3), (1, 1), (2, 2), 9, None),          # more padding than 'same'
])
def test_padding_is_keras_own_only_where_it_is_ours(kernel, stride, pad, size, want):
    from backends.peers.keras_layers import keras_padding
    layer = Conv("l", out_channels=2, kernel=kernel, stride=stride, pad=pad)
    assert keras_padding(layer.padding, kernel, stride, (size, size)) == want
    if want == "same":   # the windows of ours are the windows of TensorFlow's 'same': as many outputs
        assert layer.out_shape((3, size, size))[1] == -(-size // stride[0])


@pytest.mark.parametrize("kernel, stride, pad", [((4, 4), (1, 1), (2, 2)), ((3, 3), (2, 2), (1, 1)),
                                                 ((3, 3), (1, 1), (2, 2))])
def test_explicitly_padded_convolutions_match_the_oracle(tf_backend, kernel, stride, pad):
    net = Net("t", (3, 10, 9), (Conv("l", "relu", out_channels=5, kernel=kernel, stride=stride, pad=pad),))
    weights = init_weights(net, 3)
    x = rng(3).standard_normal((2,) + net.input_shape).astype(np.float32)
    prepared = tf_backend.prepare(net, weights, 2)
    result = compare_arrays(prepared.run_layer(0, x), oracle.forward(net, weights, x)[-1])
    assert result.passed, result


def test_a_dense_layer_alone_takes_the_canonical_nchw_input(tf_backend):
    # run_layer of the first dense layer gets C,H,W data and must flatten it in our order
    net = Net("t", (4, 3, 5), (Dense("d", "none", out_features=6),))
    weights = init_weights(net, 4)
    x = rng(4).standard_normal((3,) + net.input_shape).astype(np.float32)
    got = tf_backend.prepare(net, weights, 3).run_layer(0, x)
    assert compare_arrays(got, oracle.forward(net, weights, x)[-1]).passed


@pytest.mark.parametrize("mode", MODES)
def test_timing_is_wall_clock_only_and_output_follows(tf_backend, lenet_case, mode):
    net = lenet_case.net
    prepared = tf_backend.prepare(net, lenet_case.weights, lenet_case.batch, mode=mode)
    prepared.load_input(lenet_case.x)
    timings = prepared.run_timed()
    assert [t.name for t in timings] == [layer.name for layer in net.layers]
    for t in timings:
        assert t.kernel_ms is None and [s.how for s in t.steps] == ["wall"] and t.steps[0].ms == t.wall_ms
    # run_timed leaves the net's output where fetch_output finds it
    assert compare_arrays(prepared.fetch_output(), lenet_case.ref[-1]).passed


def _child_array(prepared, attribute: str) -> np.ndarray:
    """prepared.<attribute>.numpy() computed in the child: the tensor itself
    never comes here, so this process does not import TensorFlow."""
    worker = prepared._worker
    tensor = worker.request("call", prepared._handle, "__getattribute__", (attribute,), True)
    try:
        return worker.request("call", tensor, "numpy", (), False)
    finally:
        worker.request("drop", tensor)
        assert "tensorflow" not in sys.modules


@pytest.mark.parametrize("mode", MODES)
def test_layout_conversions_are_inside_the_compiled_function(tf_backend, mode):
    # a spatial output, so both ends convert: NCHW in, NHWC inside, NCHW out
    net = Net("t", (3, 7, 6), (Conv("a", "relu", out_channels=4, kernel=(3, 3), pad=(1, 1)),
                               Conv("b", "none", out_channels=2, kernel=(3, 3))))
    weights = init_weights(net, 5)
    x = rng(5).standard_normal((2,) + net.input_shape).astype(np.float32)
    prepared = tf_backend.prepare(net, weights, 2, mode=mode)
    try:
        prepared.load_input(x)
        loaded = _child_array(prepared, "_x")
        assert loaded.shape == x.shape and np.array_equal(loaded, x)   # load_input is a plain copy
        prepared.run()
        computed = _child_array(prepared, "_y")
        assert computed.shape == (2,) + net.output_shape            # run() left it NCHW already
        assert np.array_equal(prepared.fetch_output(), computed)     # fetch_output only copies it
        assert compare_arrays(computed, oracle.forward(net, weights, x)[-1]).passed
        prepared.load_input(x)
        prepared.run_timed()     # per layer: the first and last functions convert the layout
        assert compare_arrays(prepared.fetch_output(), oracle.forward(net, weights, x)[-1]).passed
        assert "inside the compiled function" in prepared.config["layout"]
    finally:
        prepared.close()


@pytest.mark.parametrize("mode", MODES)
def test_passes_repeat_as_closely_as_the_backend_says(tf_backend, lenet_case, mode):
    # bit for bit where it says it is deterministic (the CPU), else within the tolerance the runner holds it to
    prepared = tf_backend.prepare(lenet_case.net, lenet_case.weights, lenet_case.batch, mode=mode)
    try:
        first, second = prepared.forward(lenet_case.x), prepared.forward(lenet_case.x)
        if tf_backend.deterministic:
            assert np.array_equal(first, second)
        else:
            assert compare_arrays(second, first.astype(np.float64)).passed
    finally:
        prepared.close()


def test_xla_is_recorded_and_an_unknown_mode_refused(tf_backend):
    net = Net("t", (4, 3, 5), (Dense("d", "none", out_features=6),))
    prepared = tf_backend.prepare(net, init_weights(net, 4), 3, mode="xla")
    assert "jit_compile=True" in prepared.config["graph"]
    prepared.close()
    assert "no XLA" in tf_backend.prepare(net, init_weights(net, 4), 3).config["graph"]   # graph by default
    with pytest.raises(UserError, match="unknown mode 'fast'"):
        tf_backend.prepare(net, init_weights(net, 4), 3, mode="fast")


def test_info_names_versions_and_threads(tf_backend):
    info = tf_backend.info()
    assert info["versions"]["tensorflow"] and info["versions"]["keras"]
    assert info["kind"] in ("cpu", "gpu") and info["device"]
    assert set(info["threads"]) == {"intra_op", "inter_op"}


def test_unavailable_without_tensorflow(monkeypatch):
    from backends.peers.tensorflow_peer import TensorflowBackend
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    reason = TensorflowBackend.unavailable_reason()
    assert "tensorflow is not installed" in reason and "clblast-compare[tensorflow]" in reason
