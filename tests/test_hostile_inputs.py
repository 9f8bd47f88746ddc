"""Hostile input, class by class (issue 44), each through the command line:
exit 2, one line on stderr naming the value and what to do, no traceback,
within seconds, and every file the user gave exactly as it was (nothing
new beside them either).

Classes: files whose header lies (.npy, .npz members, ONNX initializers,
degenerate ONNX attributes); an output over an input; unbounded requests
(absurd repeats and warm-ups, JSON nested very deep, a pipe or a device
read as a file); values that should not be accepted (an unknown or empty
--baseline, NaN times, negative FLOPs, batch 0).  The fuzz tests over
results files and .npy headers are in tests/test_hostile_fuzz.py."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from compare.cli import main
from conftest import module_or_skip
from nets import LENET
from nets.weights import init_weights, save_weights
from results_factory import small_results_dict

# a guard far above any real time, not a budget: every refusal here comes before any work, each under 1 s on
# this busy 2-core machine (the slowest 0.9 s); it fails a refusal that came after the work, or hung (the
# alarm at twice this)
SECONDS = 20


class _TookTooLong(Exception):
    pass


@contextmanager
def _deadline(seconds: int):
    """Fail, rather than hang the suite, when the block takes longer (a pipe read as a file blocks forever)."""
    def ring(signum, frame):
        raise _TookTooLong(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _snapshot(folder: Path) -> dict:
    """Every path under `folder` -> what it is: a file's digest and times, a link's target, a pipe's inode."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st = os.lstat(p)
            if p.is_symlink():
                out[p] = ("link", os.readlink(p))
            elif p.is_file():
                out[p] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_nlink)
            else:
                out[p] = ("other", st.st_mode, st.st_ino)
    return out


def refused(argv: list[str], capsys, folder: Path) -> str:
    """Run `compare argv`; assert exit 2 within SECONDS, one line without a traceback, and `folder`
    exactly as it was.  Returns the line."""
    before = _snapshot(folder)
    t0 = time.monotonic()
    with _deadline(SECONDS * 2):
        try:
            code = main(argv)
        except SystemExit as exc:   # argparse's own refusals
            code = exc.code
    took = time.monotonic() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert took < SECONDS, f"{took:.1f} s"
    assert _snapshot(folder) == before, "a file the user gave was changed, or one was left beside them"
    return err[0]


# -- files whose header lies -----------------------------------------------------

def _npy(shape, data: bytes, descr="<f4", version=(1, 0)) -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    header += " " * ((-len(header) - 11) % 64) + "\n"
    size = len(header).to_bytes(2 if version == (1, 0) else 4, "little")
    return b"\x93NUMPY" + bytes(version) + size + header.encode("latin1") + data


def _weights_with(tmp_path: Path, key: str, raw: bytes) -> Path:
    """LeNet's weights as an .npz whose array `key` is the .npy bytes `raw` (a forged header)."""
    import zipfile
    save_weights(tmp_path / "good.npz", init_weights(LENET, 0))
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(tmp_path / "good.npz") as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, raw if info.filename == f"{key}.npy" else src.read(info))
    (tmp_path / "good.npz").unlink()
    return path


@pytest.mark.parametrize("shape, words", [
    ((10**9, 1, 32, 32), ["claims shape (1000000000, 1, 32, 32)", "holds 4,096 bytes", "numpy.save"]),
    ((10**15, 1, 32, 32), ["claims shape (1000000000000000, 1, 32, 32)", "holds 4,096 bytes"]),
    ((2, 1, 32, 32), ["claims shape (2, 1, 32, 32)", "8,192 bytes", "holds 4,096 bytes"]),
    ((1, 1, 32), ["has shape (1, 1, 32); lenet takes (N, 1, 32, 32)"]),
])
def test_an_input_whose_header_lies_is_refused_before_allocating(tmp_path, capsys, shape, words):
    (tmp_path / "x.npy").write_bytes(_npy(shape, bytes(4096)))
    line = refused(["check", "--net", "lenet", "--backends", "numpy", "--input", str(tmp_path / "x.npy")],
                   capsys, tmp_path)
    assert line.startswith(f"error: input file {tmp_path / 'x.npy'}")
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("raw, words", [
    (_npy((6, 1, 5, 5), b"\0" * 16), ["array 'c1.weight'", "claims shape (6, 1, 5, 5)", "holds 16 bytes"]),
    (_npy((10**12, 1, 5, 5), b"\0" * 600), ["array 'c1.weight'", "has shape (1000000000000, 1, 5, 5), net lenet needs"]),
    (_npy((6, 1, 5, 5), b"\0" * 600, descr="|O"), ["array 'c1.weight'", "not numbers", "pickle"]),
    (b"\x93NUMPY\x01\x00\xff\xff{'descr'", ["array 'c1.weight'", "damaged .npy header"]),
])
def test_a_weights_array_whose_header_lies_is_refused_before_allocating(tmp_path, capsys, raw, words):
    path = _weights_with(tmp_path, "c1.weight", raw)
    line = refused(["check", "--net", "lenet", "--backends", "numpy", "--weights", str(path)], capsys, tmp_path)
    for word in words:
        assert word in line, line


