"""Run one OpenCL backend on a shrunk LeNet-5 (batch 2) and a shrunk VGG-like net
(`vectorised-tiled` also with its GPU plans, a split sum included), and a
backend that runs graphs on a shrunk ResNet/MobileNet-like graph (every
graph kernel: depthwise, grouped, padded max-pool, an add folded into its
conv and one of its own, adds through borders wider than their own, global
average pool; `vectorised`'s depthwise folded into the 1x1 after it, with
and without the residual add, as planned here and as planned on a GPU;
the 3x3 stride-1 convs of `vectorised` and `vectorised-tiled` as each
Winograd form (one kernel, and the tile products as a batched GEMM) and
the 1x1s as the blocked GEMM, planned here and as on a GPU, the GEMM's sum in parts and a max pool in its output
transform; MobileNet-v2-like blocks chained into one kernel each;
the kernels shaped for a CPU's vector width, a depthwise folded into the 1x1 after it among them; a pre-norm
block's layernorms folded into the 1x1s after them; the head, global average pool and dense, as one kernel in its
float4 and vector forms)
under whatever OpenCL platform is present; tests/test_oclgrind.py runs this
file under Oclgrind, which then is the only platform.  Exit 1 if an output
disagrees with the float64 oracle."""
import sys
import time

import numpy as np

import backends
from backends.clblast.best import ClblastBestBackend, ClblastBestInProcess
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights, make_input
from nets import Add, Conv, Dense, Feature, GlobalAvgPool, LayerNorm, MaxPool, Net, Subsample

# LeNet-5's layers (5x5 convs, subsampling, dense) at a tenth of its work per image: the simulator's time
# goes on executing, and LeNet-5 itself took 15-20 s a run there (batch 2), most of the test's time
SHRUNK_LENET = Net("shrunk-lenet", (1, 20, 20), (
    Conv("c1", "sigmoid", out_channels=4, kernel=(5, 5)),
    Subsample("s2", "sigmoid", kernel=(2, 2), stride=(2, 2)),
    Conv("c3", "sigmoid", out_channels=7, kernel=(5, 5)),
    Subsample("s4", "sigmoid", kernel=(2, 2), stride=(2, 2)),
    Dense("f5", "sigmoid", out_features=9),
    Dense("f6", "sigmoid", out_features=6),
))


