"""MobileNet-v2's blocks chained into one kernel each (backends/handwritten/
blocks.py, kernels/blocks.cl): which layers chain on the net itself, the
work-group rule under device limits, and on the device the kernel as planned
here and as on a GPU at random shapes the net does not have (channels not a
multiple of 4, stride 1 and 2, with and without the add, every activation,
batches), against the float64 oracle; the measured choice both ways, and a
block whose rows do not fit in local memory kept as it was, saying why."""
import numpy as np
import pytest

from backends.handwritten import blocks, vectorised
from backends.handwritten.blocks import chains, plan_block
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.opencl.workgroups import Limits
from compare import oracle
from compare.checking import check_prepared
from nets import ZOO_ACTIVATIONS, MOBILENET_V2, Add, Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import assert_borders_zero, backend_or_skip


def test_mobilenet_v2_chains_every_block_into_the_next_expand():
    net = MOBILENET_V2
    adds = {net.layer_index(f"{a.inputs[0]}"): net.layer_index(a.name) for a in net.layers if a.kind == "add"}
    found = chains(net, adds)
    assert len(found) == 17
    names = [(net.layers[c.d].name, net.layers[c.j].name, net.layers[c.e].name) for c in found]
    assert names[0] == ("bottleneck1_1_depthwise", "bottleneck1_1_project", "bottleneck2_1_expand")
    assert names[2] == ("bottleneck2_2_depthwise", "bottleneck2_2_add", "bottleneck3_1_expand")
    assert names[-1] == ("bottleneck7_1_depthwise", "bottleneck7_1_project", "conv2d_2")


@pytest.mark.parametrize("gpu", [True, False])
@pytest.mark.parametrize("lim", [Limits(1024, (1024, 1024, 64)), Limits(64, (64, 8, 8)), Limits(4096, (4096,) * 3)])
def test_plans_fit_the_device(gpu, lim):
    for pixels, xv, yv, zv in ((12544, 24, 6, 36), (49, 240, 80, 320), (3, 1, 1, 2)):
        plan = plan_block(pixels, xv, yv, zv, gpu, 132, lim, 48 * 1024)
        assert plan.tp * plan.g <= lim.max_group and plan.tp <= lim.max_items[0] and plan.g <= lim.max_items[1]
        assert plan.local_bytes == plan.tp * (xv + yv) * 16 <= 48 * 1024 and plan.global_size[0] >= pixels
        assert gpu or plan.tp <= blocks.CPU_PIXELS
    assert plan_block(10, 4000, 10, 10, True, 132, Limits(1024, (1024,) * 3), 48 * 1024) is None


def block(name, inp, c, hidden, out, stride, acts):
    """A block: expand (where hidden != c), depthwise, project, and the add where the shape stays."""
    layers = [Conv(f"{name}_expand", acts[0], inputs=(inp,), out_channels=hidden, kernel=(1, 1))] if hidden != c else []
    layers += [Conv(f"{name}_dw", acts[1], inputs=() if layers else (inp,), out_channels=hidden, kernel=(3, 3),
                    stride=(stride, stride), pad=(1, 1), groups=hidden),
               Conv(f"{name}_project", "none", out_channels=out, kernel=(1, 1))]
    if stride == 1 and c == out:
        layers.append(Add(f"{name}_add", acts[2], inputs=(f"{name}_project", inp)))
    return layers


