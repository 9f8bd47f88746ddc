"""The CLBlast backends on graph nets: ResNet-18 and MobileNet-v2 layer by
layer and end to end against the float64 oracle (random graphs of the new
kinds: tests/test_random_graphs.py), the compositions named in each layer's steps, and the problems
`compare tune` searches for them (the chains' keys unchanged)."""
import json
from pathlib import Path

import pytest

from backends.clblast import problems
from backends.clblast.conv_plan import ConvPlan
from compare import oracle
from compare.checking import check_prepared, compare_arrays
from nets import LENET, MOBILENET_V2, RESNET18, VGG16, VIT_TINY, Add, Conv, Dense, GlobalAvgPool, MaxPool, Net
from nets.weights import init_weights
from conftest import backend_or_skip
from run_checks import in_process
from test_random_graphs import random_input

CLBLAST_BACKENDS = ["clblast", "clblast-convgemm", "clblast-best"]
REPORTS = Path(__file__).resolve().parent.parent / "reports"


def _smaller(net: Net, size: int) -> Net:
    """The net's own layers on a smaller input: every composition of the full net, in seconds on PoCL."""
    return Net(f"{net.name}@{size}", (net.input_shape[0], size, size), net.layers)


@pytest.mark.parametrize("name", CLBLAST_BACKENDS)
@pytest.mark.parametrize("net, batch", [(_smaller(RESNET18, 64), 1), (_smaller(MOBILENET_V2, 32), 2)],
                         ids=["resnet18@64-batch1", "mobilenet-v2@32-batch2"])
def test_the_graph_nets_pass_layer_by_layer_and_end_to_end(name, net, batch):
    backend = backend_or_skip(name)
    weights = init_weights(net, 3)
    prepared = backend.prepare(net, weights, batch)
    try:
        for seed in (11, 12):   # fresh inputs: nothing left over from the last pass passes for an output
            x = random_input(net, batch, seed)
            check = check_prepared(prepared, x, oracle.forward(net, weights, x), layerwise=seed == 11)
            assert check.status == "PASS", [r for r in [check.end_to_end, *check.layers] if not r.passed]
    finally:
        prepared.close()


