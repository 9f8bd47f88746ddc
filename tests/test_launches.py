"""Launches per pass (backends/base.py Launches) and the replay of a recorded pass
(backends/opencl/replay.py): the counts a backend reports against the kernels that reach
pyopencl's enqueue, counted here by wrapping it; the replayed pass against the plain one and the
float64 oracle on fresh random inputs; a device without cl_khr_command_buffer refused in one line."""
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl._cl as _cl
import pytest

import backends
from backends.base import Launches
from backends.opencl import flushes
from backends.opencl.net import Recorder
from backends.opencl.replay import missing
from backends.opencl.runtime import get_runtime
from backends.handwritten.net import PLAIN, REPLAY
from compare import oracle
from compare.checking import compare_arrays
from compare.report import render_report
from compare.results import load_results, write_results
from compare.tables import summary_table
from nets import LENET, Add, Conv, Dense, GlobalAvgPool, Net
from nets.errors import Unsupported, UserError
from nets.weights import init_weights

from conftest import REQUIRE_ALL, backend_or_skip
from results_factory import small_results_dict

ROOT = Path(__file__).resolve().parent.parent
HAND_WRITTEN = ["baseline", "vectorised", "vectorised-tiled", "fused", "morton"]
REPLAYING = ["vectorised", "vectorised-tiled"]
# a small graph: a residual add (folded into the conv before it where a backend folds), a pool, a dense
SMALL_GRAPH = Net("small", (5, 7, 6), (
    Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
    Conv("b", "none", out_channels=6, kernel=(3, 3), pad=(1, 1)),
    Add("s", "relu", inputs=("b", "a")),
    GlobalAvgPool("gap"),
    Dense("fc", "none", out_features=3)))


def _fresh(net, batch, seed):
    return np.random.default_rng(seed).standard_normal((batch,) + tuple(net.input_shape)).astype(np.float32)


@contextmanager
def counted_enqueues():
    """Every NDRange kernel enqueue through pyopencl, counted: its generated Kernel.__call__ calls the
    binding's function (pyopencl._cl), and pyopencl's own name of it may be called directly."""
    count = [0]
    real = _cl.enqueue_nd_range_kernel

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)
    saved = cl.enqueue_nd_range_kernel
    _cl.enqueue_nd_range_kernel = cl.enqueue_nd_range_kernel = counting
    try:
        yield lambda: count[0]
    finally:
        _cl.enqueue_nd_range_kernel, cl.enqueue_nd_range_kernel = real, saved


def _one_pass_enqueues(prepared, x) -> int:
    prepared.load_input(x)
    with counted_enqueues() as enqueued:
        prepared.run()
        return enqueued()


# every hand-written backend on LeNet-5; those that run graphs on the small one too (fused and morton run chains)
COUNTED = [(n, LENET) for n in HAND_WRITTEN] + [(n, SMALL_GRAPH) for n in ("baseline", "vectorised", "vectorised-tiled")]


@pytest.mark.parametrize("name,net", COUNTED, ids=[f"{n}-{net.name}" for n, net in COUNTED])
def test_the_launches_counted_are_the_kernels_a_pass_enqueues(name, net):
    backend = backend_or_skip(name)
    x = _fresh(net, 2, 1)
    prepared = backend.prepare(net, init_weights(net, 1), 2)
    try:
        assert prepared.flat is not None and "flat list" in prepared.config["pass"]   # made at prepare
        launches = prepared.launches(x)
        enqueued = _one_pass_enqueues(prepared, x)   # from the flat list
        assert enqueued == prepared.flat.kernels >= 1
        assert launches == Launches(enqueued, enqueued, 0, launches.how)
        y = prepared.forward(x)
        rt = prepared.rt
        rt.bind_once = False   # op by op, arguments set on every call as pyopencl's Kernel.__call__ does: the same work
        try:
            assert _one_pass_enqueues(prepared, x) == enqueued
            np.testing.assert_array_equal(prepared.fetch_output(), y)
        finally:
            rt.bind_once = True
    finally:
        prepared.close()


def test_clblast_counts_its_own_kernels_and_its_routine_calls_apart():
    backend_or_skip("clblast")
    from backends.clblast.backend import ClblastInProcess
    backend = ClblastInProcess(runtime=get_runtime())
    x = _fresh(LENET, 2, 2)
    prepared = backend.prepare(LENET, init_weights(LENET, 2), 2)
    try:
        launches = prepared.launches(x)
        ours = _one_pass_enqueues(prepared, x)   # CLBlast's kernels are enqueued inside its C library
        prepared.load_input(x)
        calls = [s for t in prepared.run_timed() for s in t.steps if s.how == "markers"]   # one per routine call here
        assert (launches.kernels, launches.routine_calls) == (ours, len(calls)) and calls
        assert launches.enqueues == ours + len(calls)
        assert launches.text() == f"{ours} + {len(calls)} calls"
    finally:
        prepared.close()