def _onnx_model(tmp_path: Path, case: str) -> Path:
    """A one-node ONNX model on a (1, 1, 8, 8) input, spoilt as `case` says."""
    onnx = module_or_skip("onnx", "test")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    conv = {}
    nodes, inits = None, [w]
    if case == "short initializer":
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 1, 3, 3],
                        raw_data=np.ones(4, np.float32).tobytes())
        inits = [w]
    elif case == "vast initializer":
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[10**6, 10**6, 3, 3],
                        raw_data=np.ones(4, np.float32).tobytes())
        inits = [w]
    elif case == "negative dims":
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-2, 1, 3, 3],
                        raw_data=np.ones(18, np.float32).tobytes())
        inits = [w]
    elif case == "zero-sized filter":
        inits = [numpy_helper.from_array(np.ones((2, 1, 0, 0), np.float32), "w")]
    elif case == "zero stride":
        conv = {"strides": [0, 0]}
    elif case == "zero stride, same padding":
        conv = {"strides": [0, 1], "auto_pad": "SAME_UPPER"}
    elif case == "zero dilation":
        conv = {"dilations": [0, 1]}
    elif case == "zero groups":
        conv = {"group": 0}
    elif case == "zero-sized pool":
        nodes, inits = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[0, 0])], []
    elif case == "negative pool":
        nodes, inits = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[-2, -2])], []
    elif case == "zero pool stride, ceil mode":
        nodes, inits = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 0],
                                         ceil_mode=1, pads=[1, 1, 1, 1])], []
    elif case in ("negative epsilon", "variance below -epsilon"):
        eps, var = (-1.0, 1.0) if case == "negative epsilon" else (1e-5, -1.0)
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
                 helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=eps)]
        inits = [w] + [numpy_helper.from_array(np.full(2, v, np.float32), n)
                       for n, v in (("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", var))]
    elif case == "NaN alpha":
        nodes = [helper.make_node("Flatten", ["x"], ["f"]),
                 helper.make_node("Gemm", ["f", "g"], ["y"], alpha=float("nan"))]
        inits = [numpy_helper.from_array(np.ones((64, 3), np.float32), "g")]
    elif case == "perm out of range":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Transpose", ["c"], ["y"],
                                                                                perm=[0, 7, 2, 3])]
    nodes = nodes or [helper.make_node("Conv", ["x", "w"], ["y"], **conv)]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("case, words", [
    ("short initializer", ["initializer 'w' claims dims [2, 1, 3, 3] (18 elements) but holds 16 bytes", "export"]),
    ("vast initializer", ["initializer 'w' claims dims [1000000, 1000000, 3, 3]", "holds 16 bytes"]),
    ("negative dims", ["initializer 'w' claims dims [-2, 1, 3, 3]", "never negative"]),
    ("zero-sized filter", ["(Conv)", "weight has shape (2, 1, 0, 0), which holds no filter tap"]),
    ("zero stride", ["(Conv)", "strides must be (rows, cols), each at least 1; not (0, 0)"]),
    ("zero stride, same padding", ["(Conv)", "strides must be (rows, cols), each at least 1; not (0, 1)"]),
    ("zero dilation", ["(Conv)", "dilations must be (rows, cols), each at least 1; not (0, 1)"]),
    ("zero groups", ["(Conv)", "group 0 is no number of groups (at least 1)"]),
    ("zero-sized pool", ["(MaxPool)", "kernel_shape must be (rows, cols), each at least 1; not (0, 0)"]),
    ("negative pool", ["(MaxPool)", "kernel_shape must be (rows, cols), each at least 1; not (-2, -2)"]),
    ("zero pool stride, ceil mode", ["(AveragePool)", "strides must be (rows, cols), each at least 1"]),
    ("negative epsilon", ["(BatchNormalization)", "epsilon -1.0 is not a finite number, 0 or more"]),
    ("variance below -epsilon", ["batch normalisation", "var + epsilon is -0.99999 in channel 0, not positive"]),
    ("NaN alpha", ["(Gemm)", "alpha nan and beta 1.0 must be finite numbers"]),
    ("perm out of range", ["(Transpose)", "perm [0, 7, 2, 3] is not an order of the 4 dimensions"]),
])
def test_an_onnx_model_that_lies_or_is_degenerate_is_refused_naming_the_value(tmp_path, capsys, case, words):
    path = _onnx_model(tmp_path, case)
    line = refused(["check", "--net", str(path), "--backends", "numpy"], capsys, tmp_path)
    for word in words + ["export"]:   # the value, and what to do
        assert word in line, line


