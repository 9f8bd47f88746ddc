"""The CLBlast backends' own parts: the ctypes binding of xIM2COL and
xCONVGEMM (layouts checked against numpy), the subsampling-as-sparse-conv
filters, the one-im2col-per-batch trick, the error paths, the per-step
breakdown and the availability checks.  The layer-by-layer and end-to-end
checks against the oracle are in the generic suites."""
import json

import numpy as np
import pytest

import backends
from compare import oracle
from compare.checking import compare_arrays
from compare.cli import main
from nets.errors import Unsupported, UserError
from nets.weights import init_weights
from nets import LENET, Conv, Dense, Net, Subsample

from backends.clblast import layers as clblast_layers
from backends.clblast import library as clblast_c
from backends.opencl.runtime import get_runtime
from conftest import backend_or_skip
from run_checks import in_process


@pytest.fixture(autouse=True)
def clblast_here():
    """Every test here needs CLBlast: skipped where it is missing, a failure under `make test`."""
    backend_or_skip("clblast")


@pytest.fixture(scope="module")
def rt():
    return get_runtime()


def numpy_im2col(x, kernel, pad, stride):
    """(C,H,W) -> (C*kh*kw, OH*OW), rows (c, fy, fx): written from the definition."""
    c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * pad[1] - kernel[1]) // stride[1] + 1
    cols = np.empty((c, kernel[0], kernel[1], oh, ow), x.dtype)
    for fy in range(kernel[0]):
        for fx in range(kernel[1]):
            rows = slice(fy, fy + stride[0] * (oh - 1) + 1, stride[0])
            cols[:, fy, fx] = xp[:, rows, fx:fx + stride[1] * (ow - 1) + 1:stride[1]]
    return cols.reshape(c * kernel[0] * kernel[1], oh * ow)


IM2COL_SHAPES = [  # channels, height, width, kernel, pad, stride
    (1, 32, 32, (5, 5), (0, 0), (1, 1)),
    (3, 7, 9, (3, 3), (1, 1), (1, 1)),
    (5, 11, 13, (5, 5), (2, 2), (2, 2)),
    (7, 9, 6, (3, 1), (1, 0), (1, 2)),
    (6, 9, 7, (3, 3), (0, 0), (2, 2)),
]


@pytest.mark.parametrize("shape", IM2COL_SHAPES)
def test_im2col_matches_numpy(rt, shape):
    c, h, w, kernel, pad, stride = shape
    x = np.random.default_rng(c * h).standard_normal((c, h, w)).astype(np.float32)
    want = numpy_im2col(x, kernel, pad, stride)
    im_offset, col_offset = 3, 5   # offsets in floats, away from the buffers' starts
    im = rt.upload(np.concatenate([np.zeros(im_offset, np.float32), x.ravel()]), "image")
    col = rt.alloc((col_offset + want.size + 7) * 4, "columns")   # NaN-poisoned
    clblast_c.im2col(rt.queue, c, h, w, kernel, pad, stride, im, im_offset, col, col_offset)
    got = rt.read(col, (col_offset + want.size + 7,))
    np.testing.assert_array_equal(got[col_offset:col_offset + want.size].reshape(want.shape), want)
    assert np.isnan(got[:col_offset]).all() and np.isnan(got[col_offset + want.size:]).all()   # nothing outside


def test_one_im2col_over_the_batch_is_each_images_im2col_stacked(rt):
    # the study's trick (5.1.2): N images of C channels as one image of N*C channels
    n, c, h, w, kernel, pad, stride = 3, 5, 8, 7, (3, 3), (1, 1), (2, 1)
    x = np.random.default_rng(1).standard_normal((n, c, h, w)).astype(np.float32)
    per_image = [numpy_im2col(x[i], kernel, pad, stride) for i in range(n)]
    rows = per_image[0].shape[0]
    col = rt.alloc(n * per_image[0].size * 4, "columns")
    clblast_c.im2col(rt.queue, n * c, h, w, kernel, pad, stride, rt.upload(x, "batch"), 0, col, 0)
    got = rt.read(col, (n * rows, per_image[0].shape[1]))
    for i in range(n):
        np.testing.assert_array_equal(got[i * rows:(i + 1) * rows], per_image[i])


