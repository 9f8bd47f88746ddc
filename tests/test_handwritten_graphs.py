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

from conftest import assert_borders_zero, backend_or_skip

GRAPH_BACKENDS = ["baseline", "vectorised", "vectorised-tiled"]
DW_PW_BACKENDS = ["vectorised", "vectorised-tiled"]   # baseline keeps the study's kernel per layer


@pytest.mark.long
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
    assert_borders_zero(prepared)


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
        # vectorised's depthwise kernel, or the one shaped for the vector width where it measured faster (cpu_conv.py)
        assert config["layers"]["dw1"]["kernel"] in ("depthwise conv+relu6", f"vector depthwise "
                                                     f"{config.get('cpu_conv', {}).get('dw1', {}).get('chosen')}+relu6")


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
    config = run_case(lambda n, w, b: tiled.TiledNet(runtime, n, w, b, tiles=(tile,), ksplit=split,
                                                         winograd="never", pointwise="never"), net, batch, 9)
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
    """ResNet-18's 8 adds each in its block's last conv (conv{s}_{b}b, the projection computed before
    it); a forward pass then times the conv with the add's work and the add at 0."""
    net, batch = CASES["residual"]
    assert run_case(backend_or_skip(name).prepare, net, batch, 11)["residual_adds_fused"] == {
        "s3": "into d's epilogue (adds s2)"}   # s1: proj is read by s2 too; s2 has three inputs
    prepared = backend_or_skip(name).prepare(RESNET18, init_weights(RESNET18), 1)
    try:
        fused = prepared.config["residual_adds_fused"]
        assert len(fused) == 8 and fused["conv3_1"] == "into conv3_1b's epilogue (adds conv3_1_proj)"
        prepared.load_input(np.zeros((1,) + RESNET18.input_shape, np.float32))
        steps = {t.name: t.steps for t in prepared.run_timed()}
        chosen = prepared.config.get("winograd", {}).get("conv2_1b", {"chosen": "direct"})["chosen"]
        expected = [step]
        m = chosen.split(" ")[0]
        if " GEMM " in chosen:   # Winograd's products as a GEMM (winograd_gemm.py): its output transform adds
            expected = [f"winograd {m} input transform", f"winograd {m} batched GEMM",
                        f"winograd {m} output transform+add+relu"]
        elif chosen != "direct":   # a 3x3 stride-1 conv measured faster as Winograd (winograd.py): its kernel adds
            expected = [f"winograd {m}+add+relu"]
        vector = prepared.config.get("cpu_conv", {}).get("conv2_1b", {}).get("chosen", "")
        if vector[:1].isdigit():   # or as the kernel shaped for the vector width (cpu_conv.py): its kernel adds
            expected = [f"vector conv {vector}+add+relu"]
        assert [s.name for s in steps["conv2_1b"]] == expected and steps["conv2_1"] == []
    finally:
        prepared.close()


@pytest.mark.parametrize("name", GRAPH_BACKENDS)
def test_an_add_of_more_inputs_than_the_kernel_takes_is_unsupported(name):
    net = Net("t", (2, 3, 3), tuple(Conv(f"c{i}", out_channels=2, kernel=(1, 1), inputs=("input",)) for i in range(5))
              + (Add("sum", inputs=tuple(f"c{i}" for i in range(5))),))
    with pytest.raises(Unsupported, match="adds 5 inputs"):
        backend_or_skip(name).prepare(net, init_weights(net), 1)


def _block(name: str, block_input: str, c: int, hidden: int, out: int, stride: int, act: str = "relu6"):
    """MobileNet-v2's bottleneck: expand 1x1 (where hidden != c), depthwise 3x3, project 1x1, and the add
    where the stride is 1 and the channels stay."""
    layers = [Conv(f"{name}_expand", "relu6", inputs=(block_input,), out_channels=hidden, kernel=(1, 1))] \
        if hidden != c else []
    layers.append(Conv(f"{name}_dw", act, inputs=() if layers else (block_input,), out_channels=hidden,
                       kernel=(3, 3), stride=(stride, stride), pad=(1, 1), groups=hidden))
    layers.append(Conv(f"{name}_project", "none", out_channels=out, kernel=(1, 1)))
    if stride == 1 and c == out:
        layers.append(Add(f"{name}_add", "none", inputs=(f"{name}_project", block_input)))
    return layers