def _in_process(name):
    """The backend `name` in this process (the CLBlast ones run in a child of their own by default)."""
    if name.startswith("clblast"):
        backend_or_skip(name)
        from backends.clblast.backend import ClblastConvgemmInProcess, ClblastInProcess
        from backends.clblast.best import ClblastBestInProcess
        made = {"clblast": ClblastInProcess, "clblast-convgemm": ClblastConvgemmInProcess,
                "clblast-best": ClblastBestInProcess}[name]
        return made(runtime=get_runtime())
    return backend_or_skip(name)


@contextmanager
def queues_enqueued_on():
    """The queue of every kernel enqueue through pyopencl and of every CLBlast routine call, in order."""
    from backends.clblast import counting, library
    import pyclblast
    seen = []
    real = _cl.enqueue_nd_range_kernel

    def kernel(queue, *args, **kwargs):
        seen.append(queue)
        return real(queue, *args, **kwargs)

    def routine(fn, at):
        def call(*args, **kwargs):
            seen.append(args[at])
            return fn(*args, **kwargs)
        return call

    saved = [(pyclblast, n, getattr(pyclblast, n)) for n in counting._routines(pyclblast)] + [
        (library, "_call", library._call), (_cl, "enqueue_nd_range_kernel", real),
        (cl, "enqueue_nd_range_kernel", cl.enqueue_nd_range_kernel)]
    for module, n, fn in saved[:-3]:
        setattr(module, n, routine(fn, 0))
    library._call = routine(library._call, 3)
    _cl.enqueue_nd_range_kernel = cl.enqueue_nd_range_kernel = kernel
    try:
        yield seen
    finally:
        for module, n, fn in saved:
            setattr(module, n, fn)


OPENCL_OWN = ["clblast", "clblast-convgemm", "clblast-best"] + HAND_WRITTEN


@pytest.mark.parametrize("name", OPENCL_OWN)
def test_a_timed_pass_enqueues_on_a_queue_without_profiling_and_matches_the_oracle(name):
    """run() (what the compute time holds) puts every kernel and routine call on the runtime's queue without
    profiling, and finishes it; per-layer times stay on the profiling queue, whose events they read."""
    backend = _in_process(name)
    profiling = cl.command_queue_properties.PROFILING_ENABLE
    for seed, batch in ((3, 1), (4, 3)):   # fresh random inputs, two batches
        weights = init_weights(LENET, seed)
        prepared = backend.prepare(LENET, weights, batch)
        try:
            x = _fresh(LENET, batch, seed)
            prepared.load_input(x)
            with queues_enqueued_on() as seen:
                prepared.run()
            assert seen and not any(q.properties & profiling for q in seen), name
            assert compare_arrays(prepared.fetch_output(), oracle.forward(LENET, weights, x)[-1]).passed, name
            assert prepared.rt.queue.properties & profiling   # back on the profiling queue after the pass
            prepared.load_input(x)
            with queues_enqueued_on() as seen:
                timed = prepared.run_timed()
            assert all(q.properties & profiling for q in seen) and all(t.kernel_ms is not None for t in timed)
        finally:
            prepared.close()
    getattr(backend, "close", lambda: None)()


def test_forms_measured_at_prepare_run_on_the_queue_a_timed_pass_runs_on():
    """Both host-timed measurements that choose a form at prepare (measured.py, dw_pw.py) enqueue on the queue
    without profiling, as run() does: a form's launches then cost what they cost in the pass."""
    from backends.handwritten import dw_pw, measured
    backend = backend_or_skip("vectorised")
    prepared = backend.prepare(LENET, init_weights(LENET, 5), 2)
    try:
        prepared.load_input(_fresh(LENET, 2, 5))
        ops = prepared.pass_ops()
        with queues_enqueued_on() as seen:
            got = measured.fastest_ms(prepared.rt, {"all": ops, "first": ops[:1]})
            both = dw_pw.fastest_ms(prepared.rt, [ops[:1], ops[1:2]], rounds=1, repeats=1)
        profiling = cl.command_queue_properties.PROFILING_ENABLE
        assert seen and not any(q.properties & profiling for q in seen)
        assert set(got) == {"all", "first"} and all(0 < ms < 1e4 for ms in [*got.values(), *both])
        assert prepared.rt.queue.properties & profiling   # the profiling queue again after each
    finally:
        prepared.close()