def _keras_file(tmp_path: Path, layer: dict) -> Path:
    """A .keras archive whose config.json holds one layer after the input, as a hand-edited file would: it is
    refused from the JSON alone, before Keras (or TensorFlow) is loaded."""
    import zipfile
    config = {"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": [
        {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 8, 8, 1],
                                                                          "name": "in"}},
        {"module": "keras.layers", "class_name": layer.pop("class_name"), "config": {"name": "bad", **layer}}]}}
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.0.0"}))
        z.writestr("config.json", json.dumps(config))
    return path


@pytest.mark.parametrize("layer, words", [
    ({"class_name": "Conv2D", "filters": 2, "kernel_size": [3, 3], "strides": [0, 0]},
     "layer bad (Conv2D): strides [0, 0] is not a window's size"),
    ({"class_name": "Conv2D", "filters": 2, "kernel_size": [0, 3]}, "kernel_size [0, 3] is not a window's size"),
    ({"class_name": "Conv2D", "filters": 0, "kernel_size": [3, 3]}, "filters 0 must be a whole number, at least 1"),
    ({"class_name": "Conv2D", "filters": 2, "kernel_size": 3, "dilation_rate": [1, 0]}, "dilation_rate [1, 0]"),
    ({"class_name": "MaxPooling2D", "pool_size": [-1, 2]}, "layer bad (MaxPooling2D): pool_size [-1, 2]"),
    ({"class_name": "AveragePooling2D", "pool_size": 2, "strides": 0}, "strides 0 is not a window's size"),
    ({"class_name": "Dense", "units": -3}, "layer bad (Dense): units -3 must be a whole number"),
    ({"class_name": "BatchNormalization", "epsilon": -1.0}, "epsilon -1.0 must be a finite number, 0 or more"),
    ({"class_name": "BatchNormalization", "epsilon": float("nan")}, "epsilon nan must be a finite number"),
])
def test_a_keras_model_with_degenerate_attributes_is_refused_before_keras_loads(tmp_path, capsys, layer, words):
    path = _keras_file(tmp_path, layer)
    line = refused(["check", "--net", str(path), "--backends", "numpy"], capsys, tmp_path)
    assert line.startswith(f"error: Keras model file {path}: ") and words in line, line
    assert "save the model again" in line


# -- an output over an input ---------------------------------------------------------

def _given_files(tmp_path: Path) -> dict:
    """A user's files: LeNet's weights, an input, and an ONNX model."""
    save_weights(tmp_path / "w.npz", init_weights(LENET, 0))
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 32, 32), np.float32))
    (tmp_path / "keep").mkdir()
    np.save(tmp_path / "keep" / "input.npy", np.zeros((2, 1, 32, 32), np.float32))
    os.symlink(tmp_path / "w.npz", tmp_path / "link.npz")
    os.link(tmp_path / "x.npy", tmp_path / "hard.npy")
    os.link(tmp_path / "w.npz", tmp_path / "keep" / "lenet-batch1.json")   # weights, oddly named
    return {"dir": tmp_path}


