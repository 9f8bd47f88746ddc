"""`fused`'s own parts: the local memory a net needs worked out by hand, the
refusal where it does not fit, and what its timings say they are.  The
layer and net suites check it against the oracle with every other backend."""
import numpy as np
import pytest

from backends.handwritten.fused_source import local_floats, net_source, plan
from backends.opencl.runtime import get_runtime
from backends.opencl.workgroups import limits
from compare import oracle
from compare.checking import compare_arrays
from nets.errors import Unsupported
from conftest import backend_or_skip
from nets import LENET, VGG16, VIT_TINY, Add, Attention, Conv, Dense, LayerNorm, MaxPool, Net
from nets.weights import init_weights, make_input


def test_lenet_needs_the_two_largest_outputs_side_by_side():
    # each output lives from its layer to the next: c1's 4704 floats beside s2's 1176 is the most at once;
    # the input comes from global memory, f6's output goes there
    assert local_floats(LENET) == 4704 + 1176
    places, _ = plan(LENET)
    assert places[("out", 0)] == 0 and places[("out", 1)] == 4704 and places[("out", 2)] == 0   # c3 takes c1's place
    assert local_floats(VGG16) == 2 * 64 * 224 * 224   # conv1_1's and conv1_2's outputs: 24.5 MiB
    source, names = net_source(LENET)
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE)") == len(LENET.layers) - 1
    assert names == ["c1.weight", "c1.bias", "s2.coeff", "s2.bias", "c3.weight", "c3.bias", "s4.coeff", "s4.bias", "f5.weight",
                     "f5.bias", "f6.weight", "f6.bias"]


def test_a_device_with_too_little_local_memory_refuses_it(monkeypatch):
    backend = backend_or_skip("fused")
    monkeypatch.setitem(get_runtime().info, "local_mem_bytes", 16 * 1024)
    with pytest.raises(Unsupported, match=r"one image of lenet needs 23\.0 KiB of local memory for its "
                                          r"activations, more than the 16\.0 KiB of"):
        backend.prepare(LENET, init_weights(LENET, 0), 2)


def test_one_kernel_end_to_end_and_each_layer_alone_per_layer():
    backend = backend_or_skip("fused")
    net = Net("t", (2, 9, 7), (Conv("a", "sigmoid", out_channels=3, kernel=(3, 3), stride=(2, 1), pad=(1, 2)),
                               MaxPool("b", kernel=(3, 3), stride=(1, 2)), Dense("c", "relu", out_features=5)))
    weights = init_weights(net, 4)
    x = make_input(net, 3, 4)
    prepared = backend.prepare(net, weights, 3)
    try:
        assert "one fused kernel" in prepared.config["per_layer"]
        assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
        prepared.load_input(x)
        timings = prepared.run_timed()
        assert [s.name for t in timings for s in t.steps] == ["conv+sigmoid alone", "maxpool alone",
                                                              "dense+relu alone"]
        assert np.array_equal(prepared.fetch_output(), prepared.forward(x))   # both paths: the same numbers
    finally:
        prepared.close()


def test_a_residual_branch_keeps_its_place_until_the_add_reads_it():
    # b's output is read by the add two layers on, so c cannot take its place; the layer norm's scratch is its own
    net = Net("branch", (4, 3, 3), (Conv("a", "relu", out_channels=4, kernel=(1, 1)),
                                    Conv("b", out_channels=4, kernel=(3, 3), pad=(1, 1)),
                                    LayerNorm("c"), Add("d", inputs=("c", "b")), Dense("e", out_features=2)))
    places, floats = plan(net)
    held = {key: (at, at + 36) for key, at in places.items() if key[0] == "out"}
    held[("scratch", 2)] = (places[("scratch", 2)], places[("scratch", 2)] + 18)
    for a, b in [(("out", 1), ("out", 2)), (("out", 1), ("scratch", 2)), (("out", 2), ("scratch", 2)),
                 (("out", 1), ("out", 3)), (("out", 2), ("out", 3))]:   # live at once: apart
        (a0, a1), (b0, b1) = held[a], held[b]
        assert a1 <= b0 or b1 <= a0, (a, b)
    assert floats == max(end for _, end in held.values())
    backend = backend_or_skip("fused")
    weights, x = init_weights(net, 2), make_input(net, 3, 2)
    prepared = backend.prepare(net, weights, 3)
    try:
        ref = oracle.forward(net, weights, x)
        assert compare_arrays(prepared.forward(x), ref[-1]).passed
        for got, want in zip(prepared.layer_outputs(x), ref):   # each layer alone, the add with two inputs
            assert compare_arrays(got, want).passed
    finally:
        prepared.close()