@pytest.mark.parametrize("name", REPLAYING)
@pytest.mark.parametrize("net,batch", [(LENET, 1), (SMALL_GRAPH, 3)], ids=["lenet-b1", "graph-b3"])
def test_the_replayed_pass_equals_the_plain_one_and_the_oracle(name, net, batch):
    backend = backend_or_skip(name)
    if backend.mode_floor(net, batch, REPLAY) is not None:
        pytest.fail("a replay's floor is not known before it is prepared")
    weights = init_weights(net, 3)
    why = missing(backend.runtime.device)
    if why:   # PoCL, where `make test` runs the suite, offers it: there a missing extension is a failure
        if REQUIRE_ALL:
            pytest.fail(f"`make test` runs on PoCL, which offers cl_khr_command_buffer, but: {why}")
        pytest.skip(f"this device cannot replay: {why}")
    plain = backend.prepare(net, weights, batch, mode=PLAIN)
    try:
        replay = backend.prepare(net, weights, batch, mode=REPLAY)
    except BaseException:
        plain.close()
        raise
    try:
        assert plain.recorded is None and replay.recorded is not None
        for seed in (4, 5):
            x = _fresh(net, batch, seed)
            y = replay.forward(x)
            # the same net's kernels enqueued one by one (a net prepared apart may measure other forms faster)
            replay.enqueue_pass(Recorder(replay.rt.queue, enabled=False))
            replay.rt.finish()
            np.testing.assert_array_equal(y, replay.fetch_output())
            ref = oracle.forward(net, weights, x)[-1]
            assert compare_arrays(y, ref).passed and compare_arrays(plain.forward(x), ref).passed
        kernels = _one_pass_enqueues(plain, x)
        assert _one_pass_enqueues(replay, x) == 0   # nothing enqueued kernel by kernel
        assert replay.launches(x) == Launches(kernels, 1, 0, replay.launches(x).how)
        assert replay.launches(x).text() == f"1 replay of {kernels}"
        assert "command buffer" in replay.config["pass"]
    finally:
        plain.close()
        replay.close()


@pytest.mark.parametrize("name", REPLAYING)
def test_the_replay_of_an_open_plain_pass_is_that_pass_recorded_and_outlives_it(name):
    """One prepare for both modes (the runner makes them in turn): the replay runs the plain net's own
    kernels and buffers, counts its prepare time, and still runs once the plain one is closed."""
    backend = backend_or_skip(name)
    why = missing(backend.runtime.device)
    if why:
        if REQUIRE_ALL:
            pytest.fail(f"`make test` runs on PoCL, which offers cl_khr_command_buffer, but: {why}")
        pytest.skip(f"this device cannot replay: {why}")
    net, batch = SMALL_GRAPH, 2
    weights = init_weights(net, 6)
    plain = backend.prepare(net, weights, batch, mode=PLAIN)
    replay = backend.prepare(net, weights, batch, mode=REPLAY)
    try:
        assert replay.ops is plain.ops and replay.buffers is plain.buffers
        assert replay.shared_prepare_ms == plain.made_ms > 0
        x = _fresh(net, batch, 7)
        ref = oracle.forward(net, weights, x)[-1]
        plain.close()
        assert compare_arrays(replay.forward(x), ref).passed   # its buffers were not freed with the plain net
    finally:
        plain.close()
        replay.close()
    again = backend.prepare(net, weights, batch, mode=REPLAY)   # no open plain pass: a prepare of its own
    try:
        assert again.shared_prepare_ms == 0 and again.recorded is not None
        assert compare_arrays(again.forward(x), ref).passed
    finally:
        again.close()


class _NoCommandBuffers:
    name = "a device  "
    extensions = "cl_khr_fp64 cl_khr_byte_addressable_store"
    extensions_with_version = []


@pytest.mark.parametrize("name", REPLAYING)
def test_a_device_without_command_buffers_refuses_the_replay_in_one_line(name):
    cls = backends.backend_class(name)
    backend = cls(runtime=type("Runtime", (), {"device": _NoCommandBuffers()})())
    assert backend.modes() == [PLAIN, REPLAY]
    for refuse in (lambda: backend.mode_floor(LENET, 1, REPLAY),
                   lambda: backend.prepare(LENET, init_weights(LENET, 0), 1, mode=REPLAY)):
        with pytest.raises(Unsupported) as info:
            refuse()
        assert str(info.value) == "replay: a device does not offer cl_khr_command_buffer (no command buffers to " \
                                  "record a pass in)"
    assert backend.mode_floor(LENET, 1, PLAIN) is None