CONV_SHAPES = [  # batch, channels, height, width, kernels, kernel, pad, stride
    (1, 3, 7, 9, 5, (3, 3), (1, 1), (1, 1)),
    (3, 5, 11, 13, 4, (5, 5), (2, 2), (2, 2)),
    (2, 7, 9, 6, 3, (3, 1), (1, 0), (1, 2)),
    (4, 1, 12, 12, 6, (5, 5), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("shape", CONV_SHAPES)
def test_convgemm_matches_the_oracle_and_overwrites(rt, shape):
    n, c, h, w, k, kernel, pad, stride = shape
    rng = np.random.default_rng(k * h)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((k, c) + kernel).astype(np.float32)
    want = oracle.conv(x, weight, np.zeros(k), stride, pad)
    out = rt.upload(np.full(want.size, 7.0, np.float32), "result")   # convgemm must not add to this
    clblast_c.convgemm(rt.queue, c, h, w, kernel, pad, stride, k, n, rt.upload(x, "image"), 0,
                       rt.upload(weight, "kernel"), 0, out, 0)
    result = compare_arrays(rt.read(out, want.shape), want)
    assert result.passed, result


def test_subsampling_filters_are_diagonal_and_give_the_subsample(rt):
    c, kernel, stride = 5, (3, 3), (2, 2)
    rng = np.random.default_rng(3)
    coeff, bias = rng.standard_normal(c), rng.standard_normal(c)
    weight = clblast_layers.subsample_as_conv_weight(coeff, kernel)
    assert weight.shape == (c, c, 3, 3) and weight.dtype == np.float32
    for i in range(c):
        for j in range(c):
            expect = np.float32(coeff[i] / 9) if i == j else 0.0
            assert np.all(weight[i, j] == expect)
    x = rng.standard_normal((2, c, 9, 8))
    np.testing.assert_allclose(oracle.conv(x, weight, bias, stride),
                               oracle.subsample(x, coeff, bias, kernel, stride), rtol=1e-6, atol=1e-6)


def test_bad_status_is_a_named_error(rt):
    im = rt.alloc(3 * 8 * 8 * 4, "image")
    with pytest.raises(clblast_c.ClblastError, match=r"xIM2COL failed: CLBlastInvalidDimension \(-1017\)") as err:
        clblast_c.im2col(rt.queue, 0, 8, 8, (3, 3), (0, 0), (1, 1), im, 0, im, 0)
    assert err.value.status == -1017 and err.value.status_name == "CLBlastInvalidDimension"
    with pytest.raises(clblast_c.ClblastError, match="CLBlastInvalidBatchCount"):
        clblast_c.convgemm(rt.queue, 3, 8, 8, (3, 3), (0, 0), (1, 1), 4, 0, im, 0, im, 0, im, 0)
    assert "unknown CLBlast status -9999" in str(clblast_c.ClblastError("xGEMM", -9999))


def test_too_small_buffers_are_refused_before_clblast_runs(rt):
    # CLBlast 1.5 does not check im2col's buffers itself: an overrun would corrupt memory
    im, col = rt.alloc(3 * 8 * 8 * 4, "image"), rt.alloc(16, "columns")
    with pytest.raises(clblast_c.BufferTooSmall, match="column buffer holds 4 floats.*972 floats"):
        clblast_c.im2col(rt.queue, 3, 8, 8, (3, 3), (0, 0), (1, 1), im, 0, col, 0)
    with pytest.raises(clblast_c.BufferTooSmall, match="image buffer"):
        clblast_c.im2col(rt.queue, 3, 8, 8, (3, 3), (0, 0), (1, 1), im, 1, rt.alloc(4000, "c"), 0)


MINI_LENET = Net("mini-lenet", (1, 12, 12), (
    Conv("c1", "sigmoid", out_channels=6, kernel=(5, 5)),
    Subsample("s2", "sigmoid"),
    Dense("f3", "relu", out_features=7),
    Dense("f4", "none", out_features=5)))


@pytest.mark.parametrize("name,batch,expect", [
    ("clblast", 3, {"c1": ["xCOPY", "xIM2COL", "xGEMMBATCHED", "sigmoid (own kernel)"],
                    "s2": ["xCOPY", "xIM2COL", "xGEMMBATCHED", "sigmoid (own kernel)"],
                    "f3": ["xCOPY", "xGEMM", "relu (own kernel)"],
                    "f4": ["xCOPY", "xGEMM"]}),
    ("clblast", 1, {"c1": ["xCOPY", "xIM2COL", "xGEMM", "sigmoid (own kernel)"],
                    "s2": ["xCOPY", "xIM2COL", "xGEMM", "sigmoid (own kernel)"],
                    "f3": ["xCOPY", "xGEMV", "relu (own kernel)"],
                    "f4": ["xCOPY", "xGEMV"]}),
    ("clblast-convgemm", 3, {"c1": ["xCONVGEMM", "bias+sigmoid (own kernel)"],
                             "s2": ["xCONVGEMM", "bias+sigmoid (own kernel)"],
                             "f3": ["xCOPY", "xGEMM", "relu (own kernel)"],
                             "f4": ["xCOPY", "xGEMM"]}),
])
def test_steps_are_named_and_the_outputs_right(name, batch, expect):
    weights = init_weights(MINI_LENET, 5)
    x = np.random.default_rng(batch).standard_normal((batch,) + MINI_LENET.input_shape).astype(np.float32)
    prepared = in_process(name).prepare(MINI_LENET, weights, batch)
    try:
        assert prepared.config["layers"] == {k: " + ".join(v) for k, v in expect.items()}
        assert "warmup_ms" in prepared.config
        assert compare_arrays(prepared.forward(x), oracle.forward(MINI_LENET, weights, x)[-1]).passed
        timings = prepared.run_timed()
        for t in timings:
            assert [s.name for s in t.steps] == expect[t.name]
            for s in t.steps:
                assert s.how == ("event" if "own kernel" in s.name else "markers") and s.ms > 0
    finally:
        prepared.close()


@pytest.mark.parametrize("name", ["clblast", "clblast-convgemm"])
def test_warm_up_leaves_every_activation_poisoned(name):
    # prepare runs every routine once (compiling CLBlast's kernels) and then
    # poisons again, so an element a run fails to write still reads NaN
    prepared = in_process(name).prepare(MINI_LENET, init_weights(MINI_LENET, 0), 2)
    try:
        assert prepared.config["warmup_ms"] > 0
        for op in prepared.ops:
            assert np.isnan(op.read_output()).all(), op.layer.name
    finally:
        prepared.close()


def test_lenet_c1_breakdown_is_the_seeds(lenet_case):
    # table 5.3's rows for C1 at batch 100, plus the sigmoid the study left untimed
    net = Net("c1-only", LENET.input_shape, LENET.layers[:1])
    weights = {k: v for k, v in lenet_case.weights.items() if k.startswith(LENET.layers[0].name + ".")}
    prepared = in_process("clblast").prepare(net, weights, 100)
    try:
        prepared.load_input(lenet_case.x)
        (c1,) = prepared.run_timed()
        assert [s.name for s in c1.steps] == ["xCOPY", "xIM2COL", "xGEMMBATCHED", "sigmoid (own kernel)"]
        assert compare_arrays(prepared.fetch_output(), lenet_case.ref[0]).passed
    finally:
        prepared.close()


def test_an_im2col_buffer_past_max_alloc_fails_in_prepare_with_the_sizes(rt, monkeypatch):
    net = Net("wide", (8, 40, 40), (Conv("wide1", "relu", out_channels=2, kernel=(3, 3), pad=(1, 1)),))
    weights = init_weights(net, 0)
    # im2col: 2 images * 8 channels * 9 taps = 144 rows of 1600 columns = 921,600 bytes;
    # the input (102,400 bytes), output and weights all fit under the lowered limit
    monkeypatch.setitem(rt.info, "max_alloc_bytes", 500_000)
    with pytest.raises(UserError, match=r"im2col buffer of wide1 \(144 x 1600 floats\) needs 0\.9 MiB.*"
                                        r"MAX_MEM_ALLOC_SIZE 0\.5 MiB"):
        in_process("clblast").prepare(net, weights, 2)
    # xCONVGEMM's single kernel needs no im2col buffer: it prepares and runs right
    prepared = in_process("clblast-convgemm").prepare(net, weights, 2)
    try:
        x = np.random.default_rng(3).standard_normal((2,) + net.input_shape).astype(np.float32)
        assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
    finally:
        prepared.close()


def test_prepare_fails_cleanly_and_releases_what_it_allocated(rt, monkeypatch):
    from backends.clblast.backend import ClblastNet
    net = Net("t", (3, 6, 6), (Conv("a", "relu", out_channels=2, kernel=(3, 3)), Dense("b", out_features=300)))
    weights = init_weights(net, 0)
    limit = max(np.prod(s) * 4 for s in net.param_shapes().values()) - 4   # the dense weights do not fit
    monkeypatch.setitem(rt.info, "max_alloc_bytes", int(limit))
    released = []
    close = ClblastNet.close
    monkeypatch.setattr(ClblastNet, "close", lambda self: (released.append(len(self.buffers)), close(self)))
    with pytest.raises(UserError, match="weights of b"):
        in_process("clblast").prepare(net, weights, 1)
    assert released and released[0] > 0   # the buffers made before the failure were released


@pytest.mark.parametrize("missing", ["pyclblast", "libclblast"])
def test_a_missing_library_makes_both_unavailable_and_the_others_still_run(missing, monkeypatch, tmp_path):
    if missing == "pyclblast":
        monkeypatch.setattr(clblast_c, "pyclblast", None)
        monkeypatch.setattr(clblast_c, "PYCLBLAST_ERROR", "No module named 'pyclblast'")
        expect = "pyclblast is not installed (No module named 'pyclblast')"
    else:
        monkeypatch.setattr(clblast_c, "_lib", None)
        monkeypatch.setattr(clblast_c, "LIBRARY_NAMES", ("libclblast-not-here.so.9",))
        expect = "libclblast could not be loaded (libclblast-not-here.so.9"
    for name in ("clblast", "clblast-convgemm"):
        reason = backends.unavailable_reason(name)
        assert reason and reason.startswith(expect), reason
        with pytest.raises(UserError, match="unavailable"):
            backends.get(name)
    assert backends.unavailable_reason("numpy") is None
    out = tmp_path / "r.json"
    code = main(["run", "--net", "lenet", "--backends", "numpy,clblast", "--batch", "2", "--repeats", "1",
                 "--mode", "correctness", "--out", str(out)])
    data = {b["name"]: b for b in json.loads(out.read_text())["backends"]}
    assert code == 0
    assert data["numpy"]["status"] == "OK" and data["numpy"]["check"]["status"] == "PASS"
    assert data["clblast"]["status"] == "UNAVAILABLE" and data["clblast"]["reason"].startswith(expect)



# -- clblast-best: its candidates, looked at in a child process (backends/isolated.py) -----------

def _best(net, batch, max_alloc=None, only=None):
    from backends.isolated import call_isolated
    return call_isolated("clblast-best check", "run_checks", "best_prepared", net, batch, max_alloc, 0, only)


def test_clblast_best_times_every_composition_and_keeps_the_fastest():
    config, y, ref = _best(MINI_LENET, 3)
    assert compare_arrays(y, ref).passed
    timed = config["candidates_ms"]
    assert set(timed["c1"]) == {"im2col+gemm-direct", "im2col+gemm-indirect", "convgemm"}
    assert set(timed["s2"]) == {"avgpool", "sparse-convgemm"}
    assert set(timed["f3"]) == {"gemm-direct", "gemm-indirect"}
    for layer, candidates in timed.items():
        chosen = config["layers"][layer].split(":")[0]
        numbers = {k: v for k, v in candidates.items() if not isinstance(v, str)}
        # the least time, kept rounded to 0.1 us: two compositions that round alike tie, either may be chosen
        assert numbers[chosen] == min(numbers.values()), (layer, candidates)
    assert config["clblast_parameters"] == "CLBlast database default"


def test_clblast_best_at_batch_1_tries_the_gemv_fast_path_with_its_output_set_first():
    net = Net("gemv", (3, 4, 5), (Dense("d", "relu", out_features=9),))
    config, y, ref = _best(net, 1)
    assert set(config["candidates_ms"]["d"]) == {"copy-bias+gemv", "zero+gemv", "copy-bias+gemv-transposed",
                                                 "zero+gemv-transposed", "gemm-direct", "gemm-indirect"}
    assert compare_arrays(y, ref).passed   # xGEMV reads y even at beta 0: a NaN there would stay


@pytest.mark.parametrize("only", ["copy-bias+gemv", "zero+gemv", "copy-bias+gemv-transposed", "zero+gemv-transposed"])
def test_clblast_best_every_gemv_composition_is_right(only):
    net = Net("gemv", (3, 4, 5), (Dense("d", "relu", out_features=9),))
    config, y, ref = _best(net, 1, only=only)
    assert set(config["candidates_ms"]["d"]) == {only} and config["layers"]["d"].startswith(only + ":")
    assert compare_arrays(y, ref).passed


def test_clblast_best_without_room_for_im2col_keeps_xconvgemm():
    net = Net("wide", (8, 40, 40), (Conv("wide1", "relu", out_channels=2, kernel=(3, 3), pad=(1, 1)),))
    config, y, ref = _best(net, 2, max_alloc=500_000)   # the im2col buffer needs 0.9 MiB
    assert set(config["candidates_ms"]["wide1"]) == {"convgemm"}
    assert config["layers"]["wide1"].startswith("convgemm") and compare_arrays(y, ref).passed


def test_clblast_best_routes_each_gemm_with_the_set_tuned_for_that_kernel():
    from backends.clblast import problems
    from backends.clblast.best import ClblastBestNet
    from backends.clblast.overrides import ALWAYS_DIRECT, ALWAYS_INDIRECT
    from backends.clblast.tuned import Tuning
    from test_tune import verified_record
    p = problems.gemm(6, 784, 25, 2)
    rec = verified_record(p, {"database": 0.3, "XgemmDirect": 0.2, "Xgemm": 0.25})
    net = type("Fake", (), {"tuning": Tuning({p: rec}, {p: 1})})()
    direct = dict(ClblastBestNet._sets(net, p, "XgemmDirect", ALWAYS_DIRECT))
    indirect = dict(ClblastBestNet._sets(net, p, "Xgemm", ALWAYS_INDIRECT))
    assert direct == {"XgemmDirect": {"WGD": 1}, "GemmRoutine": ALWAYS_DIRECT}
    assert indirect == {"Xgemm": {"MWG": 1}, "GemmRoutine": ALWAYS_INDIRECT}
    database = type("Fake", (), {"tuning": Tuning(None, {p: 1})})()
    assert ClblastBestNet._sets(database, p, "Xgemm", ALWAYS_INDIRECT) == [("GemmRoutine", ALWAYS_INDIRECT)]


@pytest.mark.parametrize("option, mode, applied", [("tuned", None, True), ("tuned", "database", False),
                                                   ("database", "tuned", False), ("database", None, False)])
def test_the_database_option_overrules_a_tuned_mode(rt, tmp_path, monkeypatch, option, mode, applied):
    backend_or_skip("clblast")
    from backends import RunOptions
    from backends.clblast.backend import ClblastInProcess
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))   # no tuning here: only the switch is looked at
    backend = ClblastInProcess(rt, RunOptions(clblast_params=option))
    assert backend.tuning(LENET, 2, mode).apply is applied
    if option == "tuned":   # asked for by name, a tuned mode that would change no call is refused
        for tuned in ("tuned", "tuned-per-problem"):
            with pytest.raises(Unsupported, match=f"{tuned}: every call would run with CLBlast's database "
                                                  f"parameters .*not tuned: none of its 10 problems searched yet"):
                backend.tuning(LENET, 2, tuned)
    assert backend.modes() == []   # modes only with a verified tuning (tests/test_tune.py)
