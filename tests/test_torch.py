"""The `torch` backend: float32 settings (TF32 off), what info() records,
timing by device events on CUDA and wall clock on the CPU, and inputs
copied on load.  Its outputs are checked by the generic suites."""
import importlib.util

import numpy as np
import pytest

from compare.checking import compare_arrays
from nets.weights import init_weights
from nets import Conv, MaxPool, Net, Subsample

from conftest import backend_or_skip, rng

NET = Net("t", (3, 11, 10), (
    Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
    Subsample("b", "sigmoid"),
    MaxPool("c", kernel=(3, 3), stride=(2, 2)),
))


@pytest.fixture(scope="module")
def torch_backend():
    return backend_or_skip("torch")


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