# MobileNet-v2-like chains at shapes the net does not have: channels not a multiple of 4, odd sizes (tiles
# of pixels that span rows and images, a last tile cut short), depthwise at stride 1 and 2, the 1x1 with and
# without its residual add folded too; a depthwise as the net's first layer and a 1x1 as its last (the fold
# keeps the conversions at the edges); one depthwise that two layers read (not folded)
DW_PW_NETS = {
    "blocks": (Net("t", (5, 9, 7), (
        Conv("stem", "relu6", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        *_block("b1", "stem", 6, 6, 6, 1),                 # t = 1, as bottleneck1_1, with its add
        *_block("b2", "b1_add", 6, 15, 7, 2),              # 15 hidden channels, stride 2
        *_block("b3", "b2_project", 7, 22, 7, 1, "sigmoid"),   # a sigmoid would make padding channels 0.5
        GlobalAvgPool("gap"),
        Dense("fc", "none", out_features=3))), 2,
        {"b1_dw": "b1_project", "b2_dw": "b2_project", "b3_dw": "b3_project"}),
    "edges": (Net("t", (7, 6, 5), (
        Conv("dw", "relu6", out_channels=7, kernel=(3, 3), stride=(2, 1), pad=(1, 0, 1, 1), groups=7),
        Conv("pw", "relu", out_channels=9, kernel=(1, 1)),
        Conv("dw2", "tanh", out_channels=9, kernel=(2, 3), pad=(0, 1), groups=9),
        Conv("pw2", "none", out_channels=5, kernel=(1, 1)))), 3, {"dw": "pw", "dw2": "pw2"}),
    "shared": (Net("t", (6, 7, 7), (
        Conv("e", "relu6", out_channels=10, kernel=(1, 1)),
        Conv("dw", "relu6", out_channels=10, kernel=(3, 3), pad=(1, 1), groups=10),
        Conv("pw", "none", out_channels=6, kernel=(1, 1)),
        Conv("other", "none", inputs=("dw",), out_channels=6, kernel=(1, 1)),
        Add("add", "none", inputs=("pw", "other")),
        Conv("dw2", "relu6", out_channels=6, kernel=(3, 3), pad=(1, 1), groups=6),
        Conv("pw2", "none", out_channels=4, kernel=(3, 3), pad=(1, 1)))), 1, {}),   # pw2 is 3x3: no fold
}


def folding(backend, how: str):
    """The backend's prepare with its depthwise fold `how` (dw_pw.FOLDS) instead of measured, and the
    block kernels that take the fold further (blocks.py, tested in test_blocks.py) off."""
    return lambda net, weights, batch: type(backend).net_class(backend.runtime, net, weights, batch,
                                                                fold_depthwise=how, fuse_blocks="never")


@pytest.mark.parametrize("name", DW_PW_BACKENDS)
@pytest.mark.parametrize("case", list(DW_PW_NETS))
def test_a_depthwise_conv_is_folded_into_the_1x1_conv_after_it(name, case):
    """Folded where the 1x1 alone reads it; every pass (each layer alone, one pass layer by layer,
    end to end, the timed pass) matches the oracle, and the depthwise layer's time is its input
    conversion's at most."""
    net, batch, pairs = DW_PW_NETS[case]
    backend = backend_or_skip(name)
    config = run_case(folding(backend, "always"), net, batch, 60 + list(DW_PW_NETS).index(case))
    assert {dw: text.split("'")[0].split()[-1] for dw, text in config["depthwise_fused"].items()} == pairs
    assert "depthwise_not_fused" not in config
    if case == "blocks":   # the adds of b1 and b3 in their 1x1's epilogue, inside the folded kernel
        assert config["residual_adds_fused"] == {"b1_add": "into b1_project's epilogue (adds stem)",
                                                 "b3_add": "into b3_project's epilogue (adds b2_project)"}
        assert config["depthwise_fused"]["b3_dw"].endswith("; b3_add in its epilogue)")
    weights = init_weights(net, 1)
    prepared = folding(backend, "always")(net, weights, batch)
    try:
        x = np.random.default_rng(1).standard_normal((batch,) + net.input_shape).astype(np.float32)
        prepared.load_input(x)
        steps = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
        assert compare_arrays(prepared.fetch_output(), oracle.forward(net, weights, x)[-1]).passed
    finally:
        prepared.close()
    for dw, pw in pairs.items():
        assert steps[dw] in ([], ["input NCHW->NHWC+border"]) and steps[pw][0].startswith("depthwise+")
    if case == "blocks":
        assert steps["b3_project"] == ["depthwise+sigmoid+conv 1x1+add"] and steps["b3_add"] == []
        assert steps["b2_project"] == ["depthwise+relu6+conv 1x1"]
    if case == "edges":
        assert steps["dw"] == ["input NCHW->NHWC+border"] and steps["pw2"] == ["depthwise+tanh+conv 1x1",
                                                                        "output NHWC->NCHW"]


@pytest.mark.parametrize("name", DW_PW_BACKENDS)
def test_without_the_fold_the_two_kernels_run_and_say_why(name, monkeypatch):
    """Where the fold is turned off, and (vectorised) where one pixel's depthwise channels do not fit the
    device's local memory, the depthwise and the 1x1 stay two kernels (labelled) and still match the oracle."""
    backend = backend_or_skip(name)
    net, batch, pairs = DW_PW_NETS["blocks"]
    off = run_case(folding(backend, "never"), net, batch, 3)
    assert off["depthwise_fused"] == {} and off["depthwise_not_fused"]["b2_dw"] == (
        "its own kernel, b2_project another: folding turned off (fold_depthwise='never')")
    # 15 channels stored as 16: 64 bytes a pixel; 6 and 22 as 8 and 24: 32 and 96 bytes.  The device's local memory
    # is made that small only while a fold is planned, so vectorised-tiled's own tiles still fit
    from backends.handwritten import vectorised
    plan_fold = vectorised.VectorisedNet.dw_pw_op

    def with_80_bytes(self, *args):
        room = self.rt.info["local_mem_bytes"]
        self.rt.info["local_mem_bytes"] = 80
        try:
            return plan_fold(self, *args)
        finally:
            self.rt.info["local_mem_bytes"] = room
    monkeypatch.setattr(vectorised.VectorisedNet, "dw_pw_op", with_80_bytes)
    small = run_case(folding(backend, "always"), net, batch, 4)
    assert set(small["depthwise_fused"]) == {"b1_dw", "b2_dw"} and small["depthwise_fused"]["b2_dw"].startswith(
        "into b2_project's kernel (dw_pw: 1 pixels x 2 work-items a group")
    assert small["depthwise_not_fused"] == {"b3_dw": "its own kernel, b3_project another: one pixel's 24 depthwise "
                                                     "channels need 96 B of local memory, the device has 80 B"}


@pytest.mark.parametrize("name", DW_PW_BACKENDS)
def test_measured_each_pair_folds_where_it_measured_faster(name, monkeypatch):
    """fold_depthwise "measured": each foldable pair timed both ways at prepare, kept in the faster
    form, with both times in `config`; either way every pass matches the oracle.  The timing is
    forced each way, so that both outcomes are seen whatever this device measures."""
    from backends.handwritten import dw_pw, vectorised
    backend = backend_or_skip(name)
    net, batch, pairs = DW_PW_NETS["blocks"]
    # the vector fold, measured next on a CPU (cpu_fold.py, tested in test_cpu_conv.py), not offered: dw_pw's verdict runs
    monkeypatch.setattr(vectorised.VectorisedNet, "offer_vector_fold", lambda self, ops, pair: None)
    for folded_wins in (True, False):
        seen = []

        def timed(rt, forms):
            got = dw_pw.fastest_ms(rt, forms, 1, 2)   # the real timing runs (and must not disturb the pass) ...
            seen.append(got)
            return [1.0, 2.0] if folded_wins else [2.0, 1.0]   # ... its verdict forced
        monkeypatch.setattr(vectorised, "fastest_ms", timed)
        config = run_case(folding(backend, "measured"), net, batch, 9)
        assert len(seen) == len(pairs) and all(ms > 0 for got in seen for ms in got)
        if folded_wins:
            assert set(config["depthwise_fused"]) == set(pairs) and "depthwise_not_fused" not in config
            assert config["depthwise_fused"]["b2_dw"].endswith(
                f"; measured 1.0000 ms against 2.0000 as two kernels, {vectorised.TIMED})")
        else:
            assert config["depthwise_fused"] == {} and config["depthwise_not_fused"]["b2_dw"] == (
                f"its own kernel, b2_project another: measured faster so (1.0000 ms against 2.0000 folded, "
                f"{vectorised.TIMED})")


def test_an_unknown_fold_choice_is_refused():
    from backends.handwritten.vectorised import VectorisedNet
    backend = backend_or_skip("vectorised")
    net, batch, _ = DW_PW_NETS["blocks"]
    with pytest.raises(ValueError, match="fold_depthwise True: one of always, never, measured"):
        VectorisedNet(backend.runtime, net, init_weights(net, 0), batch, fold_depthwise=True)


@pytest.mark.parametrize("units", [2, 16])
def test_gpu_plans_split_the_output_channels_and_still_match(units, monkeypatch):
    """The fold as planned on a GPU (smaller tiles, output channels split over work-groups that each
    redo the depthwise), forced on this device."""
    from backends.handwritten import vectorised
    backend = backend_or_skip("vectorised")
    monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    monkeypatch.setitem(backend.runtime.info, "compute_units", units)
    net = Net("t", (6, 5, 5), (
        Conv("e", "relu6", out_channels=30, kernel=(1, 1)),
        Conv("dw", "relu6", out_channels=30, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=30),
        Conv("pw", "none", out_channels=150, kernel=(1, 1)),
        Conv("dw2", "relu6", out_channels=150, kernel=(3, 3), pad=(1, 1), groups=150),
        Conv("pw2", "relu", out_channels=37, kernel=(1, 1)),
        GlobalAvgPool("gap")))
    config = run_case(folding(backend, "always"), net, 1, 8)
    plans = {dw: config["depthwise_fused"][dw] for dw in ("dw", "dw2")}
    assert all("channel split" in text for text in plans.values())
    if units == 16:   # 9 pixels: tiles of 1, and 32 work-groups wanted of 9 tiles (at most 5 splits of 38 float4s)
        assert "1 pixels x" in plans["dw"] and "4 channel splits" in plans["dw"]
        assert "2 channel splits" in plans["dw2"]   # 37 outputs, 10 float4s: redoing more would cost too much


def test_the_fold_tile_fits_local_memory():
    """MobileNet-v2's widest depthwise (960 channels, 240 float4s a pixel): 8 pixels in a GPU's 48 KiB,
    4 in 16 KiB, none in a byte less than one pixel's 3840; a CPU's tile of 2 pixels, a work-item per
    four output channels."""
    from backends.handwritten.dw_pw import plan_dw_pw
    from backends.opencl.workgroups import Limits
    lim = Limits(1024, (1024, 1024, 64))
    assert plan_dw_pw(49, 240, 40, 9, True, 2, lim, 48 * 1024).tp == 8
    assert plan_dw_pw(49, 240, 40, 9, True, 2, lim, 16 * 1024).local_bytes == 4 * 3840
    assert plan_dw_pw(49, 240, 40, 9, True, 2, lim, 3839) is None
    cpu = plan_dw_pw(49, 240, 40, 9, False, 2, lim, 1 << 20)
    assert (cpu.tp, cpu.g, cpu.splits) == (2, 40, 1) and cpu.global_size == (50, 40)
    assert plan_dw_pw(49, 240, 40, 9, False, 2, lim, 3840).tp == 1
    gpu = plan_dw_pw(49, 240, 40, 9, True, 132, lim, 48 * 1024)   # 7x7 on 132 units: one pixel a group, split
    assert (gpu.tp, gpu.splits, gpu.g) == (1, 5, 8) and gpu.global_size == (49, 40)
    big = plan_dw_pw(112 * 112, 8, 4, 9, True, 132, lim, 48 * 1024)   # plenty of tiles: no split
    assert (big.tp, big.splits, big.g) == (8, 1, 4)
