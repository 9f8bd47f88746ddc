"""The `opencv` peer: listed as an engine; every mode (opencl, and
opencl-tuned after `tune`) against the float64 oracle on a small graph net
and on LeNet-5; the user's ONNX file run as given (and our graph where the
run's weights are not the file's); a kind it cannot write, and a model
OpenCV refuses, UNSUPPORTED in one line; the layers that ran on the host
named, from a parse of OpenCV's trace and end to end.  Its opencl mode
also runs the generic suites (layers, LeNet-5 end to end, random nets and
graphs)."""
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from nets import AvgPool, Concat, Conv, GlobalAvgPool, LENET, MaxPool, Mul, Net
from nets.errors import Unsupported
from nets.spec import Layer
from nets.weights import init_weights

from conftest import backend_or_skip, module_or_skip, rng
from peer_graph_checks import GRAPH, check_every_mode

ROOT = Path(__file__).resolve().parent.parent



@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache of its own: the tuning folder starts empty and is this test's alone."""
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _opencv():
    import backends
    return backends.get("opencv")


def test_compare_backends_lists_it_as_an_engine():
    backend = backend_or_skip("opencv")
    out = subprocess.run([sys.executable, "-m", "compare", "backends"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300).stdout
    assert re.search(r"^opencv +available +peer: OpenCV's DNN on the same OpenCL device", out, re.M), out
    assert backend.family == "engine" and backend.uses_opencl and backend.unsupported(GRAPH) is None


# (input height, kernel, stride, pad): in ceil mode a last window that would start in the padding is dropped
# (2, 1, 2, 0), one whose window runs past the padding is kept (7, 3, 2, 1); each with the padding counted or not
AVGPOOLS = [(2, 1, 2, 0), (7, 3, 2, 1), (6, 3, 1, 1), (5, 2, 3, 1)]


@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("h, k, s, p", AVGPOOLS)
def test_an_average_pool_matches_the_oracle_in_ceil_mode_and_with_its_padding_counted(fresh_cache, h, k, s, p,
                                                                                    ceil, counted):
    """OpenCV's ceil mode keeps a window PyTorch's drops, and it counts no padding: the pool is written so
    that its output is ours (found by the random graphs: a (1, 2, 2, 3) output where (1, 2, 1, 3) was due)."""
    backend_or_skip("opencv")
    net = Net("pool", (2, h, h + 1), (AvgPool("a", kernel=(k, k), stride=(s, s), pad=(p, p), ceil_mode=ceil,
                                              count_include_pad=counted),))
    check_every_mode(_opencv(), net, init_weights(net, 0), rng(1).standard_normal((2, 2, h, h + 1)).astype(np.float32))


@pytest.mark.parametrize("gate", ["concat", "conv"])
def test_a_hardsigmoid_read_by_a_multiply_stays_a_hardsigmoid(fresh_cache, gate):
    """OpenCV fuses a Mul reading a HardSigmoid into a HardSwish whatever the Mul's other input: a hardsigmoid
    is written so that nothing fuses (found by the random graphs: a layer gone, an output 6x off)."""
    backend_or_skip("opencv")
    layers = [Concat("a", inputs=("input", "input")), Concat("b", "hardsigmoid", inputs=("input", "input"))]
    if gate == "conv":
        layers += [GlobalAvgPool("pool", inputs=("b",)), Conv("reduce", out_channels=1, kernel=(1, 1)),
                   Conv("expand", out_channels=4, kernel=(1, 1)), Mul("gated", inputs=("b", "expand"))]
    else:
        layers += [Mul("gated", inputs=("a", "b"))]
    net = Net("gate", (2, 3, 3), tuple(layers))
    check_every_mode(_opencv(), net, init_weights(net, 0), rng(2).standard_normal((1, 2, 3, 3)).astype(np.float32))


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
@pytest.mark.parametrize("where", ["gate", "gated"])
def test_a_gelu_beside_a_per_channel_gate_runs_as_the_oracle_does(fresh_cache, act, where):
    """Both forms of gelu feeding a squeeze-and-excitation's multiply, as its gate or as what it gates: OpenCV 5
    read the tanh form as its GELU approximation and its process died there (found by the random graphs)."""
    backend_or_skip("opencv")
    net = Net("se", (4, 5, 6), (Conv("l0", act if where == "gated" else "relu6", out_channels=4, kernel=(3, 3)),
                                GlobalAvgPool("pool", inputs=("l0",)), Conv("reduce", out_channels=2, kernel=(1, 1)),
                                Conv("expand", act if where == "gate" else "sigmoid", out_channels=4, kernel=(1, 1)),
                                Mul("gated", inputs=("l0", "expand")), GlobalAvgPool("gap", inputs=("gated",))))
    check_every_mode(_opencv(), net, init_weights(net, 0), rng(3).standard_normal((2, 4, 5, 6)).astype(np.float32))


def test_every_mode_matches_the_oracle_on_a_graph_net_and_lenet(fresh_cache):
    backend_or_skip("opencv")
    from backends import tuning
    backend = _opencv()
    lenet = replace(LENET, name="lenet")
    try:
        assert backend.modes() == ["opencl"]   # nothing tuned in an empty cache
        # through the tuning part's one entry, as `compare tune --scope opencv` runs it
        harness = tuning.Harness(None, None, lambda path, what: None)
        lines = tuning.tune(tuning.Request([GRAPH, lenet], ["opencv"], 600, batch=4, harness=harness)).lines
        assert any(line.startswith("opencv: g at batch 4: ") for line in lines), lines
        assert backend.modes() == ["opencl", "opencl-tuned"], lines
        for net, seed in ((GRAPH, 3), (lenet, 4)):
            x = rng(seed).standard_normal((4,) + net.input_shape).astype(np.float32)
            assert check_every_mode(backend, net, init_weights(net, seed), x) == ["opencl", "opencl-tuned"]
        prepared = backend.prepare(lenet, init_weights(lenet, 0), 4, mode="opencl-tuned")
        try:
            depth = prepared.config["search_depth"]
            assert re.match(r"opencl-tuned: [12] of 2 convolutions of the pass auto-tuned on this device", depth), depth
        finally:
            prepared.close()
    finally:
        backend.close()


def test_the_tuned_mode_refuses_a_net_never_tuned(fresh_cache):
    backend_or_skip("opencv")
    from backends.tuning.budget import Budget
    from backends.tuning.opencv.search import show, tune
    backend = _opencv()
    small = Net("small", (2, 6, 5), (Conv("c", "relu", out_channels=3, kernel=(3, 3)), MaxPool("p")))
    other = Net("other", (3, 8, 8), (Conv("k", "relu", out_channels=4, kernel=(3, 3)),))
    try:
        tune(backend.runtime, [small], 2, Budget(300), lambda text: None)
        assert show(backend.runtime, [small, other], 2)[0].startswith(
            "opencv: small at batch 2: opencl-tuned: 1 of 1 convolutions of the pass auto-tuned on this device")
        assert "0 of 1 convolutions" in show(backend.runtime, [small, other], 2)[1]
        with pytest.raises(Unsupported, match=r"no convolution of other at batch 2 was auto-tuned on this device: "
                                              r"`compare tune --scope opencv --net other --batch 2` tunes them"):
            backend.prepare(other, init_weights(other, 0), 2, mode="opencl-tuned")
    finally:
        backend.close()


def test_a_users_onnx_file_runs_as_given(tmp_path):
    backend = backend_or_skip("opencv")
    module_or_skip("torch", "torch-cpu")
    import onnx_models
    from compare.models import load_net
    x = rng(5).random((2, 3, 16, 16), dtype=np.float32)
    path = tmp_path / "res.onnx"
    framework = onnx_models.export("resnet-style", str(path), x)
    net, weights = load_net(str(path))
    prepared = backend.prepare(net, weights, 2)
    try:
        assert prepared.config["model"] == f"the user's ONNX file {path.resolve()} as given"
        got = prepared.forward(x)
        assert np.linalg.norm(got - framework) / np.linalg.norm(framework) < 1e-4
    finally:
        prepared.close()
    other = {k: v * 1.5 for k, v in weights.items()}   # not the file's weights: our graph of them instead
    prepared = backend.prepare(net, other, 2)
    try:
        assert prepared.config["model"].startswith("our graph written as ONNX"), prepared.config["model"]
        assert "not those of" in prepared.config["model"]
    finally:
        prepared.close()


@dataclass(frozen=True)
class _Mystery(Layer):
    """A layer kind no writer knows."""

    kind = "mystery"

    def out_shape(self, in_shape):
        return tuple(in_shape)

    def flops(self, in_shape):
        return 0


def test_a_kind_it_cannot_write_is_unsupported_naming_it():
    module_or_skip("onnx", "opencv")
    from backends.peers.opencv_onnx import net_model
    net = Net("m", (2, 4, 4), (Conv("c", out_channels=2, kernel=(1, 1)), _Mystery("odd")))
    with pytest.raises(Unsupported, match=r"^layer odd is a mystery layer, which has no ONNX writer for OpenCV$"):
        net_model(net, init_weights(Net("c", (2, 4, 4), net.layers[:1]), 0), 1)


def test_a_model_opencv_refuses_is_unsupported_in_one_line(tmp_path):
    module_or_skip("cv2", "opencv")
    from backends.isolated import call_isolated
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(Unsupported) as caught:
        call_isolated("opencv read check", "backends.peers.opencv_read", "read_net_at", str(bad))
    assert str(caught.value).startswith("OpenCV's ONNX importer refused the model: ") and "\n" not in str(caught.value)


def _trace(folder: Path, threads: dict[str, list[str]], locations: list[str]) -> None:
    folder.mkdir()
    main = ["#description: OpenCV trace file", "#version: 1.0"]
    main += [f'l,{i},"/src/x.cpp",1,"{name}",0x1' for i, name in enumerate(locations, 1)]
    main += [f"#thread file: {t}" for t in threads]
    (folder / "trace.txt").write_text("\n".join(main) + "\n")
    for t, lines in threads.items():
        (folder / t).write_text("#description: OpenCV trace file\n" + "\n".join(lines) + "\n")


def test_the_trace_tells_the_layers_that_ran_the_host_thread_pool(tmp_path):
    from backends.peers.opencv_fallback import failed_programs, layer_places
    locations = ["void cv::dnn::Net::Impl::forwardToLayer(LayerData&, bool)",
                 "virtual void cv::dnn::Net::Impl::forwardLayer(LayerData&)", "parallel_for",
                 "cv::UMat& cv::UMat::setTo(cv::InputArray, cv::InputArray)"]
    one_pass = ["b,0,1,1,1", "b,0,2,2,2", "e,0,3,2,2,1",                           # the input's layer
                "b,0,4,2,3", "b,0,5,4,4", "e,0,6,4,4,1", "e,0,7,2,3,3",             # on the device
                "b,0,8,2,5", "b,0,9,4,6", "b,0,10,3,7", "e,0,11,3,7,1", "e,0,12,4,6,3", "e,0,13,2,5,5",  # host
                "b,0,14,2,8", "e,0,15,2,8,1,skip=3",                                # its children left out
                "e,0,16,1,1,15"]
    _trace(tmp_path / "t", {"t-000.txt": one_pass}, locations)
    places = layer_places(tmp_path / "t", 3)
    assert places.host == (False, True, None) and places.why_unknown == ""
    assert layer_places(tmp_path / "t", 4).why_unknown == "the trace's pass ran 3 layers, not the net's 4"
    assert layer_places(tmp_path / "none", 3).why_unknown.startswith("OpenCV wrote no trace")
    log = ("OpenCL program build log: dnn/dummy\nStatus -43: CL_INVALID_BUILD_OPTIONS\n"
           "OpenCL program build log: dnn/activations\nStatus -11: CL_BUILD_PROGRAM_FAILURE\n")
    assert failed_programs(log) == ["dnn/activations"]


def test_the_layers_that_ran_on_the_host_are_named():
    backend = backend_or_skip("opencv")
    net = Net("t", (3, 8, 8), (Conv("c", "tanh", out_channels=4, kernel=(3, 3)), MaxPool("p")))
    prepared = backend.prepare(net, init_weights(net, 0), 2)
    try:
        config = prepared.config
    finally:
        prepared.close()
    # OpenCV's tanh is in its dnn/activations program: where that fails to build (PoCL: it calls std::pow),
    # the tanh runs on the host and the mode says so
    if "dnn/activations" in config["opencl_build_failures"]:
        assert "c" in config["host_layers"], config
        assert config["mode_label"] == "opencl, partly on the CPU"
        assert config["placement"].startswith("partly on the CPU: ")
    else:
        assert config["mode_label"] == ("opencl, partly on the CPU" if config["host_layers"] else "opencl")


def test_unavailable_without_opencv(monkeypatch):
    import importlib.util

    from backends.peers.opencv_peer import OpencvBackend
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else real(name, *a))
    assert OpencvBackend.unavailable_reason() == "OpenCV is not installed (pip install 'clblast-compare[opencv]')"


