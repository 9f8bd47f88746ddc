"""The `tinygrad` peer: listed; on the OpenCL device a run names, also when
it is the second platform, and refusing in one line a device tinygrad's CL
device cannot take; run() returns after the device's queue finished;
`compare tune --scope tinygrad` stopped by its budget and continued by a
second run; the searched mode's outputs against the float64 oracle on nets
of random shapes.  Its untuned mode also runs the generic suites (layers,
LeNet-5 end to end, random nets and graphs).

The searches here run under tinygrad's own limits on its candidates
(BEAM_UPCAST_MAX=1, BEAM_LOCAL_MAX=1: no upcasts, no local work-groups),
so that a kernel's search takes seconds on two cores instead of minutes:
the same search, smaller, and each choice records the limits it ran under."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import backends
from compare import oracle
from compare.checking import compare_arrays
from nets import Attention, Conv, Dense, MaxPool, Net, get_net
from nets.errors import Unsupported
from nets.weights import init_weights

from conftest import REQUIRE_ALL, backend_or_skip, module_or_skip, rng
from peer_graph_checks import GRAPH, check_every_mode

ROOT = Path(__file__).resolve().parent.parent
SMALL_SEARCH = {"BEAM_UPCAST_MAX": "1", "BEAM_LOCAL_MAX": "1"}


TWO = Net("two", (2, 6, 5), (Conv("c", "relu", out_channels=3, kernel=(3, 3)), MaxPool("p")))


def _compare(*argv, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "compare", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=timeout)


def test_compare_backends_lists_it_and_it_runs_every_kind_the_reference_runs():
    backend = backend_or_skip("tinygrad")
    out = _compare("backends").stdout
    assert re.search(r"^tinygrad +available +peer: tinygrad on the same OpenCL device", out, re.M), out
    assert backend.uses_opencl and backend.unsupported(GRAPH) is None


def test_a_graph_net_with_every_new_kind_matches_the_oracle():
    backend = backend_or_skip("tinygrad")
    weights = init_weights(GRAPH, 3)
    assert check_every_mode(backend, GRAPH, weights, rng(3).standard_normal((2,) + GRAPH.input_shape)
                            .astype(np.float32)) == ["untuned"]   # nothing searched in the suite's empty cache


def test_run_returns_after_the_queue_finished(tmp_path):
    # tinygrad enqueues through its own OpenCL binding: after the last kernel of run(), a clFinish
    backend_or_skip("tinygrad")
    from backends.opencl.runtime import get_runtime
    from backends.peers.tinygrad_device import Child
    from backends.tuning.tinygrad.session import store_for
    child = Child(get_runtime().device, "run check")
    try:
        calls = child.worker.call("tinygrad_child", "calls_during_run", child.target, store_for(get_runtime()),
                                  TWO, 2)
    finally:
        child.close()
    assert calls.count("kernel") >= 2 and calls[-1] == "finish", calls


def test_the_pass_copies_are_the_allocators_own_and_right_at_random_shapes():
    # tinygrad's public copies run its engine for each copy, and on the H200 that slowed the JIT call after them
    # (the H200 notes' step 41): the peer's pass copies straight through the device's allocator instead
    backend_or_skip("tinygrad")
    from backends.opencl.runtime import get_runtime
    from backends.peers.tinygrad_device import Child
    from backends.tuning.tinygrad.session import store_for
    shapes = [(1, 3, 5, 7), (100, 1, 32, 32), (2, 1000), (9, 4)]
    child = Child(get_runtime().device, "copies check")
    try:
        got = child.worker.call("tinygrad_child", "copies_at_random_shapes", child.target, store_for(get_runtime()),
                                shapes, int(rng().integers(1 << 30)))
    finally:
        child.close()
    for shape, (whole, back, flat, turned_apart, turned, calls) in zip(shapes, got):
        assert whole and back and flat, shape
        assert turned_apart and turned, shape   # a view not in the buffer's order goes tinygrad's own way, right
        assert calls == ["write", "read"], (shape, calls)   # one OpenCL write, one read: no kernel, no engine


def test_its_launches_per_pass_are_the_kernels_tinygrad_counts_running_them():
    backend_or_skip("tinygrad")
    from backends.opencl.runtime import get_runtime
    from backends.peers.tinygrad_device import Child
    from backends.tuning.tinygrad.session import store_for
    child = Child(get_runtime().device, "launches check")
    try:
        launches, counted = child.worker.call("tinygrad_child", "launches_and_kernel_count", child.target,
                                              store_for(get_runtime()), TWO, 2)
    finally:
        child.close()
    assert counted >= 1 and (launches.kernels, launches.enqueues, launches.routine_calls) == (counted, counted, 0)


def test_unavailable_without_tinygrad(monkeypatch):
    import importlib.util

    from backends.peers.tinygrad_peer import TinygradBackend
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tinygrad" else real(name, *a))
    assert TinygradBackend.unavailable_reason() == "tinygrad is not installed (pip install 'clblast-compare[tinygrad]')"


def test_the_icd_libraries_are_read_as_the_loader_reads_them(tmp_path):
    from backends.opencl.icd import icd_libraries
    (tmp_path / "b.icd").write_text("/lib/libb.so\n")
    (tmp_path / "a.icd").write_text("liba.so.1\n")
    (tmp_path / "notes.txt").write_text("not an icd")
    assert icd_libraries({"OCL_ICD_VENDORS": str(tmp_path)}) == ["liba.so.1", "/lib/libb.so"]
    assert icd_libraries({"OCL_ICD_VENDORS": str(tmp_path / "b.icd")}) == ["/lib/libb.so"]
    assert icd_libraries({"OCL_ICD_VENDORS": "libdirect.so"}) == ["libdirect.so"]
    assert icd_libraries({"OPENCL_VENDOR_PATH": str(tmp_path), "OCL_ICD_FILENAMES": "/x/k.so:/x/l.so"}) == [
        "/x/k.so", "/x/l.so", "liba.so.1", "/lib/libb.so"]


# -- a device on the second platform
def _rusticl_then_pocl(folder: Path) -> dict:
    """An environment whose loader lists rusticl's llvmpipe first and PoCL second, or a skip saying why not.
    ocl-icd sorts platforms by their GPUs, then CPUs (one each here), then by the order the folder lists
    its ICD files in: names are tried until rusticl's comes first."""
    from backends.opencl.icd import icd_libraries
    libs = icd_libraries()
    pocl = next((lib for lib in libs if "pocl" in lib.lower()), None)
    rusticl = next((lib for lib in libs if "rusticl" in lib.lower()), None)
    env = dict(os.environ, RUSTICL_ENABLE="llvmpipe", OCL_ICD_VENDORS=str(folder))
    env.pop("PYOPENCL_CTX", None)
    listing = "import pyopencl as cl; print([p.name for p in cl.get_platforms() if p.get_devices()])"
    for first, second in (("a", "b"), ("b", "a"), ("1", "2"), ("2", "1"), ("x", "y"), ("y", "x")):
        if pocl is None or rusticl is None:
            break
        for f in folder.glob("*.icd"):
            f.unlink()
        (folder / f"{first}.icd").write_text(rusticl + "\n")
        (folder / f"{second}.icd").write_text(pocl + "\n")
        found = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, env=env, timeout=120)
        if found.stdout.strip() == "['rusticl', 'Portable Computing Language']":
            return env
    why = f"no ICD folder here lists rusticl's llvmpipe before PoCL (libraries: {libs})"
    if REQUIRE_ALL:
        pytest.fail(f"`make test` installs PoCL and rusticl: {why}")
    pytest.skip(why)