# VGG's layer types at small, odd sizes, channels not a multiple of 4
SHRUNK_VGG = Net("shrunk-vgg", (3, 13, 11), (
    Conv("conv1", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
    Conv("conv2", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
    MaxPool("mp1"),
    Conv("conv3", "relu", out_channels=7, kernel=(3, 3), pad=(1, 1)),
    MaxPool("mp2"),
    Dense("fc1", "relu", out_features=9),
    Dense("fc2", "none", out_features=5),
))


# the graph nets' kinds and options at small, odd sizes
SHRUNK_GRAPH = Net("shrunk-graph", (3, 11, 9), (
    Conv("conv1", "relu", out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 0, 1, 1)),
    MaxPool("pool", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    Conv("expand", "relu6", out_channels=10, kernel=(3, 3), pad=(1, 1)),   # pads: the add reads pool through that border
    Conv("depthwise", "relu6", out_channels=10, kernel=(3, 3), pad=(1, 1), groups=10),
    Conv("project", "none", out_channels=6, kernel=(1, 1)),
    Add("add", "relu", inputs=("project", "pool")),
    Conv("proj", "none", out_channels=6, kernel=(1, 1), stride=(2, 2)),
    Conv("grouped", "tanh", inputs=("add",), out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=2),
    # its last input has an activation of its own, so no conv folds it: the add kernel runs too
    Add("add2", "none", inputs=("grouped", "proj")),
    Conv("depthwise2", "sigmoid", out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=6),
    Conv("project2", "relu", out_channels=7, kernel=(1, 1)),
    GlobalAvgPool("gap"),
    Dense("fc", "none", out_features=5),
))


# depthwise -> 1x1 pairs that `vectorised` folds, as the net's first layer and with the add folded too,
# wide enough outputs that a GPU plan splits them over work-groups (gpu_fold)
SHRUNK_DW_PW = Net("shrunk-dw-pw", (10, 5, 5), (
    Conv("dw", "relu6", out_channels=10, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=10),
    Conv("pw", "none", out_channels=38, kernel=(1, 1)),
    Conv("dw2", "tanh", out_channels=38, kernel=(3, 3), pad=(1, 1), groups=38),
    Conv("pw2", "none", out_channels=38, kernel=(1, 1)),
    Add("add", "relu", inputs=("pw2", "pw")),
    GlobalAvgPool("gap"),
))


# Winograd's GPU plans (kernels/winograd.cl): 20 input channels, so the sum goes in chunks, each one's
# patches through local memory; a residual add in the second conv's epilogue; then 1x1 stride-1 convs
# as the blocked GEMM (backends/handwritten/pointwise.py), channels and pixels not a multiple of its
# blocks, one with an add in its epilogue
WINOGRAD_GPU = Net("winograd-gpu", (20, 5, 6), (
    Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
    Conv("b", "none", out_channels=6, kernel=(3, 3), pad=(1, 0, 1, 2)),
    Add("add", "relu", inputs=("b", "a")),
    Conv("c", "none", out_channels=6, kernel=(1, 1)),
    Add("add2", "sigmoid", inputs=("c", "add")),
    Conv("d", "relu6", out_channels=9, kernel=(1, 1)),
    GlobalAvgPool("gap"),
))

# the GEMM form's sum over 32 input channels in 2 parts (winograd_gemm.py, as planned on a GPU, parts of 16
# channels allowed: its second plan here), which the output transform adds up while it does the 2x2 max pool
# after the conv (pool_fold.py)
SPLIT_POOL = Net("split-pool", (4, 5, 6), (
    Conv("first", "relu", out_channels=32, kernel=(1, 1)),
    Conv("a", "relu", out_channels=7, kernel=(3, 3), pad=(1, 1)),
    MaxPool("pool"),
    GlobalAvgPool("gap"),
))


# a Winograd GEMM output transform doing the next conv's input transform (transform_chain.py): a feeds b, whose
# output transform does the pool; blocks of one tile, so a block's ring lies inside the image and outside it
CHAINED = Net("chained", (3, 6, 5), (
    Conv("first", "relu", out_channels=3, kernel=(3, 3), pad=(1, 1)),
    Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
    Conv("b", "hardswish", out_channels=5, kernel=(3, 3), pad=(1, 1)),
    MaxPool("pool"),
    GlobalAvgPool("gap"),
))

# MobileNet-v2's blocks chained (backends/handwritten/blocks.py): each depthwise, its project, the add
# where there is one, and the next expand (the last: a head 1x1) as one kernel; channels not a multiple of 4
SHRUNK_BLOCKS = Net("shrunk-blocks", (3, 9, 7), (
    Conv("stem", "relu6", out_channels=6, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    Conv("b1_dw", "relu6", out_channels=6, kernel=(3, 3), pad=(1, 1), groups=6),
    Conv("b1_project", "none", out_channels=6, kernel=(1, 1)),
    Add("b1_add", "none", inputs=("b1_project", "stem")),
    Conv("b2_expand", "relu6", out_channels=15, kernel=(1, 1)),
    Conv("b2_dw", "sigmoid", out_channels=15, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=15),
    Conv("b2_project", "none", out_channels=7, kernel=(1, 1)),
    Conv("head", "tanh", out_channels=10, kernel=(1, 1)),
    GlobalAvgPool("gap"),
))


# a pre-norm transformer block's layernorms folded into the 1x1 after each (layernorm_fused.py): one at
# the net's input, channels not a multiple of 4, tokens not a multiple of the kernel's 4 pixels
SHRUNK_PRENORM = Net("shrunk-prenorm", (7, 5, 1), (
    LayerNorm("ln_1", eps=1e-6),
    Conv("qkv", "none", out_channels=9, kernel=(1, 1)),
    LayerNorm("ln_2"),
    Conv("fc1", "gelu", out_channels=13, kernel=(1, 1)),
    Conv("fc2", "none", out_channels=9, kernel=(1, 1)),
    Add("add", "none", inputs=("fc2", "qkv")),
))


def layernorms(backend, gpu: bool = False):
    """`backend`'s net with every layernorm that a 1x1 alone reads folded into it (unmeasured against
    the two kernels), planned as on a GPU where `gpu`, else as on a CPU (Oclgrind's device says it is a
    GPU): the centred pixels copied to private memory first."""
    from backends.handwritten import vectorised

    def prepare(net, weights, batch):
        saved = vectorised.device_class
        vectorised.device_class = lambda _: "gpu" if gpu else "cpu"
        try:
            prepared = type(backend).net_class(backend.runtime, net, weights, batch, fuse_layernorm="always")
        finally:
            vectorised.device_class = saved
        assert len(prepared.config["layernorm_fused"]) == 2, prepared.config
        return prepared
    return prepare


class UntimedBestInProcess(ClblastBestInProcess):
    repeats = 0   # every candidate built and run once, the first kept: under the simulator times mean nothing


class UntimedBest(ClblastBestBackend):
    inner = "oclgrind_net:UntimedBestInProcess"   # this file is on the child's path: the script's folder


def gpu_plans(backend, net, weights, batch):
    """`vectorised-tiled` as it plans on a GPU (8x8 blocks, a split sum), whatever the device."""
    from backends.handwritten.tiled import TiledNet
    from backends.handwritten.tiled_plan import TILES
    # the fold never: the depthwise kernel and the tiled 1x1 run as they do where two kernels measure faster
    return TiledNet(backend.runtime, net, weights, batch, tiles=TILES[2:3], ksplit=3, fold_depthwise="never",
                    winograd="never", pointwise="never")


def gpu_fold(backend, net, weights, batch):
    """`vectorised` with its depthwise fold planned as on a GPU of 16 compute units (a pixel a
    work-group, the output channels split over work-groups that each redo the depthwise), whatever the device."""
    from backends.handwritten import vectorised
    info, saved = backend.runtime.info, (backend.runtime.info["compute_units"], vectorised.device_class)
    info["compute_units"], vectorised.device_class = 16, (lambda _: "gpu")
    try:
        prepared = vectorised.VectorisedNet(backend.runtime, net, weights, batch, fold_depthwise="always")
    finally:
        info["compute_units"], vectorised.device_class = saved
    assert all("2 channel splits" in text for text in prepared.config["depthwise_fused"].values()), prepared.config
    return prepared


def winograd(backend, form: str, gpu: bool = False, cpu: bool = False, **options):
    """`backend`'s net with every 3x3 stride-1 conv as Winograd `form` (winograd.py: "F2", "F4", "F2:1"...)
    and every 1x1 stride-1 conv as the blocked GEMM (pointwise.py), planned as on a GPU of 16 compute units
    where `gpu`, as on a CPU where `cpu` (Oclgrind's device says it is a GPU), unmeasured: under the
    simulator times mean nothing.  `options`: the net's other arguments (fuse_head)."""
    from backends.handwritten import vectorised

    def prepare(net, weights, batch):
        info, saved = backend.runtime.info, (backend.runtime.info["compute_units"], vectorised.device_class)
        if gpu:
            info["compute_units"], vectorised.device_class = 16, (lambda _: "gpu")
        if cpu:
            vectorised.device_class = lambda _: "cpu"
        try:
            prepared = type(backend).net_class(backend.runtime, net, weights, batch, winograd=form,
                                               pointwise="always", **options)
        finally:
            info["compute_units"], vectorised.device_class = saved
        return fused_head(prepared, options)
    return prepare


def split_pool(backend):
    """`backend`'s SPLIT_POOL with its second conv's GEMM sum in 2 parts and the pool in its output transform,
    surely (as on a GPU of 16 compute units, unmeasured; parts of 16 channels, so that few are simulated)."""
    from backends.handwritten import winograd_gemm
    planned = winograd(backend, "F2-gemm:1", gpu=True, fold_pools="always")

    def prepare(net, weights, batch):
        saved, winograd_gemm.MIN_PART_DEPTH = winograd_gemm.MIN_PART_DEPTH, 16
        try:
            prepared = planned(net, weights, batch)
        finally:
            winograd_gemm.MIN_PART_DEPTH = saved
        assert prepared.config["layers"]["a"]["winograd"]["sum_parts"] == 2, prepared.config["layers"]["a"]
        assert set(prepared.config["pools_fused"]) == {"pool"}, prepared.config.get("pools_not_fused")
        return prepared
    return prepare


def chained(backend):
    """`backend`'s CHAINED with conv a's output transform doing b's input transform, surely (unmeasured), in
    blocks of one tile and 4 channels."""
    from backends.handwritten import transform_chain
    planned = winograd(backend, "F4-gemm", chain_transforms="always", fold_pools="always")

    def prepare(net, weights, batch):
        saved, transform_chain.BLOCKS = transform_chain.BLOCKS, ((1, 1),)
        try:
            prepared = planned(net, weights, batch)
        finally:
            transform_chain.BLOCKS = saved
        assert set(prepared.config["transforms_chained"]) == {"a"}, prepared.config.get("transforms_not_chained")
        return prepared
    return prepare


def blocks(backend, gpu: bool = False):
    """`backend`'s net with every block chained into one kernel (unmeasured), planned as on a GPU of
    16 compute units where `gpu`."""
    from backends.handwritten import vectorised

    def prepare(net, weights, batch):
        info, saved = backend.runtime.info, (backend.runtime.info["compute_units"], vectorised.device_class)
        if gpu:
            info["compute_units"], vectorised.device_class = 16, (lambda _: "gpu")
        try:
            prepared = type(backend).net_class(backend.runtime, net, weights, batch, fuse_blocks="always")
        finally:
            info["compute_units"], vectorised.device_class = saved
        assert len(prepared.config["blocks_fused"]) == 2, prepared.config
        return prepared
    return prepare


def fused_head(prepared, options: dict):
    """`prepared`, its head surely one kernel where `options` force it."""
    if options.get("fuse_head") == "always":
        assert prepared.config["head_fused"], prepared.config.get("head_not_fused")
    return prepared


def vector(backend, variant: str, **options):
    """`backend`'s net with every conv, depthwise conv, subsampling, max-pool and dense layer as the
    kernels shaped for a CPU's vector width (cpu_conv.py), variant "VW,NV,RP" forced: Oclgrind
    prefers no vectors, so the measured choice would not offer them.  `options`: the net's other arguments."""
    def prepare(net, weights, batch):
        return fused_head(type(backend).net_class(backend.runtime, net, weights, batch, cpu_conv=variant, **options),
                          options)
    return prepare


def main(name: str) -> int:
    if name == "clblast-best":
        from backends.opencl.runtime import get_runtime
        backend = backends.create(UntimedBest, get_runtime())
    else:
        backend = backends.get(name)
    failures = 0
    # the hand-written backends' 3x3 stride-1 convs as each Winograd form in turn, rather than measured
    forms = {"vectorised": ("F4", "F2"), "vectorised-tiled": ("F2", "F4")}.get(name)
    runs = [(SHRUNK_LENET, 2, backend.prepare), (SHRUNK_VGG, 1, winograd(backend, forms[0]) if forms else backend.prepare)]
    if name == "clblast-best":   # its candidates run CLBlast's kernels, which clblast and clblast-convgemm cover
        runs = runs[:1]          # on both nets; under the simulator its prepare-time timing of them is slow
    if name == "vectorised-tiled":
        runs.append((SHRUNK_VGG, 2, lambda *a: gpu_plans(backend, *a)))
    if Feature.GRAPH in type(backend).supported_features and backend.unsupported(SHRUNK_GRAPH) is None:
        # the head (gap -> fc) as one kernel: its float4 form, as on a GPU (Oclgrind's device says it is one)
        runs.append((SHRUNK_GRAPH, 2, winograd(backend, forms[1], fuse_head="always") if forms else backend.prepare))
        if name == "vectorised-tiled":
            runs.append((SHRUNK_GRAPH, 1, lambda *a: gpu_plans(backend, *a)))
    if name == "vectorised":
        runs.append((SHRUNK_DW_PW, 1, lambda *a: gpu_fold(backend, *a)))
    if forms:   # the vector kernels (issue 46): a vector of 8 and of 16 floats, a tile of 2 vectors and of 1
        # (the head's vector form on SHRUNK_GRAPH: head_fused.py)
        runs += [(SHRUNK_LENET, 2, vector(backend, "8,2,4")), (SHRUNK_GRAPH, 1, vector(backend, "16,1,3", fuse_head="always"))]
        if name == "vectorised":
            runs.append((SHRUNK_VGG, 1, vector(backend, "8,1,8")))
            # the vector fold (cpu_fold.py) with the depthwise as the net's first layer and an add in its epilogue
            # (SHRUNK_GRAPH's pairs take it above too)
            runs.append((SHRUNK_DW_PW, 1, vector(backend, "8,2,4")))
    if forms:   # the GPU plans: every position in one work-item, and the positions split
        runs += [(WINOGRAD_GPU, 1, winograd(backend, form, gpu=True)) for form in (forms[1], forms[0] + ":1")]
        # the tile products as a batched GEMM (winograd_gemm.py): staged through local memory as on a
        # GPU, and straight from global memory as on a CPU
        runs += [(WINOGRAD_GPU, 1, winograd(backend, forms[0] + "-gemm", gpu=True)),
                 (WINOGRAD_GPU, 2, winograd(backend, forms[1] + "-gemm", cpu=True)),
                 (SPLIT_POOL, 1, split_pool(backend))]
        if name == "vectorised":   # the one kernel both backends build alike
            runs.append((CHAINED, 1, chained(backend)))
        # the block kernels, as planned here (vectorised) and on a GPU (vectorised-tiled)
        runs.append((SHRUNK_BLOCKS, 2, blocks(backend, gpu=name == "vectorised-tiled")))
        # the layernorms in the blocked 1x1 (issue 45), as planned on a CPU and on a GPU
        runs += [(SHRUNK_PRENORM, 2, layernorms(backend, gpu=gpu)) for gpu in (False, True)]
    for net, batch, prepare in runs:
        start = time.perf_counter()
        weights = init_weights(net, 0)
        x = make_input(net, batch, 0)
        ref = oracle.forward(net, weights, x)
        prepared = prepare(net, weights, batch)
        try:
            y = prepared.forward(x)
            prepared.run_timed()
        finally:
            prepared.close()
        result = compare_arrays(y, ref[-1])
        print(f"{name} {net.name}: {'PASS' if result.passed else 'FAIL'} rel L2 {result.rel_l2} "
              f"({time.perf_counter() - start:.1f} s)")
        failures += not result.passed
    return 1 if failures else 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main(sys.argv[1]))
