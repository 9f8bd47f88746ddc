"""Convolutions shaped for the device's vector width (backends/handwritten/
cpu_conv.py, kernels/cpu_conv.cl): every variant (vector widths 4, 8 and 16,
whatever this device prefers) at random shapes (channels not a multiple of
the vectors, strides, asymmetric padding, batches, every activation, a
residual add in the epilogue, depthwise convs at both strides, a depthwise
folded into the 1x1 after it, by dw_pw and by the vector fold of cpu_fold.py)
against the float64 oracle; the measured choice both ways (in a small
MobileNet-v2 for the fold), and a variant that fails the float64 check never chosen."""
import numpy as np
import pytest

from backends.base import layer_params
from backends.handwritten import cpu_conv
from backends.handwritten.vectors import vector_width
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from compare.checking import check_prepared
from nets import ZOO_ACTIVATIONS, Add, Conv, Dense, GlobalAvgPool, MaxPool, Net, Subsample
from nets.weights import init_weights

from conftest import backend_or_skip


def random_net(seed: int) -> tuple[Net, int]:
    rng = np.random.default_rng(seed)
    acts = [str(a) for a in rng.choice(ZOO_ACTIVATIONS, 5)]
    c, k, m, h, w = (int(v) for v in rng.integers((1, 5, 2, 5, 5), (7, 21, 30, 10, 10)))
    f = int(rng.choice([1, 3, 5]))
    pad = tuple(int(v) for v in rng.integers(0, f // 2 + 1, 4))   # (top, left, bottom, right)
    return Net(f"cpu-conv{seed}", (c, h, w), (
        Conv("a", acts[0], out_channels=k, kernel=(f, f), stride=(int(rng.integers(1, 3)),) * 2, pad=pad),
        Conv("b", "none", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Add("add", acts[1], inputs=("b", "a")),
        Conv("dw", acts[2], out_channels=k, kernel=(3, 3), pad=(1, 1), groups=k),
        Conv("pw", acts[3], out_channels=m, kernel=(1, 1)),
        Conv("dw2", acts[4], out_channels=m, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=m),
        GlobalAvgPool("gap"),
        Dense("fc", acts[0], out_features=int(rng.integers(1, 40))))), int(rng.integers(1, 4))


def run(prepared, net, weights, x):
    try:
        result = check_prepared(prepared, x, oracle.forward(net, weights, x))
        assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
        return prepared.config
    finally:
        prepared.close()


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


def inputs(seed):
    net, batch = random_net(seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return net, batch, weights, x


@pytest.mark.parametrize("variant, seed, backend_class", [
    ("8,1,8", 0, VectorisedNet), ("8,2,4", 1, TiledNet), ("4,2,3", 2, VectorisedNet),
    ("16,1,4", 3, TiledNet), ("16,2,2", 4, VectorisedNet), ("4,1,1", 5, VectorisedNet)])
def test_every_variant_matches_the_oracle(runtime, variant, seed, backend_class):
    net, batch, weights, x = inputs(seed)
    config = run(backend_class(runtime, net, weights, batch, cpu_conv=variant, fold_depthwise="never",
                               fuse_blocks="never"), net, weights, x)
    vw, nv, rp = variant.split(",")
    for name in ("a", "pw"):
        assert config["layers"][name]["kernel"].startswith(f"vector conv {vw}x{nv} {rp} px")
    assert config["layers"]["fc"]["kernel"].startswith(f"vector dense {vw}x{nv} {rp} px")
    # the depthwise convs take the widest vector that divides their stored channels
    for name in ("dw", "dw2"):
        assert config["layers"][name]["kernel"].startswith("vector depthwise")
    assert config["residual_adds_fused"] == {"add": "into b's epilogue (adds a)"}


@pytest.mark.parametrize("variant", ["8,1,4", "16,1,3"])
def test_pools_and_subsamplings_run_as_the_vector_depthwise(runtime, variant):
    """LeNet's subsampling (each tap weighs coeff / taps) and max-pools (padding never wins), at
    windows 2x2 stride 2, 3x3 stride 2 padded, 2x2 stride 1; then a dense layer over the whole image."""
    net = Net("pools", (3, 16, 15), (
        Conv("c", "tanh", out_channels=6, kernel=(5, 5)),
        MaxPool("m", "none", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
        Subsample("s", "sigmoid", kernel=(2, 2), stride=(2, 2)),
        MaxPool("m2", "relu", kernel=(2, 2), stride=(1, 1)),
        Subsample("t", "none", kernel=(2, 2), stride=(1, 1)),
        Dense("fc", "relu", out_features=7)))   # reads a 6-channel image stored as 8 channels
    weights = init_weights(net, 10)
    x = np.random.default_rng(10).standard_normal((3,) + net.input_shape).astype(np.float32)
    config = run(VectorisedNet(runtime, net, weights, 3, cpu_conv=variant), net, weights, x)
    rp = variant.split(",")[2]
    for name, what in (("m", "maxpool"), ("s", "subsample"), ("m2", "maxpool"), ("t", "subsample")):
        # 6 channels stored as 8: a vector of 16 narrows to 8
        assert config["layers"][name]["kernel"].startswith(f"vector {what} 8x1 {rp} px")


def test_a_vector_depthwise_folds_into_the_1x1_after_it(runtime):
    net, batch, weights, x = inputs(6)
    config = run(VectorisedNet(runtime, net, weights, batch, cpu_conv="8,1,4", fold_depthwise="always"),
                 net, weights, x)
    assert config["layers"]["dw"]["kernel"].startswith("vector depthwise")
    assert "dw" in config["depthwise_fused"]


@pytest.mark.parametrize("vector_wins", [True, False])
def test_measured_keeps_the_faster(runtime, monkeypatch, vector_wins):
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    monkeypatch.setattr(cpu_conv, "fastest_ms",
                        lambda rt, forms: {f: float(f.startswith(("8x", "4x")) != vector_wins) + 0.1 * i
                                           for i, f in enumerate(forms)})
    net, batch, weights, x = inputs(7)
    config = run(VectorisedNet(runtime, net, weights, batch, winograd="never"), net, weights, x)
    record = config["cpu_conv"]
    assert set(record) == {"a", "b", "dw", "pw", "dw2", "fc"}   # (the pool has no vector kernel)
    for name, r in record.items():
        assert r["vector_width"] == 8 and max(r["rel_l2_against_float64"].values()) < cpu_conv.MAX_REL_L2
        assert r["chosen"].startswith(("8x", "4x")) == vector_wins, (name, r)
        assert config["layers"][name]["kernel"].startswith("vector") == vector_wins


def test_a_variant_that_fails_the_float64_check_is_never_chosen(runtime, monkeypatch):
    """With the tolerance at 0 every variant's rounding fails it: the other forms' choice
    runs, however fast the variants measured."""
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    monkeypatch.setattr(cpu_conv, "MAX_REL_L2", 0.0)
    monkeypatch.setattr(cpu_conv, "fastest_ms",
                        lambda rt, forms: {f: 0.0 if f.startswith(("8x", "4x")) else 1.0 for f in forms})
    net, batch, weights, x = inputs(8)
    config = run(VectorisedNet(runtime, net, weights, batch, winograd="never"), net, weights, x)
    for name, r in config["cpu_conv"].items():
        assert not r["chosen"].startswith(("8x", "4x")) and len(r["refused"]) >= 1, (name, r)
        assert not config["layers"][name]["kernel"].startswith("vector")


def test_not_offered_where_the_device_prefers_float4(runtime, monkeypatch):
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 4)
    net, batch, weights, x = inputs(9)
    config = run(VectorisedNet(runtime, net, weights, batch, winograd="never"), net, weights, x)
    assert "cpu_conv" not in config


@pytest.mark.parametrize("preferred, width", [(None, 4), (1, 4), (4, 4), (8, 8), (16, 16), (32, 16)])
def test_vector_width_from_the_device(preferred, width):
    assert vector_width({"preferred_vector_width_float": preferred}) == width


def test_variants_fit_the_channels():
    assert [v.label for v in cpu_conv.variants(8, 64, 49)] == ["8x2 4 px", "8x1 8 px"]
    assert [v.label for v in cpu_conv.variants(8, 40, 49)] == ["8x1 8 px"]   # 48 channels of 40 waste a fifth
    assert [v.label for v in cpu_conv.variants(8, 64, 5)] == ["8x2 4 px"]    # no taller than the pixels
    assert [v.label for v in cpu_conv.variants(16, 1000, 1)] == ["16x2 1 px", "16x1 1 px"]   # a GEMV
    assert [v.kw for v in cpu_conv.dw_variants(16, 24)] == [8, 8]           # 16 does not divide 24


@pytest.mark.parametrize("bad", ["sometimes", "8,2", "3,1,4", "8,0,4"])
def test_a_bad_mode_is_refused_in_one_line(runtime, bad):
    net, batch, weights, _ = inputs(0)
    with pytest.raises(ValueError, match="cpu_conv|variant"):
        VectorisedNet(runtime, net, weights, batch, cpu_conv=bad)


def test_a_vector_kernel_chosen_over_winograd_leaves_the_later_layers_their_gemm_scratch(runtime, monkeypatch):
    """Winograd's GEMM scratch is the net's, shared by the layers: the first 3x3 conv allocates it while its
    forms are measured; where a vector kernel then replaces that conv's Winograd form, the scratch stays for
    the next conv's GEMM form (it was freed with the first conv's form, and the second read freed memory)."""
    from backends.handwritten import winograd, winograd_gemm
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    # Winograd's GEMM form wins its measurement on both 3x3 convs; the vector kernel wins on 'a' alone
    monkeypatch.setattr(winograd, "fastest_ms", lambda rt, forms: {f: 0.0 if "GEMM" in f else 1.0 for f in forms})
    calls = []

    def vector_wins_on_a_alone(rt, forms):
        calls.append(list(forms))
        return {f: float(f.startswith(("8x", "4x")) != (len(calls) == 1)) for f in forms}
    monkeypatch.setattr(cpu_conv, "fastest_ms", vector_wins_on_a_alone)
    net = Net("two-3x3", (6, 9, 7), (
        Conv("a", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=8, kernel=(3, 3), pad=(1, 1)),
        GlobalAvgPool("gap")))
    weights = init_weights(net, 11)
    x = np.random.default_rng(11).standard_normal((2,) + net.input_shape).astype(np.float32)
    prepared = VectorisedNet(runtime, net, weights, 2)
    scratch = prepared._winograd_scratch
    kept = {id(b) for b in prepared.buffers}
    config = dict(prepared.config)
    run(prepared, net, weights, x)
    assert config["cpu_conv"]["a"]["chosen"].startswith(("8x", "4x"))
    assert "GEMM" in config["winograd"]["b"]["chosen"] and not config["cpu_conv"]["b"]["chosen"].startswith(("8x", "4x"))
    assert scratch is not None and all(id(b) in kept for b in scratch)


# The vector fold of a depthwise conv into the 1x1 after it (cpu_fold.py, kernels/cpu_conv.cl dw_pw_vec).

def fold_net(seed: int, stride: int, residual: bool) -> Net:
    """An inverted residual: stem 3x3 -> 1x1 expand -> depthwise 3x3 (stride) -> 1x1 project (-> add of the
    stem's output where `residual`, stride 1), channel counts drawn to miss the vector widths."""
    rng = np.random.default_rng(seed)
    c, s, e, k = (int(v) for v in rng.integers((1, 3, 9, 5), (5, 11, 30, 27)))
    act = str(rng.choice(ZOO_ACTIVATIONS))
    project = Conv("project", "none" if residual else act, out_channels=s if residual else k, kernel=(1, 1))
    return Net(f"fold{seed}", (c, int(rng.integers(5, 12)), int(rng.integers(5, 12))), (
        Conv("stem", "relu6", out_channels=s, kernel=(3, 3), pad=(1, 1)),
        Conv("expand", "relu6", out_channels=e, kernel=(1, 1)),
        Conv("dw", "relu6", out_channels=e, kernel=(3, 3), stride=(stride, stride), pad=(1, 1), groups=e),
        project,
        *((Add("add", act, inputs=("project", "stem")),) if residual else ()),
        GlobalAvgPool("gap")))


@pytest.mark.parametrize("variant, stride, residual, seed", [
    ("8,2,4", 1, True, 20), ("8,1,8", 2, False, 21), ("16,1,4", 1, False, 22), ("4,2,3", 2, False, 23),
    ("8,2,4", 2, False, 24), ("16,2,2", 1, True, 25)])
def test_the_vector_fold_matches_the_oracle(runtime, variant, stride, residual, seed):
    net = fold_net(seed, stride, residual)
    weights = init_weights(net, seed)
    batch = 1 + seed % 2
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    config = run(VectorisedNet(runtime, net, weights, batch, cpu_conv=variant), net, weights, x)
    vw, nv, rp = variant.split(",")
    assert config["depthwise_fused"]["dw"].startswith(f"into project's kernel (dw_pw_vec {vw}x{nv} {rp} px fold")
    if residual:
        assert config["residual_adds_fused"]["add"].startswith("into project's epilogue")


def small_mobilenet_v2() -> Net:
    """MobileNet-v2's shape at a tenth of its size: a 3x3 stride-2 stem, inverted residuals (expand 1x1,
    depthwise 3x3 at strides 1 and 2, linear project 1x1, the add where the shape stays) whose channels
    (6, 10, 12; expanded 36, 60, 72) are no multiples of 8 or 16, a 1x1, the average pool, a dense head."""
    layers, previous, channels = [Conv("stem", "relu6", out_channels=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1))], \
        "stem", 8
    for row, (t, c, n, s) in enumerate(((1, 6, 1, 1), (6, 10, 2, 2), (6, 12, 2, 1)), start=1):
        for i in range(1, n + 1):
            name, stride, hidden = f"b{row}_{i}", s if i == 1 else 1, channels * t
            if t != 1:
                layers.append(Conv(f"{name}_expand", "relu6", inputs=(previous,), out_channels=hidden, kernel=(1, 1)))
            layers += [Conv(f"{name}_dw", "relu6", inputs=(previous,) if t == 1 else (), out_channels=hidden,
                            kernel=(3, 3), stride=(stride, stride), pad=(1, 1), groups=hidden),
                       Conv(f"{name}_project", "none", out_channels=c, kernel=(1, 1))]
            if stride == 1 and channels == c:
                layers.append(Add(f"{name}_add", "none", inputs=(f"{name}_project", previous)))
            previous, channels = layers[-1].name, c
    layers += [Conv("head", "relu6", inputs=(previous,), out_channels=20, kernel=(1, 1)), GlobalAvgPool("gap"),
               Dense("fc", "none", out_features=10)]
    return Net("small-mobilenet-v2", (3, 22, 18), tuple(layers))


@pytest.mark.parametrize("fold_wins", [True, False])
@pytest.mark.parametrize("backend_class", [VectorisedNet, TiledNet])
def test_the_measured_fold_in_a_small_mobilenet_v2(runtime, monkeypatch, backend_class, fold_wins):
    """Every depthwise -> project pair gets the fold's variants, each checked against float64; the
    faster form runs (timings stubbed both ways, so the choice is known) and the net passes the check."""
    from backends.handwritten import blocks, cpu_fold
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    monkeypatch.setattr(cpu_fold, "fastest_ms",
                        lambda rt, forms: {f: float(("fold" in f) != fold_wins) + 0.01 * i for i, f in enumerate(forms)})
    # the block kernel, measured next against what the fold left, loses here (so the choice above stands)
    monkeypatch.setattr(blocks, "fastest_ms", lambda rt, forms: {"block": 1.0, "as it was": 0.0})
    net = small_mobilenet_v2()
    weights = init_weights(net, 30)
    x = np.random.default_rng(30).standard_normal((2,) + net.input_shape).astype(np.float32)
    config = run(backend_class(runtime, net, weights, 2), net, weights, x)
    pairs = {f"{b}_dw": f"{b}_project" for b in ("b1_1", "b2_1", "b2_2", "b3_1", "b3_2")}
    assert {dw: r["into"] for dw, r in config["cpu_fold"].items()} == pairs
    for dw, r in config["cpu_fold"].items():
        assert r["vector_width"] == 8 and max(r["rel_l2_against_float64"].values()) < cpu_conv.MAX_REL_L2, (dw, r)
        assert ("fold" in r["chosen"]) == fold_wins, (dw, r)
        assert ("dw_pw_vec" in config["depthwise_fused"].get(dw, "")) == fold_wins, (dw, config["depthwise_fused"])


def test_a_fold_that_fails_the_float64_check_is_never_chosen(runtime, monkeypatch):
    from backends.handwritten import cpu_fold
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    monkeypatch.setattr(cpu_conv, "MAX_REL_L2", 0.0)
    monkeypatch.setattr(cpu_fold, "fastest_ms", lambda rt, forms: {f: 0.0 if "fold" in f else 1.0 for f in forms})
    net = fold_net(31, 1, True)
    weights = init_weights(net, 31)
    x = np.random.default_rng(31).standard_normal((1,) + net.input_shape).astype(np.float32)
    config = run(VectorisedNet(runtime, net, weights, 1, winograd="never"), net, weights, x)
    record = config["cpu_fold"]["dw"]
    assert "fold" not in record["chosen"] and all("fold" in f for f in record["refused"]) and record["refused"]
    assert "dw_pw_vec" not in config["depthwise_fused"].get("dw", "")


@pytest.mark.parametrize("args", [dict(cpu_conv="never"), dict(fold_depthwise="always"), dict(fold_depthwise="never"),
                                  dict(pointwise="always")])
def test_no_vector_fold_where_cpu_conv_or_folding_says_not(runtime, monkeypatch, args):
    """cpu_conv "never" is the code before the vector kernels; fold_depthwise "always" forces dw_pw,
    "never" keeps the two kernels; pointwise "always" forces the 1x1's form, as it does against cpu_conv's."""
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", 8)
    net = fold_net(32, 2, False)
    weights = init_weights(net, 32)
    x = np.random.default_rng(32).standard_normal((1,) + net.input_shape).astype(np.float32)
    config = run(VectorisedNet(runtime, net, weights, 1, **args), net, weights, x)
    assert "cpu_fold" not in config
    assert "dw_pw_vec" not in str(config.get("depthwise_fused")) + str(config.get("depthwise_not_fused"))


def test_fold_variants_fit_the_buffer_and_the_channels():
    from backends.handwritten.cpu_fold import MAX_BUFFER, fold_variants
    # MobileNet-v2's first project (32 -> 16, 112 columns): every block in one work-item, or 2 splits
    assert [v.label for v in fold_variants(8, 32, 16, 112)] == ["8x2 4 px fold", "8x1 8 px fold", "8x1 8 px fold 2 splits"]
    # 960 -> 320 at 7 columns: 8 pixels' depthwise outputs would overflow the buffer; splits keep weights in L2
    found = fold_variants(8, 960, 320, 7)
    assert [(v.tile.rp, v.splits, v.kb) for v in found] == [(4, 1, 20), (4, 10, 2)]
    assert all(v.tile.rp * 960 * 4 <= MAX_BUFFER and v.kp >= 320 for v in found)
    # 10 output channels: the least wasteful tile (16 channels); 36 depthwise channels: vectors of 4 there
    assert [(v.label, v.dvw) for v in fold_variants(16, 36, 10, 9)] == [("16x1 8 px fold", 4)]


# The along-x form (conv_row_vec) for layers of fewer output channels than the vector width.

def along_x_net(c: int, h: int, w: int, k: int, f: int, stride: int, pad: tuple, vw: int) -> Net:
    """A conv of k < vw channels reading the image (the case), and where the form is not offered: a conv
    reading the image whose output an add reads, a conv of k channels further in (the add folds into its
    epilogue), a subsampling, a depthwise conv, a conv of vw channels, a max-pool and a dense layer."""
    return Net(f"along-x-{c}-{h}x{w}-{k}", (c, h, w), (
        Conv("a", "sigmoid", out_channels=k, kernel=(f, f), stride=(stride, stride), pad=pad),
        Conv("b", "none", out_channels=k, kernel=(f, f), stride=(stride, stride), pad=pad, inputs=("input",)),
        Conv("a2", "none", out_channels=k, kernel=(3, 3), pad=(1, 1), inputs=("a",)),
        Add("add", "tanh", inputs=("a2", "b")),
        Subsample("s", "relu", kernel=(2, 2), stride=(2, 2)),
        Conv("dw", "relu6", out_channels=k, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=k),
        Conv("wide", "silu", out_channels=vw, kernel=(1, 1)),
        MaxPool("m", "none", kernel=(2, 2), stride=(1, 1)),
        Dense("fc", "none", out_features=5)))


NOT_OFFERED = ("b", "a2", "s", "dw", "wide", "m", "fc")


@pytest.mark.parametrize("c, h, w, k, f, stride, pad, vw, batch, rows, backend_class", [
    (1, 32, 32, 6, 5, 1, (0, 0), 16, 2, 4, TiledNet),             # LeNet's C1 (28 columns: a clamped last block)
    (3, 21, 37, 5, 3, 2, (1, 0, 1, 2), 16, 3, 2, VectorisedNet),  # stride 2, asymmetric padding, 19 columns
    (2, 9, 13, 7, 5, 1, (2, 2), 8, 1, 1, VectorisedNet),          # 13 columns of vectors of 8
    (4, 12, 6, 3, 3, 1, (1, 1), 16, 2, 4, TiledNet)])             # a row narrower than the vector
def test_along_x_matches_the_oracle(runtime, monkeypatch, c, h, w, k, f, stride, pad, vw, batch, rows, backend_class):
    """Every along-x variant is checked against float64 where offered (and refused nowhere); the one of
    `rows` rows (where it fits, else the tallest that does) wins its timing and the net passes the check."""
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", vw)

    def along_x_wins(rt, forms):
        def ms(f):
            if not f.startswith("along x"):
                return 1.0
            ry = int(f.split()[-2])
            return 0.0 if ry == rows else 0.1 + abs(ry - rows) * 0.01
        return {f: ms(f) for f in forms}
    monkeypatch.setattr(cpu_conv, "fastest_ms", along_x_wins)
    net = along_x_net(c, h, w, k, f, stride, pad, vw)
    weights = init_weights(net, h * w + k)
    x = np.random.default_rng(h * w + k).standard_normal((batch,) + net.input_shape).astype(np.float32)
    config = run(backend_class(runtime, net, weights, batch, winograd="never"), net, weights, x)
    record = config["cpu_conv"]["a"]
    along = {f: e for f, e in record["rel_l2_against_float64"].items() if f.startswith("along x")}
    assert along and max(along.values()) < cpu_conv.MAX_REL_L2 and "refused" not in record, record
    assert record["chosen"] == f"along x {vw} px {rows} rows", record
    assert config["layers"]["a"]["kernel"].startswith(f"vector conv along x {vw} px"), config["layers"]["a"]
    for name in NOT_OFFERED:
        offered = config["cpu_conv"].get(name, {}).get("ms", {})
        assert not any(f.startswith("along x") for f in offered), (name, offered)
    assert "add" in config["residual_adds_fused"]   # into a2's epilogue, which the along-x kernel has not


def test_along_x_variants_fit_the_channels_and_rows():
    assert [v.label for v in cpu_conv.row_variants(16, 6, 28)] == ["along x 16 px 4 rows", "along x 16 px 2 rows",
                                                                  "along x 16 px 1 rows"]
    assert [v.ry for v in cpu_conv.row_variants(16, 6, 3)] == [2, 1]      # no taller than the output
    assert [v.ry for v in cpu_conv.row_variants(8, 6, 28)] == [2, 1]      # 24 accumulators: not on AVX2
    assert [v.ry for v in cpu_conv.row_variants(16, 15, 28)] == [1]
    assert cpu_conv.row_variants(16, 16, 28) == [] and cpu_conv.row_variants(8, 8, 28) == []   # lanes all busy
    assert cpu_conv.row_variants(4, 3, 28) == []                          # float4 is vectorised's


def test_no_along_x_form_where_it_cannot_run(runtime):
    """build_row refuses (so the form is never offered) a depthwise conv, as many channels as the vector, a
    max-pool and a dense layer."""
    net = Net("along-x-refused", (2, 10, 10), (
        Conv("d", "relu", out_channels=2, kernel=(3, 3), pad=(1, 1), groups=2),
        Conv("c", "relu", out_channels=16, kernel=(3, 3)),
        MaxPool("m", "none", kernel=(2, 2), stride=(2, 2)),
        Dense("fc", "none", out_features=3)))
    weights = init_weights(net, 40)
    prepared = VectorisedNet(runtime, net, weights, 1, cpu_conv="never")
    try:
        for i, name in enumerate(("d", "c", "m", "fc")):
            with pytest.raises(ValueError, match="no along-x form"):
                cpu_conv.build_row(prepared, i, layer_params(net, weights, i), cpu_conv.RowVariant(16, 1))
    finally:
        prepared.close()