@pytest.mark.parametrize("argv, words", [
    (["check", "--net", "lenet", "--weights", "{dir}/w.npz", "--out", "{dir}/w.npz"],
     "--out {dir}/w.npz is the --weights file {dir}/w.npz: writing there would destroy it; give --out another"),
    (["run", "--net", "lenet", "--input", "{dir}/x.npy", "--out", "{dir}/x.npy"],
     "--out {dir}/x.npy is the --input file {dir}/x.npy"),
    (["run", "--net", "lenet", "--weights", "{dir}/w.npz", "--out", "{dir}/link.npz"],
     "--out {dir}/link.npz is the --weights file {dir}/w.npz"),
    (["run", "--net", "lenet", "--input", "{dir}/hard.npy", "--out", "{dir}/x.npy"],
     "--out {dir}/x.npy is the --input file {dir}/hard.npy"),
    (["check", "--net", "lenet", "--input", "{dir}/keep/input.npy", "--save-outputs", "{dir}/keep"],
     "--save-outputs {dir}/keep would get input.npy written into it, which is the --input file"),
    (["sweep", "--net", "lenet", "--batch", "1", "--weights", "{dir}/keep/lenet-batch1.json", "--out", "{dir}/keep"],
     "--out {dir}/keep would get lenet-batch1.json written into it, which is the --weights file"),
])
def test_an_output_over_an_input_is_refused_before_any_work(tmp_path, capsys, argv, words):
    names = _given_files(tmp_path)
    line = refused([a.format(**names) for a in argv] + ["--backends", "numpy"], capsys, tmp_path)
    assert words.format(**names) in line, line


def test_an_out_over_the_onnx_model_is_refused(tmp_path, capsys):
    path = _onnx_model(tmp_path, "zero groups")   # refused at import too: the clash is said first
    line = refused(["check", "--net", str(path), "--backends", "numpy", "--out", str(path)], capsys, tmp_path)
    assert line == f"error: --out {path} is the --net file {path}: writing there would destroy it; give --out " \
                   f"another file name"


def test_a_report_over_a_results_file_is_refused(tmp_path, capsys):
    (tmp_path / "report.md").write_text(json.dumps(small_results_dict()))   # a results file, oddly named
    line = refused(["report", str(tmp_path / "report.md"), "--out", str(tmp_path)], capsys, tmp_path)
    assert "would get report.md written into it, which is the results file" in line, line


# -- unbounded requests ---------------------------------------------------------------

def _special(tmp_path: Path, what: str, name: str) -> Path:
    path = tmp_path / name
    if what == "pipe":
        os.mkfifo(path)
    elif what == "zero device":
        os.symlink("/dev/zero", path)
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize("what, words", [("pipe", "is a named pipe, not a regular file, and is not read"),
                                         ("zero device", "is a character device, not a regular file, and is not "
                                                         "read")])
@pytest.mark.parametrize("argv, name", [
    (["report", "{path}", "--out", "{dir}/rep"], "r.json"),
    (["check", "--net", "lenet", "--backends", "numpy", "--input", "{path}"], "x.npy"),
    (["check", "--net", "lenet", "--backends", "numpy", "--weights", "{path}"], "w.npz"),
    (["check", "--net", "{path}", "--backends", "numpy"], "m.onnx"),
])
def test_a_pipe_or_a_device_given_as_a_file_is_never_read(tmp_path, capsys, what, words, argv, name):
    path = _special(tmp_path, what, name)
    line = refused([a.format(path=path, dir=tmp_path) for a in argv], capsys, tmp_path)
    assert f"{path} {words}" in line, line


def test_a_loop_of_links_given_as_a_file_is_called_one(tmp_path, capsys):
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    line = refused(["report", str(tmp_path / "a.json"), "--out", str(tmp_path / "rep")], capsys, tmp_path)
    assert f"results file {tmp_path / 'a.json'} is a loop of links, which leads to no file" in line, line


@pytest.mark.parametrize("argv, name, words", [
    (["check", "--net", "lenet", "--backends", "numpy", "--input", "{path}"], "x.npy",
     "input file {path} is a folder, not a file; give a .npy file"),
    (["check", "--net", "lenet", "--backends", "numpy", "--weights", "{path}"], "w.npz",
     "weights file {path} is a folder, not a file; `compare weights"),
])
def test_a_folder_given_as_a_file_is_called_a_folder(tmp_path, capsys, argv, name, words):
    path = _special(tmp_path, "folder", name)
    line = refused([a.format(path=path) for a in argv], capsys, tmp_path)
    assert words.format(path=path) in line, line