GRAPH = Net("graph", (4, 9, 8), (
    Conv("pad", "relu6", out_channels=8, kernel=(3, 3), pad=(1, 0, 2, 1)),       # asymmetric
    Conv("dw", "tanh", out_channels=8, kernel=(3, 3), pad=(1, 1), groups=8),      # depthwise
    Conv("pw", "none", out_channels=8, kernel=(1, 1)),                            # 1x1 stride 1
    Add("add", "relu", inputs=("pw", "pad")),                                     # a skip connection
    MaxPool("pool", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    Conv("s2", "none", out_channels=4, kernel=(1, 1), stride=(2, 2)),             # 1x1 stride 2
    GlobalAvgPool("gap"),
    Dense("fc", out_features=5)))


@pytest.mark.parametrize("name, batch, expect", [
    ("clblast", 2, {"pad": ["xCOPY", "pad (own kernel)", "xIM2COL", "xGEMMBATCHED", "relu6 (own kernel)"],
                    "dw": ["xCOPY", "xIM2COL", "xGEMMBATCHED", "tanh (own kernel)"],
                    "pw": ["xCOPY", "xGEMMBATCHED"],
                    "add": ["xCOPY", "xAXPY", "relu (own kernel)"],
                    "pool": ["maxpool (own kernel)"],
                    "s2": ["xCOPY", "xIM2COL", "xGEMMBATCHED"],
                    "gap": ["fill 0", "xGEMV"],
                    "fc": ["xCOPY", "xGEMM"]}),
    ("clblast", 1, {"pw": ["xCOPY", "xGEMM"], "dw": ["xCOPY", "xIM2COL", "xGEMMBATCHED", "tanh (own kernel)"]}),
    ("clblast-convgemm", 2, {"pad": ["pad (own kernel)", "xCONVGEMM", "bias+relu6 (own kernel)"],
                             "dw": ["xCONVGEMM", "bias+tanh (own kernel)"],
                             "pw": ["xCONVGEMM", "bias (own kernel)"],
                             "add": ["xCOPY", "xAXPY", "relu (own kernel)"]}),
])
def test_the_steps_name_each_composition(name, batch, expect):
    weights = init_weights(GRAPH, 5)
    x = random_input(GRAPH, batch, batch)
    prepared = in_process(name).prepare(GRAPH, weights, batch)
    try:
        prepared.load_input(x)
        steps = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
        for layer, names in expect.items():
            assert steps[layer] == names, layer
        assert compare_arrays(prepared.fetch_output(), oracle.forward(GRAPH, weights, x)[-1]).passed
        if name == "clblast-convgemm":   # xCONVGEMM has no groups: one call per image and group
            assert prepared.config["layers"]["dw"].startswith(f"xCONVGEMM x {batch * 8} (one per image and group)")
    finally:
        prepared.close()


def test_clblast_best_times_the_graph_compositions_and_keeps_the_fastest():
    from test_clblast import _best
    config, y, ref = _best(GRAPH, 2)
    assert compare_arrays(y, ref).passed
    timed = config["candidates_ms"]
    assert set(timed["dw"]) == {"im2col+gemm-direct", "im2col+gemm-indirect", "im2col+gemm-batched-direct",
                                "im2col+gemm-batched-indirect", "convgemm"}
    assert set(timed["pw"]) == {"gemm-direct", "gemm-indirect", "convgemm"}     # no im2col for a 1x1
    assert set(timed["add"]) == {"copy+axpy", "fused-add"}
    assert set(timed["gap"]) == {"gemv-ones", "avgpool-kernel"}
    for layer, candidates in timed.items():
        numbers = {k: v for k, v in candidates.items() if not isinstance(v, str)}
        # the least time, kept rounded to 0.1 us: two compositions that round alike tie, either may be chosen
        assert numbers[config["layers"][layer].split(":")[0]] == min(numbers.values()), (layer, candidates)


_ONE_LAYER = {   # a net whose one layer has the composition: the others' layers would have none to run
    "conv": Conv("dw", "relu6", out_channels=4, kernel=(3, 3), stride=(2, 1), pad=(1, 0, 2, 1), groups=4),
    "pointwise": Conv("pw", "tanh", out_channels=6, kernel=(1, 1), groups=2),
    "add": Add("add", "relu", inputs=("input", "input")),
    "gap": GlobalAvgPool("gap", "relu6"),
}


@pytest.mark.parametrize("only, layer", [
    ("im2col+gemm-batched-direct", "conv"), ("im2col+gemm-indirect", "conv"), ("convgemm", "conv"),
    ("gemm-direct", "pointwise"), ("gemm-batched-indirect", "pointwise"), ("copy+axpy", "add"),
    ("fused-add", "add"), ("gemv-ones", "gap"), ("avgpool-kernel", "gap")])
def test_clblast_best_every_graph_composition_is_right(only, layer):
    from test_clblast import _best
    net = Net(only, (4, 7, 6), (_ONE_LAYER[layer],))
    config, y, ref = _best(net, 2, only=only)
    assert compare_arrays(y, ref).passed
    assert list(config["layers"].values())[0].startswith(only + ":")


def test_the_conv_plan_splits_groups_and_pads_asymmetric_padding_explicitly():
    plan = ConvPlan.of(2, (6, 5, 5), (4, 5, 5), (3, 3), (1, 1), (1, 0, 2, 1), groups=2)
    assert plan.explicit_pad == (1, 0, 2, 1) and plan.pad == (0, 0) and (plan.height, plan.width) == (8, 6)
    assert (plan.kg, plan.cg, plan.ckk, plan.gemms) == (2, 3, 27, 4)
    a, b, c = plan.offsets()
    assert a == [0, 54, 0, 54]                          # group g's filters, the same for each image
    assert b == [i * 27 * 25 for i in range(4)] and c == [i * 2 * 25 for i in range(4)]
    assert ConvPlan.of(1, (8, 4, 4), (8, 4, 4), (1, 1), (1, 1), (0, 0)).pointwise
    assert not ConvPlan.of(1, (8, 4, 4), (8, 2, 2), (1, 1), (2, 2), (0, 0)).pointwise   # a strided copy: im2col


def test_the_graph_nets_pose_their_grouped_gemms_and_pooling_gemv():
    found = {p.key: layers for p, layers in problems.net_problems(MOBILENET_V2, 1).items()}
    # bottleneck2_1's depthwise: 96 groups of one 3x3 filter each, 56x56 outputs
    assert found["gemm 1x3136x9 batch 96"] == ["bottleneck2_1_depthwise"]
    assert found["convgemm 1x112x112 k3x3 p1x1 s2x2 out 1 batch 1"] == ["bottleneck2_1_depthwise"]
    assert "gemm 24x3136x96" in found                   # the 1x1 projection: a plain GEMM
    assert found["gemv 1280x49"] == ["avgpool"]         # the global average pool as a GEMV
    resnet = {p.key for p in problems.net_problems(RESNET18, 1)}
    assert "gemm 128x784x64" in resnet and "gemv 512x49" in resnet   # conv3_1_proj: 1x1 stride 2
    asym = Net("a", (2, 6, 6), (Conv("c", out_channels=3, kernel=(3, 3), pad=(1, 0, 2, 1)),))
    assert {p.key for p in problems.net_problems(asym, 1)} == {   # xCONVGEMM reads the padded input, pad 0
        "gemm 3x35x18", "convgemm 2x9x7 k3x3 p0x0 s1x1 out 3 batch 1"}


def test_a_depthwise_convgemm_is_called_once_per_image_and_group_a_pass():
    calls, posed = problems.net_calls(MOBILENET_V2, 2), problems.net_problems(MOBILENET_V2, 2)
    keyed = {p.key: n for p, n in calls.items()}
    # bottleneck2_1's depthwise, 96 groups: its GEMMs are one batched call, its xCONVGEMM 2 x 96 calls
    assert keyed["gemm 1x3136x9 batch 192"] == 1
    assert keyed["convgemm 1x112x112 k3x3 p1x1 s2x2 out 1 batch 1"] == 2 * 96
    assert keyed["gemm 24x3136x96 batch 2"] == 1 and keyed["convgemm 96x56x56 k1x1 p0x0 s1x1 out 24 batch 2"] == 1
    assert list(calls) == list(posed)
    # summed over the layers posing each problem: a grouped conv's xCONVGEMM counts batch x groups
    layers = {layer.name: layer for layer in MOBILENET_V2.layers}
    for p, n in calls.items():
        groups = [getattr(layers[name], "groups", 1) if p.routine == problems.CONVGEMM else 1 for name in posed[p]]
        assert n == sum(1 if g == 1 else 2 * g for g in groups), p.key


@pytest.mark.parametrize("name", ["clblast", "clblast-convgemm"])
def test_the_calls_counted_per_problem_are_those_a_pass_makes(name, monkeypatch):
    """One pass of GRAPH (a depthwise conv among others) at batch 2, every CLBlast routine call caught
    and named by its problem: as many of each as net_calls says."""
    backend_or_skip(name)
    from backends.clblast import library
    batch, made = 2, {}
    weights = init_weights(GRAPH, 5)
    prepared = in_process(name).prepare(GRAPH, weights, batch)

    def catch(routine, problem_of):
        owner = library if routine == "convgemm" else library.pyclblast   # the backends look both up per call
        real = getattr(owner, routine)

        def caught(*args, **kwargs):
            p = problem_of(*args, **kwargs)
            made[p] = made.get(p, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, routine, caught)
    catch("gemm", lambda q, m, n, k, *_, **__: problems.gemm(m, n, k))
    catch("gemmBatched", lambda q, m, n, k, a, b, c, alphas, *_, **__: problems.gemm(m, n, k, len(alphas)))
    catch("gemv", lambda q, m, n, *_, a_transp=False, **__: problems.gemv(n, m, True) if a_transp
          else problems.gemv(m, n, False))
    catch("convgemm", lambda q, channels, height, width, kernel, pad, stride, num_kernels, batch, **_:
          problems.convgemm(batch, (channels, height, width), num_kernels, kernel, pad, stride))
    try:
        prepared.load_input(random_input(GRAPH, batch, 1))
        prepared.run()
    finally:
        prepared.close()
    # each backend makes one composition's calls: the convs' GEMMs, or their xCONVGEMMs
    unused = problems.GEMM if name == "clblast-convgemm" else problems.CONVGEMM
    convs = [i for i, layer in enumerate(GRAPH.layers) if layer.kind == "conv"]
    skip = {p for i in convs for p in problems.layer_problems(GRAPH, batch, i) if p.routine == unused}
    want = {p: n for p, n in problems.net_calls(GRAPH, batch).items() if p not in skip}
    assert made == want
    gemm, convgemm = problems.layer_problems(GRAPH, batch, 1)   # dw: 8 groups
    if name == "clblast-convgemm":
        assert made[convgemm] == batch * 8
    else:
        assert made[gemm] == 1


def test_the_nets_problem_keys_are_those_of_the_tuning_files_in_reports():
    folders = list(REPORTS.glob("*/tuning/clblast-tuning/*"))
    assert folders, "the tuning files in reports/ are gone"
    for folder in folders:
        keys = set()
        for f in folder.glob("*.json"):
            data = json.loads(f.read_text())
            if "problem" in data:   # a problem's record: its stored key is the one computed today
                assert problems.Problem.from_json(data["problem"]).key == data["key"], f
                keys.add(data["key"])
        posed = {p.key for net, batch in ((VGG16, 1), (LENET, 100), (RESNET18, 1), (MOBILENET_V2, 1), (VIT_TINY, 1))
                 for p in problems.net_problems(net, batch)}
        # and `compare tune --as-tuner`'s: VGG-16's batch-1 GEMMs as CLBlast's xgemm tuner runs them
        posed |= {problems.xgemm_alone(p).key for p in problems.net_problems(VGG16, 1)
                  if p.routine == problems.GEMM and p.sizes[3] == 1}
        assert keys and keys <= posed, (folder, keys - posed)   # each file is still found by the net it tuned