def random_net(seed: int) -> tuple[Net, int]:
    rng = np.random.default_rng(seed)
    acts = [str(a) for a in rng.choice(ZOO_ACTIVATIONS, 9)]
    c, h, w = int(rng.integers(2, 9)), int(rng.integers(4, 12)), int(rng.integers(4, 12))
    hidden, out = int(rng.integers(3, 30)), int(rng.integers(2, 11))
    layers = [Conv("stem", acts[0], out_channels=c, kernel=(3, 3), pad=(1, 1))]
    layers += block("b1", "stem", c, c, c, 1, acts[1:4])                            # t = 1, with its add
    layers += block("b2", layers[-1].name, c, hidden, out, int(rng.integers(1, 3)), acts[3:6])
    layers += block("b3", layers[-1].name, out, hidden + 1, out, 1, acts[5:8])      # with its add
    layers += [Conv("head", acts[8], out_channels=int(rng.integers(3, 13)), kernel=(1, 1)), GlobalAvgPool("gap")]
    return Net(f"blocks{seed}", (3, h, w), tuple(layers)), int(rng.integers(1, 3))


def check(prepared, net, weights, x):
    result = check_prepared(prepared, x, oracle.forward(net, weights, x))
    assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
    assert_borders_zero(prepared)


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


@pytest.mark.parametrize("seed, gpu", [(0, True), (1, False)])
def test_chained_blocks_match_the_oracle(runtime, monkeypatch, seed, gpu):
    if gpu:   # planned as on a GPU of 16 compute units
        monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
        monkeypatch.setitem(runtime.info, "compute_units", 16)
    net, batch = random_net(seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = (TiledNet if seed % 2 else VectorisedNet)(runtime, net, weights, batch, winograd="never",
                                                          pointwise="never", fuse_blocks="always")
    try:
        check(prepared, net, weights, x)
        fused = prepared.config["blocks_fused"]
        assert set(fused) == {"b2_expand", "b3_expand", "head"}
        assert fused["b3_expand"].startswith("into b2_project's block kernel (b2_dw + b2_project + b3_expand")
        if prepared.rt.profiling_ok:   # named steps come from device events (rusticl has none)
            prepared.load_input(x)
            steps = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
            assert steps["b2_expand"] == [] and steps["b1_dw"] == [] and len(steps["b1_project"]) == 1
            assert steps["b1_project"][0].startswith("block depthwise")
    finally:
        prepared.close()


@pytest.mark.parametrize("block_wins", [True, False])
def test_measured_keeps_the_faster_form(runtime, monkeypatch, block_wins):
    monkeypatch.setattr(blocks, "fastest_ms", lambda rt, forms: {f: float((f == "block") != block_wins) for f in forms})
    net, batch = random_net(0)   # the kernels of the test above, built once
    weights = init_weights(net, 4)
    x = np.random.default_rng(4).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = VectorisedNet(runtime, net, weights, batch, winograd="never", pointwise="never")
    try:
        check(prepared, net, weights, x)
        assert len(prepared.config["blocks_fused"]) == (3 if block_wins else 0)
        assert len(prepared.config.get("blocks_not_fused", {})) == (0 if block_wins else 3)
    finally:
        prepared.close()


def test_never_and_too_little_local_memory_keep_the_blocks(runtime, monkeypatch):
    net, batch = random_net(0)
    weights = init_weights(net, 5)
    prepared = VectorisedNet(runtime, net, weights, batch, winograd="never", pointwise="never", fuse_blocks="never")
    try:
        assert "blocks_fused" not in prepared.config
    finally:
        prepared.close()
    prepared = VectorisedNet(runtime, net, weights, batch, fold_depthwise="never", winograd="never",
                             pointwise="never", fuse_blocks="always")
    try:   # a block kernel folds the depthwise: not where folding is off
        assert prepared.config["blocks_fused"] == {} and prepared.config["blocks_not_fused"]["head"] == (
            "its own kernel: folding turned off (fold_depthwise='never')")
    finally:
        prepared.close()
    monkeypatch.setitem(runtime.info, "local_mem_bytes", 16)
    prepared = VectorisedNet(runtime, net, weights, batch, winograd="never", pointwise="never", fuse_blocks="always")
    try:
        assert prepared.config["blocks_fused"] == {}
        assert prepared.config["blocks_not_fused"]["head"].endswith("B of local memory, the device has 16 B")
    finally:
        prepared.close()
