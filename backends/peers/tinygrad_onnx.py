"""The `tinygrad` peer's `searched-onnx` mode: the searched schedules run through tinygrad's own recipe for a
model, as a user of tinygrad runs one exported from a framework.

The net is written as ONNX by the writer the `opencv` peer uses (opencv_onnx.net_model, our weights in it)
and read by tinygrad's `OnnxRunner`; the peer (tinygrad_peer.TinygradNet) captures its pass in one TinyJit
on the peer's device: the same recipe as benchmarks/tinygrad_own.py's `own`.  The runner times this mode
beside `searched` in the same run and keeps the faster, so the peer is never slower than tinygrad's own way
of running a model, whatever our graph walk costs.  A net the writer has no ONNX for (Swin's windowed
attention) says UNSUPPORTED.

Per layer (the layer-wise check, the per-layer table) the peer runs its own layer graphs, as in `searched`:
tinygrad's ONNX ops give no layer boundaries to time."""
from __future__ import annotations

import tempfile
from pathlib import Path

from .opencv_onnx import INPUT, net_model

RECIPE = ("tinygrad's own recipe for a model: the net written as ONNX (the opencv peer's writer), "
          "tinygrad.nn.onnx.OnnxRunner in one TinyJit")


class OnnxRecipe:
    """The net as an ONNX model in tinygrad's OnnxRunner (its weights loaded on tinygrad's default device, the
    child's: tinygrad_device.Child)."""

    def __init__(self, model: bytes):
        from tinygrad.nn.onnx import OnnxRunner
        with tempfile.TemporaryDirectory(prefix="tinygrad-onnx-") as folder:
            path = Path(folder) / "model.onnx"
            path.write_bytes(model)
            self._runner = OnnxRunner(path)   # reads the file whole here
        self._output = self._runner.graph_outputs[0]
        self.config = {"jit": RECIPE, "onnx_bytes": len(model)}

    @classmethod
    def for_net(cls, net, weights, batch: int) -> "OnnxRecipe":
        """Our net with its weights as ONNX (Unsupported where none can be written)."""
        return cls(net_model(net, weights, batch))

    def forward(self, x):
        """The pass, as the TinyJit captures it."""
        return self._runner({INPUT: x})[self._output]
