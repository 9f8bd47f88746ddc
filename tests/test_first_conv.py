"""The net's first conv reading the net's input itself, NCHW without a border, no conversion kernel before it
(backends/handwritten/first_conv.py, kernels/tiled_conv.cl NCHW_IN), at fresh random shapes against the float64
oracle: 1, 3 and 4 input channels, strides, padding wider and narrower than the window, a batch; the layer-wise
checks keep the conversion; measured, turned off, and where it cannot apply."""
import numpy as np
import pytest

from backends.handwritten.first_conv import CONVERTED, DIRECT
from backends.handwritten.tiled import TiledNet
from compare import oracle
from compare.checking import check_prepared
from nets import Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import assert_borders_zero, backend_or_skip

# (input C, H, W), kernel, stride, padding
SHAPES = [((3, 17, 13), (7, 7), (2, 2), (3, 3)), ((1, 9, 11), (5, 5), (1, 1), (0, 0)),
          ((4, 8, 7), (3, 3), (1, 1), (1, 1)), ((3, 10, 9), (3, 3), (2, 1), (2, 0))]


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised-tiled").runtime


def two_convs(shape, kernel, stride, pad, seed: int) -> Net:
    k = int(np.random.default_rng(seed).integers(3, 12))
    return Net(f"first{seed}", shape, (
        Conv("a", "relu", out_channels=k, kernel=kernel, stride=stride, pad=pad),
        Conv("b", "none", out_channels=5, kernel=(3, 3), pad=(1, 1)),
        GlobalAvgPool("gap")))


def prepared_and_checked(runtime, net, batch, seed, **forms):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    # the tiled kernel on every device (a CPU's vector kernels and Winograd would take the layer there)
    prepared = TiledNet(runtime, net, weights, batch, cpu_conv="never", winograd="never", **forms)
    result = check_prepared(prepared, x, oracle.forward(net, weights, x))
    assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
    assert_borders_zero(prepared)
    return prepared


def steps(prepared) -> list[str]:
    return [s.name for t in prepared.run_timed() for s in t.steps]


@pytest.mark.parametrize("seed, shape, kernel, stride, pad", [(i, *s) for i, s in enumerate(SHAPES)])
def test_the_first_conv_reading_the_input_matches_the_oracle(runtime, seed, shape, kernel, stride, pad):
    prepared = prepared_and_checked(runtime, two_convs(shape, kernel, stride, pad, seed), 1 + seed % 2, seed,
                                    read_input="always")
    try:
        record = prepared.config["first_conv"]
        assert record["chosen"] == DIRECT and record["rel_l2_against_converted"] <= 1e-6, record
        ran = steps(prepared)
        assert ran[0] == "tiled conv+relu (reads the input NCHW)" and not any("NCHW->" in s for s in ran), ran
        assert "first_conv.py" in prepared.config["input_conversion"]
    finally:
        prepared.close()


def test_measured_or_turned_off_the_pass_says_which_ran(runtime):
    net = two_convs(*SHAPES[0], 9)
    for mode in ("measured", "never"):
        prepared = prepared_and_checked(runtime, net, 2, 9, read_input=mode)
        try:
            record = prepared.config["first_conv"]
            ran = steps(prepared)
            if mode == "never":
                assert record == {"chosen": CONVERTED, "why": "turned off (read_input='never')"}
            else:
                assert set(record["ms"]) == {CONVERTED, DIRECT}
                assert record["chosen"] == min(record["ms"], key=record["ms"].get)
            assert (ran[0] == "input NCHW->NHWC+border") == (record["chosen"] == CONVERTED), (record, ran)
        finally:
            prepared.close()


def test_an_input_of_more_than_four_channels_keeps_its_conversion(runtime):
    prepared = prepared_and_checked(runtime, two_convs((6, 7, 7), (3, 3), (1, 1), (1, 1), 4), 1, 4,
                                    read_input="always")
    try:
        assert prepared.config["first_conv"]["chosen"] == CONVERTED
        assert "6 channels" in prepared.config["first_conv"]["why"]
        assert steps(prepared)[0] == "input NCHW->NHWC+border"
    finally:
        prepared.close()
