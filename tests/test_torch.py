"""The `torch` backend: float32 settings (TF32 off), what info() records,
timing by device events on CUDA and wall clock on the CPU, inputs copied
on load, and every mode it lists against the oracle.  Its default mode's
outputs are also checked by the generic suites.

The CUDA-graph modes run only where PyTorch sees CUDA; `compile` on the CPU
only with COMPARE_TORCH_COMPILE=1 (it compiles C++ for a minute or more)."""
import importlib.util
import os

import numpy as np
import pytest

from compare import oracle
from compare.checking import compare_arrays
from nets.errors import Unsupported, UserError
from nets.weights import init_weights, make_input
from nets import LENET, Conv, MaxPool, Net, Subsample

from conftest import backend_or_skip, rng

NET = Net("t", (3, 11, 10), (
    Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
    Subsample("b", "sigmoid"),
    MaxPool("c", kernel=(3, 3), stride=(2, 2)),
))


def _agree(got, want, deterministic: bool, mode: str) -> None:
    """Bit for bit where PyTorch says it is deterministic (the CPU), else within the runner's tolerance."""
    if deterministic:
        assert np.array_equal(got, want), mode
    else:
        assert compare_arrays(got, want.astype(np.float64)).passed, mode


@pytest.fixture(scope="module")
def torch_backend():
    """PyTorch in this process, as each of the backend's children runs it (the tests reach into it)."""
    backend_or_skip("torch")
    from backends.peers.torch_peer import TorchInProcess
    return TorchInProcess()


def test_each_mode_runs_in_a_child_of_its_own_as_the_process_here_would(torch_backend):
    """`torch` itself prepares each mode in a child process of its own (so the runner can start them ahead,
    side by side): the same modes, the same determinism, the same outputs as PyTorch in this process."""
    import backends
    outer = backends.get("torch")
    try:
        assert outer.modes() == torch_backend.modes() and outer.deterministic is torch_backend.deterministic
        assert outer.info()["versions"] == torch_backend.info()["versions"]
        weights, x = init_weights(NET, 4), make_input(NET, 2, 4)
        pids = set()
        for mode in outer.modes():
            apart, here = outer.prepare(NET, weights, 2, mode=mode), torch_backend.prepare(NET, weights, 2, mode=mode)
            try:
                pids.add(apart._worker._proc.pid)   # the child that holds this mode
                assert apart.config["mode"] == mode
                _agree(apart.forward(x), here.forward(x), torch_backend.deterministic, mode)
            finally:
                apart.close()
                here.close()
        assert os.getpid() not in pids and len(pids) == len(outer.modes())
    finally:
        outer.close()


def test_tf32_is_off_and_info_says_so(torch_backend):
    import torch
    prepared = torch_backend.prepare(NET, init_weights(NET, 0), 2)
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    info = torch_backend.info()
    assert info["tf32"] == {"matmul": False, "cudnn": False}
    assert info["versions"]["torch"] == torch.__version__ and info["device"]
    if torch.cuda.is_available():
        assert info["kind"] == "cuda" and info["versions"]["cudnn"] and prepared.config["device"] == "cuda"
    else:
        assert info["kind"] == "cpu" and prepared.config["device"] == "cpu"


def test_timing_matches_the_device(torch_backend):
    import torch
    prepared = torch_backend.prepare(NET, init_weights(NET, 0), 2)
    prepared.load_input(np.ones((2,) + NET.input_shape, np.float32))
    timings = prepared.run_timed()
    assert [t.name for t in timings] == ["a", "b", "c"]
    for t in timings:
        assert len(t.steps) == 1 and t.wall_ms > 0
        if torch.cuda.is_available():   # CUDA events around the layer; the host clock also waits for it
            assert t.steps[0].how == "markers" and t.kernel_ms == t.steps[0].ms > 0
        else:
            assert t.steps[0].how == "wall" and t.kernel_ms is None


def test_the_loaded_input_is_a_copy(torch_backend):
    weights = init_weights(NET, 1)
    prepared = torch_backend.prepare(NET, weights, 2)
    x = rng(5).standard_normal((2,) + NET.input_shape).astype(np.float32)
    expected = prepared.forward(x.copy())
    prepared.load_input(x)
    x[:] = 0          # the caller's array changes after loading; the loaded batch must not
    prepared.run()
    assert compare_arrays(prepared.fetch_output(), expected.astype(np.float64), tol=1e-6).passed


def test_unavailable_without_torch(monkeypatch):
    from backends.peers.torch_peer import TorchBackend
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    reason = TorchBackend.unavailable_reason()
    assert "PyTorch is not installed" in reason and "clblast-compare[torch]" in reason


# -- modes

ALL_MODES = ["eager", "eager-channels-last", "cuda-graph", "cuda-graph-channels-last", "compile"]


