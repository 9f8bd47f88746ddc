"""The `morton` backend's own parts: every kernel against numpy on random
data (zero, pad/unpad, im2col into C_4_2_C, the Morton 4-2 GEMM), the
convolution against the float64 oracle at shapes the nets do not have,
the zero-skip rule against a brute-force emulation of what each step
writes and the next reads, the shared buffers' size and the memory count.
The generic suites (tests/test_layers.py, tests/test_end_to_end.py) run
the nets and every layer type."""
import numpy as np
import pytest

from backends.morton import plan as morton_plan
from backends.morton.backend import MortonBackend
from backends.morton.layout import parse
from backends.morton.ops import box_launch, zero_launch
from backends.opencl.launch import Launch
from backends.morton.plan import ConvShape, conv_steps, plan_net
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights
from nets import LENET, VGG16, Conv, Dense, MaxPool, Net

A_LAYOUT, B_LAYOUT = parse("R_2_4_R"), parse("C_4_2_C")


@pytest.fixture(scope="module")
def rt():
    return get_runtime()


@pytest.fixture(scope="module")
def backend(rt):
    return MortonBackend(rt)


def upload(rt, a):
    return rt.upload(np.ascontiguousarray(a, np.float32).ravel(), "test input")


def poisoned(rt, floats):
    return rt.alloc(floats * 4, "test output")   # NaN until written