def test_vit_tiny_is_one_kernel_a_pass():
    backend = backend_or_skip("fused")
    weights = init_weights(VIT_TINY, 5)
    x = np.random.default_rng(6).standard_normal((2,) + VIT_TINY.input_shape).astype(np.float32)
    prepared = backend.prepare(VIT_TINY, weights, 2)
    try:
        assert prepared.launches(x).kernels == 1
        lsz = prepared.whole.local[0]
        said = prepared.config["work_group"]
        assert said.startswith(f"{lsz} work-items")
        if limits(prepared.rt, prepared.whole.kernel).max_group >= 1024:   # each size tried, the fastest kept
            assert all(f"{n} work-items: " in said for n in (256, 512, 1024)), said
        assert "conv channels in blocks: " in said   # and each with its convs' channels in blocks
        assert compare_arrays(prepared.forward(x), oracle.forward(VIT_TINY, weights, x)[-1]).passed
    finally:
        prepared.close()


def test_a_windowed_attention_is_refused_in_one_line():
    net = Net("win", (6, 4, 4), (Attention("a", heads=1, window=(2, 2)),))
    why = backend_or_skip("fused").unsupported(net)
    assert why == "layer a (attention): fused has no code for windowed, shifted, grid, biased or cosine attention " \
                  "(only the whole map's)"


BLOCKS = {   # a net whose convs make blocks of 3 and 4 channels, padded, strided, past the group's work-items
    "lenet": LENET,
    "padded": Net("padded", (3, 24, 24), (Conv("a", "relu", out_channels=12, kernel=(3, 3), pad=(1, 1)),
                                          Conv("b", "tanh", out_channels=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
                                          Conv("c", "none", out_channels=6, kernel=(1, 1)))),
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
@pytest.mark.parametrize("batch", [1, 3])
def test_convs_in_channel_blocks_compute_what_the_oracle_does(name, batch, monkeypatch):
    """Every form prepare may time made blocked, so the pass is one of them whichever is fastest here."""
    from backends.handwritten import fused
    backend = backend_or_skip("fused")
    net = BLOCKS[name]
    blocked, _ = net_source(net, blocked=True)
    assert "acc1" in blocked and blocked != net_source(net)[0]   # some conv took a block
    monkeypatch.setattr(fused, "net_source", lambda n, blocked=False: net_source(n, blocked=True))
    weights = init_weights(net, batch)
    prepared = backend.prepare(net, weights, batch)
    try:
        for seed in range(2):
            x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
            assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
    finally:
        prepared.close()


def test_a_block_divides_the_channels_and_leaves_the_group_work():
    from backends.handwritten.fused_source import channel_block
    assert [channel_block(layer, LENET.out_shape(i)) for i, layer in enumerate(LENET.layers)
            if layer.kind == "conv"] == [3, 4]   # c1: 6 channels of 28x28; c3: 16 of 10x10
    assert channel_block(Conv("k", out_channels=8, kernel=(1, 1)), (8, 5, 5)) == 1   # 2 x 25 items: too few
    assert channel_block(Conv("k", out_channels=7, kernel=(1, 1)), (7, 32, 32)) == 1   # no block divides 7


def _driver_saying_256(monkeypatch):
    """As NVIDIA's driver: every kernel's WORK_GROUP_SIZE 256, and a register cap to build with (here a define
    PoCL ignores), so that `fused` tries 512 and 1024 work-items past what the kernel says."""
    from backends.handwritten import fused
    real = fused._build
    monkeypatch.setattr(fused, "register_cap", lambda device, items: (f"-DCAPPED_FOR={items}",))
    monkeypatch.setattr(fused, "_build", lambda rt, source, name, most=256, options=(): real(rt, source, name,
                                                                                            min(most, 256), options))
    return fused


def test_a_group_past_the_kernels_word_is_checked_then_timed(monkeypatch):
    backend = backend_or_skip("fused")
    _driver_saying_256(monkeypatch)
    weights = init_weights(LENET, 3)
    prepared = backend.prepare(LENET, weights, 3)
    try:
        said = prepared.config["work_group"]
        assert "1024 work-items, -DCAPPED_FOR=1024 (past the kernel's WORK_GROUP_SIZE): " in said, said
        x = make_input(LENET, 3, 4)
        assert compare_arrays(prepared.forward(x), oracle.forward(LENET, weights, x)[-1]).passed
    finally:
        prepared.close()


def test_a_group_past_the_kernels_word_that_computes_otherwise_is_not_timed(monkeypatch):
    backend = backend_or_skip("fused")
    fused = _driver_saying_256(monkeypatch)
    monkeypatch.setattr(fused, "rel_l2", lambda got, want: 0.5)
    prepared = backend.prepare(LENET, init_weights(LENET, 3), 2)
    try:
        said = prepared.config["work_group"]
        assert "not timed: 512 work-items, -DCAPPED_FOR=512 (past the kernel's WORK_GROUP_SIZE) (its output was " \
               "0.5 from the first form's)" in said, said
        assert "(past the kernel's WORK_GROUP_SIZE): " not in said   # none of them among the timed
    finally:
        prepared.close()
