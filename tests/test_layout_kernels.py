"""The hand-written backends' edge conversions on the device
(kernels/layout.cl): `pack` and `unpack` against Layout.pack / Layout.unpack,
the numpy reference, bit for bit on odd shapes; and the nets that use them:
load_input and fetch_output plain copies, the conversions named steps of
the first and last layers, no host conversion in a forward pass."""
import numpy as np
import pyopencl as cl
import pytest

from backends.handwritten.layout import Layout, round_up
from backends.handwritten.net import Convert
from backends.opencl.net import Recorder
from compare import oracle
from compare.checking import compare_arrays
from conftest import backend_or_skip
from nets import Conv, Dense, MaxPool, Net
from nets.weights import init_weights

HANDWRITTEN = ["baseline", "vectorised", "vectorised-tiled"]

SHAPES = [(1, 3, 5, 7), (2, 5, 4, 3), (3, 1, 6, 6), (2, 6, 1, 9), (1, 7, 3, 1)]
BORDERS = [(0, 0), (1, 1), (2, 1)]
STORES = [("nchw", 1), ("nchw", 4), ("nhwc", 1), ("nhwc", 4)]   # (order, channel multiple)
FLATS = [(5, 10), (1, 1000), (7, 13), (2, 3)]


@pytest.fixture(scope="module")
def rt():
    return backend_or_skip("baseline").runtime


def layouts():
    # every shape in every store, each shape with one border in turn (each
    # layout compiles its own kernels: the full product would cost minutes on PoCL)
    spatial = [Layout(n, c, h, w, *BORDERS[i % len(BORDERS)], order, round_up(c, mult))
               for i, (n, c, h, w) in enumerate(SHAPES) for order, mult in STORES]
    flat = [Layout(n, c, 1, 1, order=order, c_stored=round_up(c, mult), flat=True)
            for n, c in FLATS for order, mult in STORES]
    return spatial + flat


def layout_id(layout: Layout) -> str:
    return f"{'x'.join(map(str, layout.canonical_shape))} as {layout.describe()}"


def interior(layout: Layout) -> np.ndarray:
    """True on the stored elements that hold the canonical array's values."""
    mask = np.zeros(layout.stored_shape, bool)
    ph, pw = layout.pad_h, layout.pad_w
    if layout.order == "nchw":
        mask[:, :layout.c, ph:ph + layout.h, pw:pw + layout.w] = True
    else:
        mask[:, ph:ph + layout.h, pw:pw + layout.w, :layout.c] = True
    return mask