def test_a_results_file_nested_very_deep_is_one_line(tmp_path, capsys):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "deeper.json").write_text(json.dumps({**small_results_dict(), "host": json.loads("[" * 40 + "]" * 40)}))
    for name in ("deep.json", "deeper.json"):
        line = refused(["report", str(tmp_path / name), "--out", str(tmp_path / "rep")], capsys, tmp_path)
        assert f"results file {tmp_path / name} nests more than 32 levels deep" in line, line


@pytest.mark.parametrize("argv, words", [
    (["run", "--repeats", str(10**12)], ["--repeats 1000000000000 keeps", "timings a repeat", "fits"]),
    (["run", "--warmup", str(10**9)], ["--warmup 1000000000 is more untimed passes", "give at most 1000"]),
    (["sweep", "--batch", "1,2", "--repeats", str(10**12)], ["--repeats 1000000000000 keeps"]),
])
def test_absurd_repeats_and_warmups_are_refused_with_the_largest_that_fits(tmp_path, capsys, argv, words):
    out = ["--out", str(tmp_path / ("sweep" if argv[0] == "sweep" else "r.json"))]
    line = refused(argv + ["--net", "lenet", "--backends", "numpy"] + out, capsys, tmp_path)
    for word in words:
        assert word in line, line
    if argv[0] != "run" or "--repeats" not in argv:
        return
    largest = int(line.split("; --repeats ")[1].split()[0])   # the largest that fits is said, and it is > 0
    assert 0 < largest < 10**12


# -- values that should not be accepted ------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["run", "--net", "lenet", "--backends", "numpy", "--baseline", "clbast", "--out", "{dir}/r.json"],
     "--baseline names 'clbast', which is no backend: choose from best-clblast,"),
    (["run", "--net", "lenet", "--backends", "numpy", "--baseline", " , ", "--out", "{dir}/r.json"],
     "--baseline needs at least one backend name"),
    (["sweep", "--net", "lenet", "--backends", "numpy", "--batch", "1", "--baseline", "nope", "--out", "{dir}/s"],
     "--baseline names 'nope'"),
    (["report", "{dir}/good.json", "--baseline", "nope", "--out", "{dir}/rep"], "--baseline names 'nope'"),
    (["report", "{dir}/good.json", "--baseline", ",", "--out", "{dir}/rep"], "--baseline needs at least one"),
    (["run", "--net", "lenet", "--backends", "numpy,nope", "--out", "{dir}/r.json"], "unknown backend 'nope'"),
    (["run", "--net", "lenet", "--backends", "numpy", "--device", "no-such-device", "--out", "{dir}/r.json"],
     "no OpenCL device matches 'no-such-device'"),
])
def test_a_name_that_names_nothing_is_refused_before_any_work(tmp_path, capsys, argv, words):
    (tmp_path / "good.json").write_text(json.dumps(small_results_dict()))
    line = refused([a.format(dir=tmp_path) for a in argv], capsys, tmp_path)
    assert words in line, line


def _spoilt(path: list, value):
    def spoil(d):
        at = d
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
    return spoil


COMPUTE = ["backends", 0, "timing", "end_to_end", "compute"]


@pytest.mark.parametrize("spoil, words", [
    (_spoilt(COMPUTE + ["median"], float("nan")), "backends[0].timing.end_to_end.compute.median: is nan, not a finite"),
    (_spoilt(COMPUTE + ["values", 2], float("inf")), "compute.values[2]: is inf, not a finite number"),
    (_spoilt(COMPUTE + ["min"], -1.0), "compute.min: is -1.0, but it cannot be negative"),
    (_spoilt(["net", "flops"], -5), "net.flops: is -5, but it cannot be negative"),
    (_spoilt(["net", "layers", 0, "flops"], -1), "net.layers[0].flops: is -1, but it cannot be negative"),
    (_spoilt(["net", "batch"], 0), "net.batch: is 0; a run has one image or more"),
    (_spoilt(["settings", "repeats"], 0), "settings.repeats: is 0; a run times at least one pass"),
    (_spoilt(["peak", "gflops"], -10.0), "peak.gflops: is -10.0, but it cannot be negative"),
    (_spoilt(["net", "params"], "HUGE"), "is not a results file"),
])
def test_a_results_file_with_impossible_numbers_is_refused(tmp_path, capsys, spoil, words):
    d = small_results_dict()
    spoil(d)
    text = json.dumps(d).replace('"HUGE"', "9" * 5000)   # an integer of 5,000 digits (json.dumps refuses one)
    (tmp_path / "bad.json").write_text(text)
    line = refused(["report", str(tmp_path / "bad.json"), "--out", str(tmp_path / "rep")], capsys, tmp_path)
    assert words in line, line
    assert "bad.json" in line