def test_rusticl_refuses_the_replay_in_one_line():
    """A real device without the extension: Mesa's rusticl on llvmpipe, in a child that sees it."""
    env = dict(os.environ, RUSTICL_ENABLE="llvmpipe", PYOPENCL_CTX="llvmpipe")
    code = ("from backends.opencl.runtime import get_runtime; from backends.handwritten.vectorised import "
            "VectorisedBackend as B; from nets import LENET\n"
            "try:\n    B(runtime=get_runtime()).mode_floor(LENET, 1, 'replay')\nexcept Exception as e:\n"
            "    print(type(e).__name__, e)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    if "no OpenCL device matches" in proc.stderr + proc.stdout:
        if REQUIRE_ALL:
            pytest.fail(f"`make test` installs mesa-opencl-icd, but rusticl lists no llvmpipe: {proc.stderr[-300:]}")
        pytest.skip("Mesa's rusticl lists no llvmpipe device here")
    said = proc.stdout.strip().splitlines()
    assert said and said[-1].startswith("Unsupported replay: llvmpipe") and said[-1].endswith(
        "does not offer cl_khr_command_buffer (no command buffers to record a pass in)"), proc.stdout + proc.stderr


# -- in the results file and where a reader looks -----------------------------------------------------------

def _with_launches(tmp_path):
    """small_results_dict() with the launches of one pass on two backends, as a run writes them; the
    others have none (a peer whose dispatch is not seen; a file written before the count)."""
    d = small_results_dict()
    names = [b["name"] for b in d["backends"]]
    d["backends"][names.index("vectorised")]["launches"] = {"kernels": 7, "enqueues": 1, "routine_calls": 0,
                                                            "how": "a replay"}
    d["backends"][names.index("clblast")]["launches"] = {"kernels": 6, "enqueues": 22, "routine_calls": 16,
                                                         "how": "routine calls apart"}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    return path


def test_launches_load_with_the_results_and_older_files_load_without(tmp_path):
    res = load_results(_with_launches(tmp_path))
    assert res.backend("vectorised").launches == Launches(7, 1, 0, "a replay")
    assert res.backend("clblast").launches.text() == "6 + 16 calls"
    assert res.backend("numpy").launches is None
    write_results(tmp_path / "again.json", res)
    assert load_results(tmp_path / "again.json") == res
    older = tmp_path / "older.json"
    older.write_text(json.dumps(small_results_dict()))   # no launches anywhere: as every file written before
    assert all(b.launches is None for b in load_results(older).backends)


def test_a_negative_count_is_refused_naming_the_field(tmp_path):
    d = json.loads(_with_launches(tmp_path).read_text())
    d["backends"][1]["launches"] = {"kernels": -1, "enqueues": 1}
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"launches\.kernels"):
        load_results(tmp_path / "bad.json")


def test_the_net_page_and_the_run_table_show_the_launches_per_pass(tmp_path):
    path = _with_launches(tmp_path)
    res = load_results(path)
    render_report([res], [str(path)], str(tmp_path / "out"))
    md = next((tmp_path / "out").glob("net-*.md")).read_text()
    section = md[md.index("## Transfers and one-off costs"):].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines() if line.startswith("|")]
    assert rows[0][-1] == "launches/pass"
    cells = {row[0]: row[-1] for row in rows[2:]}
    assert (cells["vectorised"], cells["clblast"], cells["numpy"]) == ("1 replay of 7", "6 + 16 calls", "—")
    assert "cl_khr_command_buffer" in section.split("\n\n")[2]   # the caption says what is counted
    table = summary_table(res)
    # a column of the header (its lines above the rule: rich puts a wrapped header's words at its foot)
    assert "launches" in table.split("\n-", 1)[0].split()
    assert any("vectorised" in line and "1 replay of 7" in line for line in table.splitlines())
    assert "launches: the kernels one pass enqueues" in " ".join(table.split())