def values(shape, seed) -> np.ndarray:
    """Random floats with a -0.0 and huge and tiny ones, so a bitwise match means a copy."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32).reshape(-1)
    x[:3] = [-0.0, 3e38, 1e-40]   # every shape here has 3 elements or more
    return x.reshape(shape)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def device_buffer(rt, array: np.ndarray):
    buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, array.nbytes)
    cl.enqueue_copy(rt.queue, buf, np.ascontiguousarray(array))
    return buf


def run(rt, convert: Convert) -> None:
    rec = Recorder(rt.queue)
    convert.enqueue(rec)
    rt.finish()
    assert [s.name for s in rec.steps()] == [convert.step]


# -- the kernels against the numpy reference -----------------------------------

@pytest.mark.parametrize("layout", layouts(), ids=layout_id)
def test_pack_kernel_writes_exactly_the_interior(rt, layout):
    x = values(layout.canonical_shape, layout.c * 31 + layout.h)
    src = device_buffer(rt, x)
    dst = device_buffer(rt, layout.template())   # as a net's buffer: zero border, NaN interior
    try:
        run(rt, Convert(rt, "pack", layout, src, dst, "pack"))
        got = rt.read(dst, layout.stored_shape)
        np.testing.assert_array_equal(bits(got), bits(layout.pack(x)))
        assert np.all(bits(got[~interior(layout)]) == 0), "the border or a padding channel is no longer +0.0"
    finally:
        src.release()
        dst.release()


@pytest.mark.parametrize("layout", layouts(), ids=layout_id)
def test_unpack_kernel_reads_exactly_the_interior(rt, layout):
    x = values(layout.canonical_shape, layout.w * 17 + layout.c)
    stored = layout.pack(x, fill=np.nan)   # NaN outside the interior: reading it would show
    src = device_buffer(rt, stored)
    dst = device_buffer(rt, np.full(layout.canonical_shape, np.nan, np.float32))
    try:
        run(rt, Convert(rt, "unpack", layout, src, dst, "unpack"))
        got = rt.read(dst, layout.canonical_shape)
        np.testing.assert_array_equal(bits(got), bits(layout.unpack(layout.pack(x))))
        np.testing.assert_array_equal(bits(got), bits(x))
        np.testing.assert_array_equal(bits(rt.read(src, layout.stored_shape)), bits(stored))   # left alone
    finally:
        src.release()
        dst.release()


def test_canonical_layouts_are_recognised():
    assert Layout(2, 3, 4, 5).is_canonical
    assert Layout(2, 8, 1, 1, order="nhwc", flat=True).is_canonical
    assert Layout(2, 1, 4, 5, order="nhwc").is_canonical
    assert not Layout(2, 3, 4, 5, order="nhwc").is_canonical
    assert not Layout(2, 3, 4, 5, 1, 0).is_canonical
    assert not Layout(2, 3, 1, 1, order="nhwc", c_stored=4, flat=True).is_canonical


def test_a_padded_vector_is_one_pixel_without_border_its_channels_padded():
    # the host drops its padding channels as it reads the net's output (no kernel in the pass)
    assert Layout(2, 3, 1, 1, order="nhwc", c_stored=4, flat=True).padded_vector
    assert not Layout(2, 4, 1, 1, order="nhwc", flat=True).padded_vector          # canonical already
    assert not Layout(2, 3, 2, 1, order="nhwc", c_stored=4).padded_vector          # two pixels: a reorder
    assert not Layout(2, 3, 1, 1, 1, 1, order="nhwc", c_stored=4).padded_vector    # a border


# -- the nets ------------------------------------------------------------------

# a padded first conv (an input conversion on every backend), an output of
# 7 features (stored as 8 by the NHWC backends: the host keeps the first 7 as it reads, no kernel)
EDGES = Net("edges", (3, 9, 7), (
    Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
    MaxPool("b"),
    Dense("c", "none", out_features=7)))
# one layer that is both first and last: both conversions around one kernel
SINGLE = Net("single", (5, 6, 7), (Conv("a", "sigmoid", out_channels=6, kernel=(3, 3), pad=(2, 1)),))
# unpadded NCHW in and out: `baseline` converts nothing
PLAIN = Net("plain", (2, 8, 8), (Conv("a", "relu", out_channels=3, kernel=(3, 3)),
                                 Dense("b", "none", out_features=4)))

# (net, backend) -> (first layer's conversion, last layer's): None where the layout is canonical
STEPS = {
    ("edges", "baseline"): ("input NCHW->NCHW+border", None),
    ("edges", "vectorised"): ("input NCHW->NHWC+border", None),
    ("single", "baseline"): ("input NCHW->NCHW+border", None),
    ("single", "vectorised"): ("input NCHW->NHWC+border", "output NHWC->NCHW"),
    ("plain", "baseline"): (None, None),
    ("plain", "vectorised"): ("input NCHW->NHWC", None),
}


def expected_steps(net, name):
    return STEPS[(net.name, "baseline" if name == "baseline" else "vectorised")]


def prepared_net(name, net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return backend_or_skip(name).prepare(net, weights, batch), x, oracle.forward(net, weights, x)


@pytest.mark.parametrize("name", HANDWRITTEN)
@pytest.mark.parametrize("net", [EDGES, SINGLE, PLAIN], ids=lambda n: n.name)
def test_load_input_is_one_plain_blocking_copy(name, net, monkeypatch):
    prepared, x, _ = prepared_net(name, net, 2, 4)
    try:
        copies = []
        real = cl.enqueue_copy

        def spy(queue, dest, src, **kwargs):
            copies.append((dest, src, kwargs.get("is_blocking", True)))
            return real(queue, dest, src, **kwargs)
        monkeypatch.setattr(cl, "enqueue_copy", spy)
        prepared.load_input(x)
        monkeypatch.undo()
        assert len(copies) == 1, "load_input does more than one copy"
        dest, src, blocking = copies[0]
        assert dest is prepared.input_stage and blocking
        assert isinstance(src, np.ndarray) and src.shape == x.shape and np.shares_memory(src, x)
        # before any run, the staging buffer holds x bit for bit
        np.testing.assert_array_equal(bits(prepared.rt.read(prepared.input_stage, x.shape)), bits(x))
    finally:
        prepared.close()


@pytest.mark.parametrize("name", HANDWRITTEN)
@pytest.mark.parametrize("net", [EDGES, SINGLE, PLAIN], ids=lambda n: n.name)
def test_a_forward_pass_converts_only_on_the_device(name, net, monkeypatch):
    prepared, x, ref = prepared_net(name, net, 3, 5)
    try:
        def host_conversion(*args, **kwargs):
            raise AssertionError("a forward pass converted a layout on the host")
        monkeypatch.setattr(Layout, "pack", host_conversion)
        monkeypatch.setattr(Layout, "unpack", host_conversion)
        prepared.load_input(x)
        prepared.run()
        y = prepared.fetch_output()
        assert compare_arrays(y, ref[-1]).passed
        np.testing.assert_array_equal(bits(prepared.forward(x)), bits(y))
        monkeypatch.undo()
        # the packed input buffer is the numpy reference's, border and padding channels still zero
        first = prepared.layouts[0]
        np.testing.assert_array_equal(bits(prepared.rt.read(prepared.activations[0], first.stored_shape)),
                                      bits(first.pack(x)))
    finally:
        prepared.close()


@pytest.mark.parametrize("name", HANDWRITTEN)
@pytest.mark.parametrize("net", [EDGES, SINGLE, PLAIN], ids=lambda n: n.name)
def test_run_timed_names_the_conversions(name, net):
    prepared, x, ref = prepared_net(name, net, 2, 6)
    first_step, last_step = expected_steps(net, name)
    try:
        prepared.load_input(x)
        timings = prepared.run_timed()
        first, last = [s.name for s in timings[0].steps], [s.name for s in timings[-1].steps]
        conversions = [s for t in timings for s in t.steps if s.name.startswith(("input ", "output "))]
        assert [s.name for s in conversions] == [n for n in (first_step, last_step) if n]
        if first_step:
            assert first[0] == first_step
        if last_step:
            assert last[-1] == last_step
        for t in timings:   # a conversion's time is in its layer's kernel time
            assert t.kernel_ms == pytest.approx(sum(s.ms for s in t.steps))
        assert compare_arrays(prepared.fetch_output(), ref[-1]).passed
        config = prepared.config
        for key, step in (("input_conversion", first_step), ("output_conversion", last_step)):
            assert (step in config[key]) if step else config[key].startswith("none"), config[key]
    finally:
        prepared.close()


@pytest.mark.parametrize("name", HANDWRITTEN)
def test_layer_wise_paths_still_hold_at_the_edges(name):
    # run_layer on the first and last layers goes through the staging buffers
    prepared, x, ref = prepared_net(name, EDGES, 2, 7)
    try:
        inputs = [x] + [r.astype(np.float32) for r in ref[:-1]]
        for i in range(len(EDGES.layers)):
            assert compare_arrays(prepared.run_layer(i, inputs[i]), ref[i]).passed, EDGES.layers[i].name
        for got, want in zip(prepared.layer_outputs(x), ref):
            assert compare_arrays(got, want).passed
    finally:
        prepared.close()
