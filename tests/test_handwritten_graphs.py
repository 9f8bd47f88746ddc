"""The hand-written backends that run graphs (`baseline`, `vectorised`,
`vectorised-tiled`) on ResNet-18 and MobileNet-v2, and each of their graph kernels alone on
fresh random inputs at shapes the nets do not have: odd sizes, channels not
a multiple of 4, stride 2, asymmetric padding, a buffer read by layers
that want different borders.  Every check is against the float64 oracle:
each layer alone on the oracle's inputs, every layer of one pass, the
output end to end, and the border and padding channels of every buffer
still zero afterwards."""
import numpy as np
import pytest

from backends.handwritten import tiled
from backends.handwritten.layout import net_layouts
from backends.handwritten.tiled_plan import TILES
from compare import oracle
from compare.checking import check_prepared, compare_arrays
from compare.cli import main
from nets import RESNET18, Add, Conv, Dense, GlobalAvgPool, MaxPool, Net
from nets.errors import Unsupported
from nets.weights import init_weights

from conftest import backend_or_skip

GRAPH_BACKENDS = ["baseline", "vectorised", "vectorised-tiled"]


@pytest.mark.parametrize("name", GRAPH_BACKENDS)
@pytest.mark.parametrize("net", ["resnet18", "mobilenet-v2"])
def test_compare_check_passes_on_the_graph_nets(name, net, capsys):
    backend_or_skip(name)
    assert main(["check", "--net", net, "--backends", name]) == 0, capsys.readouterr().err


def _check(prepared, net, weights, x):
    """Every way of running `prepared` agrees with the oracle; its buffers' borders stay zero."""
    ref = oracle.forward(net, weights, x)
    check = check_prepared(prepared, x, ref)
    assert check.status == "PASS", (check.end_to_end, [(r.name, r.rel_l2) for r in check.layers if not r.passed])
    for layer, got, want in zip(net.layers, prepared.layer_outputs(x), ref):
        assert compare_arrays(got, want).passed, f"{layer.name} in one pass"
    for i, (lay, buf) in enumerate(zip(prepared.layouts, prepared.activations)):
        raw = prepared.rt.read(buf, lay.stored_shape)
        inside = np.zeros(lay.stored_shape, bool)
        rows, cols = slice(lay.pad_h, lay.pad_h + lay.h), slice(lay.pad_w, lay.pad_w + lay.w)
        if lay.order == "nchw":
            inside[:, :lay.c, rows, cols] = True
        else:
            inside[:, rows, cols, :lay.c] = True
        assert np.all(raw[~inside] == 0), f"border or padding channels of buffer {i} not zero"