def test_a_device_on_the_second_platform_runs_tinygrad_there_and_one_it_cannot_take_is_refused(tmp_path):
    backend_or_skip("tinygrad")
    env = _rusticl_then_pocl(tmp_path)
    out = tmp_path / "check.json"
    proc = _compare("check", "--net", "lenet", "--batch", "1", "--backends", "tinygrad,numpy", "--device", "1:0",
                    "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["device"]["platform"] == "Portable Computing Language"
    tiny = next(b for b in data["backends"] if b["name"] == "tinygrad")
    # the device tinygrad opened, as tinygrad names it, is the one asked for: the first platform's is another
    assert tiny["info"]["device"] == data["device"]["name"] and tiny["info"]["platform"] == data["device"]["platform"]
    assert tiny["check"]["status"] == "PASS" and tiny["mode"] == "untuned"
    # rusticl's llvmpipe is no GPU and not its platform's default device, so tinygrad's CL device cannot take it
    out = tmp_path / "refused.json"
    proc = _compare("check", "--net", "lenet", "--batch", "1", "--backends", "tinygrad", "--device", "0:0",
                    "--out", str(out), env=env)
    tiny = json.loads(out.read_text())["backends"][0]
    assert tiny["status"] == "UNSUPPORTED", (tiny, proc.stderr[-2000:])
    assert tiny["reason"] == ("tinygrad's CL device takes the GPUs of a platform, else its default device: "
                              "'rusticl' gives it none, not 'llvmpipe (LLVM 15.0.6, 256 bits)'") or (
        "\n" not in tiny["reason"] and "not 'llvmpipe" in tiny["reason"]), tiny["reason"]


# -- the search
def _tune_lines(proc) -> tuple[int, int]:
    """(kernels searched this run, kernels left) from `compare tune`'s summary."""
    m = re.search(r"tinygrad: (\d+) kernels searched this run at width 2 .*?, (\d+) left", " ".join(proc.stdout.split()))
    assert m, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_two_budget_limited_tunes_the_second_continuing_the_first(tmp_path):
    backend_or_skip("tinygrad")
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path), **SMALL_SEARCH)
    args = ("tune", "--scope", "tinygrad", "--net", "lenet", "--batch", "1", "--budget-s")
    first = _compare(*args, "11", env=env)
    done, left = _tune_lines(first)
    if done == 0:   # a loaded machine can spend the budget compiling LeNet-5: a longer first run
        first = _compare(*args, "30", env=env)
        done, left = _tune_lines(first)
    assert done >= 1 and done + left == 6, first.stdout
    path = next(tmp_path.glob("tinygrad-search/*/choices.json"))
    before = json.loads(path.read_text())["kernels"]
    assert all(c["settings"] == SMALL_SEARCH and c["key"].startswith("2|") for c in before)
    second = _compare(*args, "60", env=env)
    done_now, left_now = _tune_lines(second)
    after = json.loads(path.read_text())["kernels"]
    assert done_now == left and left_now == 0                     # the rest, nothing searched again
    assert after[:len(before)] == before and len(after) == 6        # what the first found is kept as it was
    shown = _compare("tune", "--scope", "tinygrad", "--net", "lenet", "--batch", "1", "--show", env=env)
    assert "lenet batch 1: 6 of 6 distinct kernels searched at width 2" in shown.stdout, shown.stdout