def test_the_modes_listed_fit_the_device(torch_backend):
    import torch
    modes = torch_backend.modes()
    assert modes[:2] == ["eager", "eager-channels-last"] and set(modes) <= set(ALL_MODES)
    cuda = torch.cuda.is_available()
    assert ("cuda-graph" in modes) == cuda and ("cuda-graph-channels-last" in modes) == cuda
    if not cuda:
        assert ("compile" in modes) == (os.environ.get("COMPARE_TORCH_COMPILE") == "1")
    assert torch_backend.deterministic is (not cuda)   # cuDNN's autotuner may pick other algorithms


@pytest.mark.parametrize("net, batch", [(NET, 3), (LENET, 4)], ids=["small-conv", "lenet"])
def test_each_mode_listed_here_matches_the_oracle(torch_backend, net, batch):
    weights = init_weights(net, 2)
    x = make_input(net, batch, 2)
    ref = oracle.forward(net, weights, x)
    for mode in torch_backend.modes():   # on a CUDA machine the graph modes too
        prepared = torch_backend.prepare(net, weights, batch, mode=mode)
        try:
            assert prepared.config["mode"] == mode
            end = compare_arrays(prepared.forward(x), ref[-1])
            assert end.passed, (mode, end)
            prepared.load_input(x)
            prepared.run_timed()   # eager layers in every mode; leaves the output for fetch_output
            assert compare_arrays(prepared.fetch_output(), ref[-1]).passed, mode
            for i, layer in enumerate(net.layers):
                got = prepared.run_layer(i, np.asarray(([x] + ref[:-1])[i], np.float32))
                assert compare_arrays(got, ref[i], name=layer.name).passed, (mode, layer.name)
        finally:
            prepared.close()


def test_a_mode_runs_the_input_loaded_last(torch_backend):
    # a CUDA graph replays on its static input: a new batch must reach it through load_input
    for mode in torch_backend.modes():
        weights = init_weights(NET, 6)
        prepared = torch_backend.prepare(NET, weights, 2, mode=mode)
        try:
            for seed in (7, 8):
                x = rng(seed).standard_normal((2,) + NET.input_shape).astype(np.float32)
                assert compare_arrays(prepared.forward(x), oracle.forward(NET, weights, x)[-1]).passed, mode
        finally:
            prepared.close()


def test_passes_repeat_as_closely_as_the_backend_says(torch_backend):
    # bit for bit where it says it is deterministic (the CPU), else within the tolerance the runner holds it to
    x = make_input(LENET, 4, 3)
    for mode in torch_backend.modes():
        prepared = torch_backend.prepare(LENET, init_weights(LENET, 3), 4, mode=mode)
        try:
            first, second = prepared.forward(x), prepared.forward(x)
            _agree(second, first, torch_backend.deterministic, mode)
        finally:
            prepared.close()


def test_read_only_weights_and_input_raise_no_warning(torch_backend):
    # an imported model's arrays can be read-only views of its file (onnx), and an input a memory map
    import warnings
    weights = init_weights(NET, 2)
    for v in weights.values():
        v.setflags(write=False)
    x = make_input(NET, 2, 2)
    x.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared = torch_backend.prepare(NET, weights, 2)
        try:
            prepared.forward(x)
        finally:
            prepared.close()


def test_channels_last_converts_the_input_inside_run(torch_backend, monkeypatch):
    import torch
    prepared = torch_backend.prepare(NET, init_weights(NET, 0), 2, mode="eager-channels-last")
    calls = []
    enter = prepared._enter
    monkeypatch.setattr(prepared, "_enter", lambda x: calls.append(x) or enter(x))
    prepared.load_input(rng(1).standard_normal((2,) + NET.input_shape).astype(np.float32))
    # load_input is a plain copy: the input tensor stays contiguous NCHW ...
    assert prepared._x.is_contiguous() and not prepared._x.is_contiguous(memory_format=torch.channels_last)
    assert calls == []
    prepared.run()   # ... and the timed forward converts it
    assert len(calls) == 1 and calls[0] is prepared._x
    converted = enter(prepared._x)
    assert converted.is_contiguous(memory_format=torch.channels_last) and not converted.is_contiguous()
    assert prepared.config["layout"].startswith("NHWC inside")


def test_graph_modes_say_their_layer_times_are_eager(torch_backend):
    for mode in torch_backend.modes():
        prepared = torch_backend.prepare(NET, init_weights(NET, 0), 2, mode=mode)
        eager_layers = "per-layer times are eager: include Python dispatch" in prepared.config["timing"]
        assert eager_layers == (not mode.startswith("eager")), mode
        prepared.close()


def test_cuda_graph_is_unsupported_without_cuda(torch_backend):
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA is here")
    assert "cuda-graph" not in torch_backend.modes()
    for mode in ("cuda-graph", "cuda-graph-channels-last"):
        with pytest.raises(Unsupported, match="needs CUDA"):
            torch_backend.prepare(NET, init_weights(NET, 0), 2, mode=mode)


def test_an_unknown_mode_is_refused(torch_backend):
    with pytest.raises(UserError, match="unknown mode 'fast'"):
        torch_backend.prepare(NET, init_weights(NET, 0), 2, mode="fast")