def test_a_run_records_the_launches_and_measures_the_replay_as_a_mode(tmp_path, capsys):
    from compare.cli import main
    backend = backend_or_skip("vectorised")
    out = tmp_path / "r.json"
    assert main(["run", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "1", "--repeats", "2",
                 "--warmup", "1", "--peak-gflops", "10", "--out", str(out)]) == 0, capsys.readouterr().err
    res = load_results(out)
    vec = res.backend("vectorised")
    assert res.backend("numpy").launches is None   # no OpenCL: nothing of ours to count
    modes = {m.name: m for m in vec.modes}
    assert set(modes) == {PLAIN, REPLAY} and vec.mode in modes and modes[PLAIN].status == "OK"
    if missing(backend.runtime.device):
        assert modes[REPLAY].status == "UNSUPPORTED" and "cl_khr_command_buffer" in modes[REPLAY].reason
    else:   # checked against the oracle as every mode is
        assert modes[REPLAY].status == "OK" and modes[REPLAY].rel_l2 < 1e-4
    # vectorised runs LeNet-5 as a kernel per layer and one that converts the input NCHW -> NHWC (its
    # output, a dense layer's, is canonical already)
    kernels = len(LENET.layers) + 1
    assert vec.launches.kernels == kernels
    assert vec.launches.enqueues == (1 if vec.mode == REPLAY else kernels)


def test_a_launch_keeps_each_set_of_arguments_it_is_called_with_apart():
    # one Launch called with several sets of arguments (a conv's launch shared by the op that folds its
    # add): each set is bound once on a kernel of its own, and sets past MAX_BOUND are set per call
    from backends.opencl.launch import MAX_BOUND, Launch
    rt = get_runtime()
    source = "__kernel void put(__global float *y, const float v) { y[get_global_id(0)] = v; }"
    launch = Launch(rt, "", "put", None, (4,), kernel=rt.kernel_of(source, "put"))
    bufs = [rt.alloc(16, f"test buffer {k}") for k in range(MAX_BOUND + 2)]
    try:
        for _ in range(2):
            for k, buf in enumerate(bufs):
                launch(buf, np.float32(k))
        rt.finish()
        for k, buf in enumerate(bufs):
            np.testing.assert_array_equal(rt.read(buf, (4,)), np.full(4, k, np.float32))
        assert len(launch._bound) == MAX_BOUND
    finally:
        for buf in bufs:
            buf.release()


def test_the_floor_times_the_empty_kernel_each_way_and_counts_our_launches():
    """benchmarks/launches.py's floor: an empty kernel enqueued three ways on our profiling queue and the preset
    way on two queues without profiling, each a host time and a whole cost per launch (no claim on which is
    faster: that is the benchmark's to print), ours counted as a pass's are."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import launches as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rt = get_runtime(None)
    before = rt.kernel_launches
    got = bench.floor(rt, 2)
    assert len(got) == 5 and bench.PRESET in got and f"{bench.PRESET}, no profiling" in got
    assert all(0 < enqueue <= whole < 1e6 for enqueue, whole in got.values()), got
    assert rt.kernel_launches - before == 2 * (bench.FLOOR_LAUNCHES + 1)   # each round's untimed one too


@pytest.mark.parametrize("name,net", COUNTED, ids=[f"{n}-{net.name}" for n, net in COUNTED])
def test_the_pass_flushes_its_queue_as_measured_at_prepare_and_each_way_computes_the_same(name, net):
    backend = backend_or_skip(name)
    weights, x = init_weights(net, 6), _fresh(net, 2, 7)
    prepared = backend.prepare(net, weights, 2)
    try:
        flat = prepared.flat
        chosen = next(way for way in flushes.WAYS if f"its queue flushed: {way} (" in prepared.config["pass"])
        assert flat.flushes == flushes.WAYS[chosen](flat.kernels)
        ref = oracle.forward(net, weights, x)[-1]
        outputs = {}
        for way, at in flushes.WAYS.items():
            flat.flushes = at(flat.kernels)
            outputs[way] = prepared.forward(x)
            assert compare_arrays(outputs[way], ref).passed, way
        for way, y in outputs.items():   # a flush moves when the device starts, never what it computes
            np.testing.assert_array_equal(y, outputs["never"], err_msg=way)
    finally:
        prepared.close()


def test_the_fastest_way_to_flush_is_the_least_median_and_never_where_none_beats_it():
    assert flushes.fastest({"never": 0.236, "after the first launch": 0.171, "after every launch": 0.190}) == \
        "after the first launch"
    assert flushes.fastest({"never": 0.5, "after the first launch": 0.5, "after every launch": 0.6}) == "never"
    n = 9
    assert flushes.WAYS["after every launch"](n) == frozenset(range(8))   # none after the last: the finish follows
    assert flushes.WAYS["every 4 launches"](n) == frozenset({0, 4})
    assert flushes.WAYS["after the first launch"](1) == frozenset()