def test_its_child_sees_the_device_asked_for():
    backend = backend_or_skip("opencv")
    info = backend.info()
    assert info["device"] == backend.runtime.info["name"] and info["platform"] == backend.runtime.info["platform"]
    assert os.environ.get("OPENCV_OPENCL_DEVICE") is None   # set in the child alone


@pytest.mark.parametrize("which", ["asymmetric-pad", "grouped", "depthwise-x2", "maxpool-pad", "maxpool-wide-pad",
                                   "add-relu", "global-avgpool"])
def test_each_graph_layer_alone_matches_the_oracle(which):
    from test_peer_graphs import SMALL
    backend = backend_or_skip("opencv")
    net = Net(which, (4, 8, 7), (SMALL[which],))
    # all negative: a max-pool that let its padding win would give 0, not the window's largest
    x = -np.abs(rng(5).standard_normal((3,) + net.input_shape)).astype(np.float32) - 0.1
    assert check_every_mode(backend, net, init_weights(net, 5), x)


def test_mobilenet_v2_at_a_small_odd_size_matches_the_oracle():
    from nets import MOBILENET_V2
    backend = backend_or_skip("opencv")
    net = replace(MOBILENET_V2, input_shape=(3, 33, 50))
    x = rng(14).standard_normal((2,) + net.input_shape).astype(np.float32)
    assert check_every_mode(backend, net, init_weights(net, 14), x)


def test_its_child_refuses_a_device_opencv_did_not_open():
    backend = backend_or_skip("opencv")
    from backends.peers.opencv_device import Child
    child = Child(backend.runtime.device, "device check")
    try:
        wrong = replace(child.target, cl=replace(child.target.cl, device="No Such Device"))
        with pytest.raises(Unsupported, match=r"^OpenCV opened '.+' for OPENCV_OPENCL_DEVICE=':[A-Z]+:\d+', "
                                              r"not 'No Such Device'$"):
            child.worker.call("backends.peers.opencv_device", "open_device", wrong)
        assert child.worker.call("backends.peers.opencv_device", "open_device", child.target).name == \
            backend.runtime.info["name"]
    finally:
        child.close()