def run_case(prepare, net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = prepare(net, weights, batch)
    try:
        _check(prepared, net, weights, x)
        return prepared.config
    finally:
        prepared.close()


CASES = {
    # depthwise 3x3 at stride 2, 6 channels (a zero tail), odd size, relu6; then one at stride 1, tanh
    "depthwise": (Net("t", (6, 9, 7), (
        Conv("dw1", "relu6", out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=6),
        Conv("dw2", "tanh", out_channels=6, kernel=(3, 3), pad=(1, 1), groups=6))), 2),
    # asymmetric padding on a dense conv and a depthwise one, 2x2 windows
    "asymmetric-pad": (Net("t", (5, 8, 11), (
        Conv("a", "relu", out_channels=7, kernel=(2, 2), pad=(0, 1, 1, 0)),
        Conv("b", "none", out_channels=7, kernel=(3, 2), stride=(2, 2), pad=(2, 0, 1, 1), groups=7))), 1),
    # max-pool with padding on negative values (padding must not win), ResNet's 3x3 stride 2
    "maxpool-pad": (Net("t", (3, 11, 10), (
        Conv("a", "none", out_channels=5, kernel=(1, 1)),
        MaxPool("p", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
        MaxPool("q", "relu", kernel=(2, 3), stride=(1, 2), pad=(1, 0, 0, 2)))), 2),
    # a residual block with a projection: one buffer read by a padded conv, a 1x1 stride-2 conv and
    # (in the second block) an add, so readers want different borders; a three-input add; a conv
    # that only its add reads; then a global pool and dense
    "residual": (Net("t", (5, 9, 9), (
        Conv("a", "relu", out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
        Conv("b", "none", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        Conv("proj", "none", inputs=("input",), out_channels=6, kernel=(1, 1), stride=(2, 2)),
        Add("s1", "relu", inputs=("b", "proj")),
        Conv("c", "relu6", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        Add("s2", "tanh", inputs=("c", "s1", "proj")),
        Conv("d", "none", out_channels=6, kernel=(3, 2), pad=(1, 0, 1, 1)),   # folds its add (vectorised)
        Add("s3", "relu6", inputs=("s2", "d")),
        GlobalAvgPool("gap"),
        Dense("fc", "sigmoid", out_features=5))), 3),
    # grouped (not depthwise) convs: one filter per group of two channels (as many groups as filters,
    # but not depthwise), and a depthwise one with two filters per channel: the zero-block conv
    "grouped": (Net("t", (6, 7, 5), (
        Conv("g", "relu", out_channels=9, kernel=(3, 3), pad=(1, 1), groups=3),
        Conv("m", "none", out_channels=18, kernel=(1, 1), groups=9),
        Conv("f", "none", inputs=("input",), out_channels=3, kernel=(1, 1), groups=3))), 2),
    # a dense layer reading a buffer that also carries a conv's border
    "dense-reads-border": (Net("t", (3, 5, 6), (
        Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=2, kernel=(3, 3), pad=(1, 2)),
        Dense("fc", "none", inputs=("a",), out_features=4))), 2),
}


@pytest.mark.parametrize("name", GRAPH_BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_graph_kernels_alone_match_the_oracle(name, case):
    net, batch = CASES[case]
    config = run_case(backend_or_skip(name).prepare, net, batch, 40 + list(CASES).index(case))
    if case == "depthwise":
        assert config["layers"]["dw1"]["kernel"] == "depthwise conv+relu6"


def test_grouped_convs_say_how_they_run():
    config = run_case(backend_or_skip("vectorised-tiled").prepare, *CASES["grouped"], 5)
    assert config["layers"]["g"]["kernel"] == "conv (3 groups as zero blocks)+relu"
    assert config["tile_source"]["g"] == "no tile for grouped convolutions: vectorised's kernel"


def test_baseline_runs_a_grouped_conv_as_its_loop_over_the_group():
    """The same conv kernel, the channel loop over the filter's group only: no zero blocks."""
    config = run_case(backend_or_skip("baseline").prepare, *CASES["grouped"], 5)
    kernels = {name: config["layers"][name]["kernel"] for name in ("g", "m", "f")}
    assert kernels == {"g": "conv (3 groups)+relu", "m": "depthwise conv", "f": "conv (3 groups)"}
    assert config["layers"]["g"]["local"] == "runtime's choice"   # as the study: no work-group of ours


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("tile", [TILES[2], TILES[6]], ids=str)
def test_gpu_tiles_on_1x1_and_stride_2_convs_read_through_wider_borders(tile, split):
    """The GPU plans forced on the residual case: the projection (1x1, stride
    2) reads a buffer whose border the padded conv beside it wants."""
    runtime = backend_or_skip("vectorised-tiled").runtime
    net, batch = CASES["residual"]
    config = run_case(lambda n, w, b: tiled.TiledNet(runtime, n, w, b, tiles=(tile,), ksplit=split), net, batch, 9)
    assert config["layers"]["proj"]["split"] == split and config["layers"]["proj"]["tile"] == str(tile)
    assert config["residual_adds_fused"] == {"s3": "into d's epilogue (adds s2)"}   # with a split: in its adding kernel


def test_a_buffer_carries_the_widest_border_of_its_readers():
    net, _ = CASES["residual"]
    lays = net_layouts(net, 1, "nhwc", 4)
    assert lays[0].border == (1, 1, 1, 1)        # the input: read by conv a (pad 1) and proj (pad 0)
    assert lays[net.layer_index("s1") + 1].border == (1, 1, 1, 1)   # read by conv c and add s2
    assert lays[net.layer_index("proj") + 1].border == (0, 0, 0, 0)
    asym = net_layouts(CASES["asymmetric-pad"][0], 1, "nhwc", 4)
    assert asym[0].border == (0, 1, 1, 0) and asym[1].border == (2, 0, 1, 1)
    assert asym[1].hp == asym[1].h + 3 and asym[1].wp == asym[1].w + 1


@pytest.mark.parametrize("name, step", [("baseline", "conv+add+relu"), ("vectorised", "conv+add+relu"),
                                        ("vectorised-tiled", "tiled conv+add+relu")])
def test_each_residual_add_is_folded_into_the_conv_before_it(name, step):
    """ResNet-18's 8 adds each in its block's last conv (conv{s}_{b}b, or the projection, computed
    after it); a forward pass then times the conv with the add's work and the add at 0."""
    net, batch = CASES["residual"]
    assert run_case(backend_or_skip(name).prepare, net, batch, 11)["residual_adds_fused"] == {
        "s3": "into d's epilogue (adds s2)"}   # s1: proj is read by s2 too; s2 has three inputs
    prepared = backend_or_skip(name).prepare(RESNET18, init_weights(RESNET18), 1)
    try:
        fused = prepared.config["residual_adds_fused"]
        assert len(fused) == 8 and fused["conv3_1"] == "into conv3_1_proj's epilogue (adds conv3_1b)"
        prepared.load_input(np.zeros((1,) + RESNET18.input_shape, np.float32))
        steps = {t.name: t.steps for t in prepared.run_timed()}
        assert [s.name for s in steps["conv2_1b"]] == [step] and steps["conv2_1"] == []
    finally:
        prepared.close()


@pytest.mark.parametrize("name", GRAPH_BACKENDS)
def test_an_add_of_more_inputs_than_the_kernel_takes_is_unsupported(name):
    net = Net("t", (2, 3, 3), tuple(Conv(f"c{i}", out_channels=2, kernel=(1, 1), inputs=("input",)) for i in range(5))
              + (Add("sum", inputs=tuple(f"c{i}" for i in range(5))),))
    with pytest.raises(Unsupported, match="adds 5 inputs"):
        backend_or_skip(name).prepare(net, init_weights(net), 1)