def test_negative_overheads_are_a_measurement_not_a_damaged_file(tmp_path, capsys):
    """wall - kernel can come out below 0 where a driver's events overlap the host's clock: kept as it is."""
    d = small_results_dict()
    over = d["backends"][1]["timing"]["layers"][0]["overhead"]
    over.update(median=-0.25, min=-0.25, max=-0.25, q1=-0.25, q3=-0.25, values=[-0.25] * 5)
    (tmp_path / "r.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path / "r.json"), "--out", str(tmp_path / "rep")]) == 0, capsys.readouterr().err


# -- tuning stores -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[1,2,3]", "[]", "garbage", '{"schema": "clblast-compare/tinygrad-search"}'])
def test_tune_show_over_a_damaged_tinygrad_store_sets_it_aside_in_one_line(tmp_path, monkeypatch, capsys, text):
    """Was `AttributeError: 'list' object has no attribute 'get'`; the next tune would have overwritten it."""
    module_or_skip("tinygrad", "tinygrad")
    from backends.opencl.runtime import get_runtime
    from backends.tuning.tinygrad.session import store_for
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    path = store_for(get_runtime(None)).path
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert main(["tune", "--show", "--scope", "tinygrad", "--net", "lenet"]) == 0
    out, err = capsys.readouterr()
    aside = list(path.parent.glob("choices.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_text() == text and not path.exists()
    assert err.count("\n") == 1 and f"{path} was damaged" in err and aside[0].name in err, err
    assert "0 kernels searched" in " ".join(out.split()), out


# -- names are data -------------------------------------------------------------------------

FORGED = {"backend": "clblast\x1b[2J\x1b[H\nnumpy | 0.001 ms | 1000x faster", "net": "<script>alert(1)</script>*big*",
          "device": "GPU\r\x1b]0;owned\x07 [link](http://x)"}


def _forged(tmp_path: Path) -> Path:
    d = small_results_dict()
    d["backends"][1]["name"] = FORGED["backend"]
    d["net"]["name"] = FORGED["net"]
    d["device"]["name"] = FORGED["device"]
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(d))
    return path


def test_names_from_a_results_file_reach_the_terminal_escaped(tmp_path, capsys):
    path = _forged(tmp_path)
    for argv in (["answer", str(path)], ["answer", "--table", str(path)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert not any(c in out for c in "\x1b\r\x07"), out
        assert "clblast\\x1b[2J" in out and "GPU\\r\\x1b]0;owned\\x07" in out, out
        assert not any(line.startswith("numpy | 0.001") for line in out.splitlines()), "a forged row"


def test_names_from_a_results_file_are_escaped_in_the_markdown_and_html_pages(tmp_path, capsys):
    path = _forged(tmp_path)
    assert main(["report", str(path), "--out", str(tmp_path / "rep"), "--quiet"]) == 0
    capsys.readouterr()
    pages = {p.name: p.read_text() for p in (tmp_path / "rep").iterdir() if p.suffix in (".md", ".html")}
    assert len(pages) >= 4
    for name, text in pages.items():
        assert not re.search(r"(?<!\\)<script>", text) and "\x1b" not in text and "\r" not in text, name
        if name.endswith(".md"):   # in Markdown a name's brackets and stars are escaped; in HTML they are text
            assert not re.search(r"(?<!\\)\[link(?<!\\)\]\(http", text) and not re.search(r"(?<!\\)\*big", text)
        else:
            assert 'href="http://x"' not in text and "<em>big" not in text, name
    assert "\\<script>alert(1)\\</script>\\*big\\*" in pages["report.md"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;*big*" in pages["report.html"]
    assert main(["answer", "--markdown", str(path)]) == 0   # the README's table
    table = capsys.readouterr().out
    assert not re.search(r"(?<!\\)<script>", table) and "\\nnumpy \\| 0.001 ms \\| 1000x" in table, table


@pytest.mark.parametrize("spoil, words", [
    (lambda d: d.update(backends=[]), "holds no backend: nothing to report or answer"),
    (lambda d: d["backends"].append(dict(d["backends"][1])), "holds backend 'clblast' twice (backends[1] and [4])"),
])
@pytest.mark.parametrize("command", ["answer", "report"])
def test_a_results_file_with_nothing_to_answer_says_so(tmp_path, capsys, spoil, words, command):
    d = small_results_dict()
    spoil(d)
    (tmp_path / "r.json").write_text(json.dumps(d))
    out = ["--out", str(tmp_path / "rep")] if command == "report" else []
    line = refused([command, str(tmp_path / "r.json")] + out, capsys, tmp_path)
    assert words in line and "r.json" in line, line


def test_a_results_file_without_timings_has_nothing_to_answer(tmp_path, capsys):
    d = small_results_dict()
    d["mode"] = "correctness"
    for b in d["backends"]:
        b.pop("timing", None)
    (tmp_path / "r.json").write_text(json.dumps(d))
    line = refused(["answer", str(tmp_path / "r.json")], capsys, tmp_path)
    assert "times no backend (mode 'correctness'; OK, UNAVAILABLE): nothing to answer" in line, line


# -- bounds ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["tune", "--net", "lenet", "--budget-s", "inf"], "--budget-s must be a finite number of seconds from 1 to "
                                                      "2,592,000, not inf"),
    (["tune", "--net", "lenet", "--budget-s", "1e308"], "--budget-s must be a finite number of seconds"),
    (["tune", "--net", "lenet", "--budget-s", "nan"], "not nan"),
    (["tune", "--net", "lenet", "--jobs", "100000"], "--jobs must be a whole number from 1 to 1,024, not 100000"),
    (["tune", "--net", "lenet", "--beam-width", "-1"], "--beam-width must be a whole number from 1"),
    (["run", "--net", "lenet", "--timeout-s", "inf"], "--timeout-s must be a finite number of seconds from 0.001"),
    (["check", "--net", "lenet", "--timeout-s", "1e-9"], "--timeout-s must be a finite number of seconds from 0.001"),
    (["sweep", "--net", "lenet", "--timeout-s", "1e400"], "--timeout-s must be a finite number of seconds"),
    (["run", "--net", "lenet", "--peak-gflops", "inf"], "--peak-gflops must be a finite number of GFLOP/s"),
    (["run", "--net", "lenet", "--warmup", "-1"], "--warmup must be a whole number from 0"),
    (["run", "--net", "lenet", "--batch", "1e3"], "--batch must be a whole number from 1 to 2,147,483,647, not '1e3'"),
    (["peak", "--cap-s", "inf"], "--cap-s must be a finite number of seconds from 1 to 86,400, not inf"),
])
def test_every_numeric_option_is_finite_and_within_its_stated_range(tmp_path, capsys, argv, words):
    line = refused(argv, capsys, tmp_path)
    assert words in line, line


def test_check_keeps_the_timeout_as_run_does(tmp_path, capsys):
    """Was: `check --timeout-s` applied to no pass (check runs one, and only timed passes were held to it)."""
    # LeNet-5 at batch 1000 is 400 MFLOP on the host: no machine does a pass of it in a millisecond
    code = main(["check", "--net", "lenet", "--backends", "numpy", "--batch", "1000", "--timeout-s", "0.001",
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "the first pass took" in err and "more than --timeout-s 0.001" in err, err


# -- leaks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("config, shape", [([1, 2, 3], "a list"), ({"config": {}}, "an object without 'class_name'"),
                                           ("model", "a str")])
def test_a_keras_config_that_is_not_a_model_is_refused_in_one_line(tmp_path, capsys, config, shape):
    import zipfile
    path = tmp_path / "model.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.0.0"}))
        z.writestr("config.json", json.dumps(config))
    line = refused(["check", "--net", str(path), "--backends", "numpy"], capsys, tmp_path)
    assert line == (f"error: Keras model file {path}: its configuration is {shape}, not a model's (an object naming "
                    f"its class); the file was damaged or edited: save the model again"), line


@pytest.mark.parametrize("name", ["base.onnx", "model.keras", "old.H5"])
def test_weights_of_a_model_file_are_refused_as_what_they_are(tmp_path, capsys, name):
    line = refused(["weights", "--net", name, "--out", str(tmp_path / "w.npz")], capsys, tmp_path)
    assert line.startswith(f"error: --net {name} is a model file: `compare weights` writes the seeded weights of a "
                           f"built-in net (lenet, vgg16"), line
    assert "unknown net" not in line