def numpy_im2col(x, kernel, pad, stride):
    """(N,C,H,W) -> (C*kh*kw, N*OH*OW): rows (c, fy, fx), image n in columns
    n*OH*OW ..; written from the definition."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * pad[1] - kernel[1]) // stride[1] + 1
    cols = np.empty((c, kernel[0], kernel[1], n, oh, ow), x.dtype)
    for fy in range(kernel[0]):
        for fx in range(kernel[1]):
            tap = xp[:, :, fy:fy + stride[0] * (oh - 1) + 1:stride[0], fx:fx + stride[1] * (ow - 1) + 1:stride[1]]
            cols[:, fy, fx] = tap.transpose(1, 0, 2, 3)
    return cols.reshape(c * kernel[0] * kernel[1], n * oh * ow)


# ---------------------------------------------------------------- kernels

@pytest.mark.parametrize("count", [1, 3, 4, 5, 130, 1027])
def test_zero_clears_exactly_its_prefix(rt, count):
    buf = poisoned(rt, count + 9)
    zero_launch(rt, count)(buf)
    got = rt.read(buf, (count + 9,))
    assert not got[:count].any() and np.isnan(got[count:]).all()


@pytest.mark.parametrize("shape", [(2, 3, 5, 7, (1, 1)), (1, 4, 6, 6, (2, 0)), (3, 2, 4, 9, (0, 3))])
def test_pad_writes_the_interior_and_the_zero_step_gives_the_border(rt, shape):
    n, c, h, w, (ph, pw) = shape
    hp, wp = h + 2 * ph, w + 2 * pw
    x = np.random.default_rng(h * w).standard_normal((n, c, h, w)).astype(np.float32)
    src = upload(rt, x)
    pad = box_launch(rt, n * c, h, w, src=(0, h * w, w), dst=(ph * wp + pw, hp * wp, wp))
    out = poisoned(rt, n * c * hp * wp)
    pad(src, out)
    got = rt.read(out, (n, c, hp, wp))
    interior = np.zeros((hp, wp), bool)
    interior[ph:ph + h, pw:pw + w] = True
    assert np.array_equal(got[:, :, interior], x.reshape(n, c, -1))
    assert np.isnan(got[:, :, ~interior]).all()          # only the interior: the plan relies on it
    zero_launch(rt, n * c * hp * wp)(out)
    pad(src, out)
    assert np.array_equal(rt.read(out, (n, c, hp, wp)), np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))))


@pytest.mark.parametrize("shape", [(1, 5, 70, 96), (3, 7, 10, 32), (2, 16, 49, 128)])
def test_unpad_cuts_the_gemm_output_into_nchw(rt, shape):
    n, k, plane, n_pad = shape        # the GEMM's K' x n_pad output, image i in columns i*plane ..
    k_pad = k + 3
    c = np.random.default_rng(k).standard_normal((k_pad, n_pad)).astype(np.float32)
    src = upload(rt, c)
    out = poisoned(rt, n * k * plane + 5)
    box_launch(rt, n, k, plane, src=(0, plane, n_pad), dst=(0, k * plane, plane))(src, out)
    got = rt.read(out, (n * k * plane + 5,))
    want = c[:k, :n * plane].reshape(k, n, plane).transpose(1, 0, 2)
    assert np.array_equal(got[:-5].reshape(n, k, plane), want)
    assert np.isnan(got[-5:]).all()


IM2COL_SHAPES = [  # batch, channels, height, width, kernel, pad, stride
    (1, 1, 32, 32, (5, 5), (0, 0), (1, 1)),
    (3, 3, 7, 9, (3, 3), (1, 1), (1, 1)),
    (2, 5, 11, 13, (5, 5), (2, 2), (2, 2)),
    (2, 7, 9, 6, (3, 1), (1, 0), (1, 2)),
    (1, 6, 5, 5, (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("shape", IM2COL_SHAPES)
def test_im2col_writes_c_4_2_c(rt, shape):
    n, c, h, w, kernel, pad, stride = shape
    s = ConvShape(n, c, h, w, 4, kernel, stride, pad)
    hp, wp = s.padded_hw
    oh, ow = s.out_hw
    x = np.random.default_rng(c * h).standard_normal((n, c, h, w)).astype(np.float32)
    src = upload(rt, np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1]))))
    b_floats = s.depth_pad * s.columns_pad
    out = poisoned(rt, b_floats)
    defines = {"C": c, "HP": hp, "WP": wp, "KH": kernel[0], "KW": kernel[1], "SH": stride[0], "SW": stride[1],
               "OH": oh, "OW": ow, "BATCH": n, "L_PAD": s.depth_pad}
    im2col = Launch(rt, "morton_im2col.cl", "im2col", defines, (ow, oh, c), (8, 8, 1))
    im2col(src, out)
    got = rt.read(out, (b_floats,))
    want = B_LAYOUT.to_layout(numpy_im2col(x, kernel, pad, stride), pad_to=(s.depth_pad, s.columns_pad))
    written = np.zeros(b_floats, bool)
    written[B_LAYOUT.indices(s.depth, s.columns, pad_to=(s.depth_pad, s.columns_pad))[:s.depth, :s.columns]] = True
    assert np.array_equal(np.isfinite(got), written)     # exactly the L x N*OH*OW part is written
    assert np.array_equal(got[written], want[written])
    zero_launch(rt, b_floats)(out)
    im2col(src, out)
    assert np.array_equal(rt.read(out, (b_floats,)), want)


def run_gemm(rt, a, b, bias, activation, work_group=(4, 16)):
    """The Morton GEMM on row-major a (M x L), b (L x Ncols): returns the whole
    padded output and the padded inputs."""
    m, depth = a.shape
    cols = b.shape[1]
    mp, lp = morton_plan.round_up(m, 2 * work_group[0]), morton_plan.round_up(depth, 4)
    np_ = morton_plan.round_up(cols, 2 * work_group[1])
    bias_pad = np.zeros(mp, np.float32)
    bias_pad[:m] = bias
    c = poisoned(rt, mp * np_)
    act = {"none": 0, "relu": 1, "sigmoid": 2}[activation]
    gemm = Launch(rt, "morton_gemm.cl", "morton_gemm", {"L_PAD": lp, "N_PAD": np_, "ACT": act},
                  (mp // 2, np_ // 2), work_group, exact=True)
    gemm(upload(rt, A_LAYOUT.to_layout(a, pad_to=(mp, lp))), upload(rt, B_LAYOUT.to_layout(b, pad_to=(lp, np_))),
         upload(rt, bias_pad), c)
    a_pad = np.zeros((mp, lp))
    a_pad[:m, :depth] = a
    b_pad = np.zeros((lp, np_))
    b_pad[:depth, :cols] = b
    return rt.read(c, (mp, np_)), a_pad @ b_pad + bias_pad[:, None]


@pytest.mark.parametrize("m, depth, cols", [(1, 1, 1), (5, 27, 70), (8, 32, 32), (13, 50, 100), (64, 36, 33),
                                            (17, 9, 257)])
@pytest.mark.parametrize("activation", ["none", "relu", "sigmoid"])
def test_morton_gemm_matches_numpy(rt, m, depth, cols, activation):
    rng = np.random.default_rng(m * depth + cols)
    a = rng.standard_normal((m, depth)).astype(np.float32)
    b = rng.standard_normal((depth, cols)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    got, want = run_gemm(rt, a, b, bias, activation)
    want = oracle.activate(want, activation)
    assert got.shape[0] % 8 == 0 and got.shape[1] % 32 == 0   # C in 8 x 32 blocks
    assert compare_arrays(got, want, tol=1e-5).passed      # the padding too: finite, bias + act


def test_morton_gemm_with_another_work_group(rt):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((11, 21)).astype(np.float32)
    b = rng.standard_normal((21, 45)).astype(np.float32)
    got, want = run_gemm(rt, a, b, np.zeros(11, np.float32), "none", work_group=(2, 8))
    assert got.shape == (12, 48)
    assert compare_arrays(got, want, tol=1e-5).passed


# ------------------------------------------------------- the convolution layer

CONV_CASES = [  # (input C,H,W), layer, batch: shapes unlike the nets'
    ((5, 13, 11), Conv("l", "relu", out_channels=9, kernel=(3, 3), pad=(1, 1)), 1),
    ((3, 10, 17), Conv("l", "sigmoid", out_channels=17, kernel=(3, 5), stride=(2, 1), pad=(2, 0)), 3),
    ((7, 6, 40), Conv("l", "none", out_channels=3, kernel=(1, 3), stride=(1, 2), pad=(0, 1)), 2),
    ((2, 9, 9), Conv("l", "relu", out_channels=33, kernel=(4, 4), stride=(3, 3)), 2),
    ((16, 8, 8), Conv("l", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)), 4),   # L and columns exact
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_matches_the_oracle(backend, case):
    in_shape, layer, batch = CONV_CASES[case]
    net = Net("t", in_shape, (layer,))
    weights = init_weights(net, case)
    x = np.random.default_rng(case).standard_normal((batch,) + in_shape).astype(np.float32)
    ref = oracle.forward(net, weights, x)[-1]
    prepared = backend.prepare(net, weights, batch)
    try:
        for _ in range(2):       # the second run reads buffers the first left full of stale values
            result = compare_arrays(prepared.forward(x), ref)
            assert result.passed, result
        prepared.load_input(x)
        steps = [s.name for s in prepared.run_timed()[0].steps]
        assert steps == prepared.config["layers"]["l"]["steps"].split(" + ")
        assert steps == plan_net(net, batch).layers[0].step_names()
        assert "morton-gemm" in steps and steps[-1] == "unpad"
    finally:
        prepared.close()


def test_ops_follow_the_plan_on_the_nets(backend):
    for net, batch in ((LENET, 100), (Net("t", (3, 20, 20), (
            Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)), MaxPool("b"),
            Conv("c", "relu", out_channels=10, kernel=(3, 3), pad=(1, 1)), Dense("d", "none", out_features=5))), 2)):
        prepared = backend.prepare(net, init_weights(net, 0), batch)
        try:
            convs = [(op, lp) for op, lp in zip(prepared.ops, plan_net(net, batch).layers) if lp.shape]
            assert len(convs) == 2
            for op, lp in convs:
                assert [name for name, _, _ in op.steps] == lp.step_names()
        finally:
            prepared.close()


def test_a_missing_zero_step_shows_as_nan(backend, monkeypatch):
    # LeNet's C1: L = 25 is padded to 28, so the GEMM reads 3 rows im2col never
    # writes; without the zero step they hold the NaN poison and NaN * 0 = NaN
    def no_zero_before_im2col(shape, src):
        steps = conv_steps(shape, src)
        for st in steps:
            if st.name == "im2col":
                st.unwritten = 0
        return steps

    monkeypatch.setattr(morton_plan, "conv_steps", no_zero_before_im2col)
    net = Net("t", (1, 12, 12), (Conv("l", "sigmoid", out_channels=6, kernel=(5, 5)),))
    prepared = backend.prepare(net, init_weights(net, 0), 2)
    try:
        assert "zero" not in prepared.config["layers"]["l"]["steps"]
        y = prepared.forward(np.ones((2, 1, 12, 12), np.float32))
        assert np.isnan(y).all()
    finally:
        prepared.close()


# ----------------------------------------------------------- the zero-skip rule

def emulate(shape: ConvShape) -> dict:
    """For each step, does the next step read an element this step leaves
    unwritten?  Worked out element by element with boolean masks."""
    s = shape
    hp, wp = s.padded_hw
    oh, ow = s.out_hw
    need = {}
    if any(s.pad):
        written = np.zeros((hp, wp), bool)
        written[s.pad[0]:s.pad[0] + s.height, s.pad[1]:s.pad[1] + s.width] = True
        read = np.zeros((hp, wp), bool)          # every tap of every window im2col forms
        (sh, sw), (kh, kw) = s.stride, s.kernel
        for fy in range(kh):
            for fx in range(kw):
                read[fy:fy + sh * (oh - 1) + 1:sh, fx:fx + sw * (ow - 1) + 1:sw] = True
        need["pad"] = bool((read & ~written).any())
    b_written = np.zeros(s.depth_pad * s.columns_pad, bool)
    idx = B_LAYOUT.indices(s.depth, s.columns, pad_to=(s.depth_pad, s.columns_pad))
    b_written[idx[:s.depth, :s.columns]] = True
    need["im2col"] = not b_written.all()         # the GEMM's dot products read every element of B
    c_written = np.ones((s.filters_pad, s.columns_pad), bool)
    need["morton-gemm"] = not c_written[:s.filters, :s.columns].all()   # unpad reads K x N*OH*OW
    need["unpad"] = False                        # writes the whole compact output the next layer reads
    return need


def random_shapes(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        yield ConvShape(int(rng.integers(1, 4)), int(rng.integers(1, 9)), int(rng.integers(kh, 20)),
                        int(rng.integers(kw, 20)), int(rng.integers(1, 20)), (kh, kw),
                        tuple(int(v) for v in rng.integers(1, 4, 2)), tuple(int(v) for v in rng.integers(0, 3, 2)))


@pytest.mark.parametrize("seed", range(4))
def test_zero_steps_run_exactly_where_the_next_step_would_read_unwritten_elements(seed):
    for shape in random_shapes(25, seed):
        planned = {st.name: st.zero_first for st in conv_steps(shape, 0)}
        assert planned == emulate(shape), shape


def test_vgg16_buffers_and_zero_steps():
    plan = plan_net(VGG16, 1)
    assert plan.buffer_floats == 28_901_376 and plan.sized_by == "im2col of conv1_2"   # the study's number
    runs = {lp.name: lp.describe()["zero_steps_run"] for lp in plan.layers if lp.shape}
    # zero 1 (before pad) always runs; zero 3 where L is not a multiple of 4 (conv1_1: 27)
    # or OH*OW not of 32 (conv4: 784, conv5: 196); zero 5 and 7 never
    assert runs == {name: [1, 3] if name in ("conv1_1", "conv4_1", "conv4_2", "conv4_3", "conv5_1", "conv5_2",
                                             "conv5_3") else [1] for name in runs}


def test_lenet_batch_is_one_wide_gemm():
    plan = plan_net(LENET, 100)
    c1 = plan.layers[0]
    assert c1.shape.columns == 100 * 28 * 28 and c1.shape.columns_pad == 78400
    assert c1.step_names() == ["zero", "im2col", "morton-gemm", "unpad"]   # no padding: no pad step
    assert plan.sized_by == "im2col of c1" and plan.buffer_floats == 28 * 78400


def test_memory_counts_weights_and_buffers(backend):
    net = Net("t", (3, 9, 10), (Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)), MaxPool("b"),
                                 Dense("c", "none", out_features=7)))
    prepared = backend.prepare(net, init_weights(net, 0), 2)
    try:
        s = plan_net(net, 2).layers[0].shape
        weights = s.filters_pad * s.depth_pad + s.filters_pad + 5 * 4 * 5 * 7 + 7
        buffers = 2 * plan_net(net, 2).buffer_floats + 2 * 3 * 9 * 10     # two shared + the input buffer
        assert prepared.memory_bytes == 4 * (weights + buffers)
    finally:
        prepared.close()


def test_a_device_limit_shrinks_the_work_group_and_the_padding_follows(rt):
    limit = rt.info["max_work_group_size"]
    net = Net("t", (3, 6, 7), (Conv("l", "relu", out_channels=4, kernel=(3, 3), pad=(1, 1)),))
    weights = init_weights(net, 0)
    x = np.random.default_rng(0).standard_normal((1,) + net.input_shape).astype(np.float32)
    prepared = MortonBackend(rt, work_group=(8, 2 * limit)).prepare(net, weights, 1)   # more than the device allows
    try:
        wg = prepared.config["gemm_work_group"]
        assert wg[0] * wg[1] <= limit
        assert prepared.config["gemm_output_block"] == f"{2 * wg[0]} x {2 * wg[1]}"
        assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
    finally:
        prepared.close()