def test_the_searched_mode_runs_the_choices_and_matches_the_oracle_at_random_shapes(tmp_path, monkeypatch):
    backend_or_skip("tinygrad")
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    for k, v in SMALL_SEARCH.items():
        monkeypatch.setenv(k, v)
    from backends import tuning
    # dense layers of random sizes: one kernel each, whose search takes a second or two here (a convolution's
    # ten or more, even so limited)
    draw = rng(40)
    nets = [Net(f"r{i}", tuple(int(v) for v in draw.integers(1, 12, 3)),
                (Dense("d", "sigmoid", out_features=int(draw.integers(2, 40))),)) for i in range(3)]
    # a 1x1 conv with ReLU6: tinygrad's ONNX recipe (Clip) compiles another kernel for it than our walk does
    nets.append(Net("relu6", (4, 6, 6), (Conv("c", "relu6", out_channels=8, kernel=(1, 1)),
                                         Dense("d", "none", out_features=3))))
    harness = tuning.Harness(None, None, lambda path, what: None)
    said = "\n".join(tuning.tune(tuning.Request(nets, ["tinygrad"], 240, batch=3, harness=harness)).lines)
    m = re.search(r"tinygrad: (\d+) kernels searched this run at width 2 .*?, (\d+) left", said)
    assert m and int(m.group(2)) == 0 and int(m.group(1)) >= len(nets), said
    backend = backends.get("tinygrad")   # a child of its own, seeded with what was just searched
    try:
        assert backend.modes() == ["untuned", "searched", "searched-onnx"]
        for i, net in enumerate(nets):
            weights = init_weights(net, i)
            for mode in ("searched", "searched-onnx"):   # our graph walk, and tinygrad's recipe for an ONNX model
                prepared = backend.prepare(net, weights, 3, mode=mode)
                try:
                    kernels = prepared.config["tinygrad_kernels"]
                    # the search met every kernel of both: the survey compiles the ONNX recipe's pass too
                    assert prepared.config["mode"] == mode and kernels["width"] == 2, prepared.config
                    assert kernels["searched"] == kernels["total"] >= 1, prepared.config
                    assert (prepared.config.get("mode_label") == "searched-onnx, as an ONNX model") == (
                        mode == "searched-onnx"), prepared.config   # the answer says the recipe
                    for seed in (1, 2):
                        x = rng(100 * i + seed).standard_normal((3,) + net.input_shape).astype(np.float32)
                        got = prepared.forward(x)
                        assert compare_arrays(got, oracle.forward(net, weights, x)[-1]).passed, (net, mode)
                finally:
                    prepared.close()
        # no ONNX of a windowed attention (Swin's): the recipe's mode says so, in one line
        windowed = Net("windowed", (4, 4, 4), (Conv("in_proj", out_channels=12, kernel=(1, 1)),
                                               Attention("windows", heads=2, window=(2, 2))))
        with pytest.raises(Unsupported, match="attends within windows") as refused:
            backend.prepare(windowed, init_weights(windowed, 0), 1, mode="searched-onnx")
        assert "\n" not in str(refused.value)
    finally:
        backend.close()


def test_the_survey_compiles_a_transformers_onnx_recipe_through_the_peers_capture(tmp_path, monkeypatch):
    """The ONNX recipe of a ViT (shape inputs the runner reads as Python values on its first call) is
    captured as the peer captures it, so `compare tune` surveys its kernels beside the walk's."""
    backend_or_skip("tinygrad")
    module_or_skip("onnx", "opencv")
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    from backends.opencl.runtime import get_runtime
    from backends.peers.tinygrad_choices import EVERY_WAY
    from backends.tuning.tinygrad.session import LocalSearcher, store_for
    from test_onnx_transformer_writer import vit
    net = vit(8, 2, 4, 8, "gelu", True, True)
    searcher = LocalSearcher(get_runtime().device, store_for(get_runtime()))
    try:
        found = searcher.survey(net, 2, 2, 600.0)   # a timeout against a hang, not a budget to meet
    finally:
        searcher.child.close()
    assert found is not None and found.ways == EVERY_WAY and found.kernels, found
