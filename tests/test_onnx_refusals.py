"""Issue 56 item 6 and issue 54's bounds: an ONNX graph ONNX itself rejects is never run, and a graph whose
index ops do not fit, or whose reshape mixes the images of its batch, is refused; each through the command
line as tests/test_hostile_inputs.py does: exit 2, one line naming the problem and what to do."""
from __future__ import annotations

import numpy as np
import pytest

from test_hostile_inputs import refused
from conftest import module_or_skip

onnx = module_or_skip("onnx", "onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(tmp_path, nodes, inits, batch=1, shape=(3, 4, 4)):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch,) + shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


CONV = {"w": np.ones((4, 3, 1, 1), np.float32)}


def _case(tmp_path, case: str):
    conv = helper.make_node("Conv", ["x", "w"], ["c"])
    if case == "256 values to [3, -1]":   # ONNX's data propagation: 256 does not divide by 3
        return _save(tmp_path, [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Reshape", ["f", "s"],
                                                                                             ["y"])],
                     {"s": np.array([3, -1], np.int64)}, shape=(1, 16, 16))
    if case == "two nodes write one tensor":
        return _save(tmp_path, [conv, helper.make_node("Relu", ["c"], ["y"]), helper.make_node("Sigmoid", ["c"], ["y"])],
                     CONV)
    if case == "batch 0":
        return _save(tmp_path, [conv, helper.make_node("Relu", ["c"], ["y"])], CONV, batch=0)
    # the transformer part: channels-last tokens (N, H, W, C) of a 1x1 convolution
    last = [conv, helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1])]
    if case == "gather past the end":
        return _save(tmp_path, last + [helper.make_node("Gather", ["t", "i"], ["g"], axis=1),
                                       helper.make_node("MatMul", ["g", "m"], ["y"])],
                     {**CONV, "i": np.array([0, 9], np.int64), "m": np.ones((4, 4), np.float32)})
    if case == "a reshape that mixes images":   # (2, 4, 4, 4) -> (4, 4, 2, 4) -> rows of both images' channels
        return _save(tmp_path, last + [helper.make_node("Transpose", ["t"], ["u"], perm=[1, 2, 0, 3]),
                                       helper.make_node("Reshape", ["u", "s"], ["r"]),
                                       helper.make_node("MatMul", ["r", "m"], ["y"])],
                     {**CONV, "s": np.array([16, 8], np.int64), "m": np.ones((8, 8), np.float32)}, batch=2)
    raise AssertionError(case)


@pytest.mark.parametrize("case, words", [
    ("256 values to [3, -1]", ["ONNX's own checks reject the model", "Reshape", "export it again"]),
    ("two nodes write one tensor", ["ONNX's own checks reject the model", "single static assignment", "'y'",
                                    "export it again"]),
    ("batch 0", ["declares a batch of 0", "export the model with a batch of 1 or more"]),
    ("gather past the end", ["(Gather)", "indices 0..9 of an axis of 4", "export it again"]),
    ("a reshape that mixes images", ["(MatMul)", "mixes the images of the batch", "export with a dynamic batch"]),
])
def test_a_graph_onnx_rejects_or_that_does_not_fit_is_refused_in_one_line(tmp_path, capsys, case, words):
    path = _case(tmp_path, case)
    line = refused(["check", "--net", str(path), "--backends", "numpy"], capsys, tmp_path)
    for word in words:
        assert word in line, line
