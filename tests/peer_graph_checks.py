"""One check of a peer on a graph net, in every mode it lists here: what
`compare check` does (end to end, and each layer on the oracle's inputs),
then the per-layer timed pass and every layer's output of one pass, each
against the float64 oracle.  Shared by the built-in nets' tests and the
random graphs' (tests/test_peer_graphs.py, tests/test_random_graphs.py)."""
from __future__ import annotations

import numpy as np

from compare import oracle
from compare.checking import check_prepared, compare_arrays
from nets import Add, Conv, Dense, GlobalAvgPool, MaxPool, Net

# the graph nets' kinds in one small net: residual adds, depthwise and grouped convolutions with asymmetric
# padding, a padded max-pool, the global average pool, relu6 and tanh, a dense layer after
GRAPH = Net("g", (4, 11, 9), (
    Conv("stem", "relu6", out_channels=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    MaxPool("pool", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    Conv("dw", "relu6", out_channels=8, kernel=(3, 3), pad=(1, 0, 1, 2), groups=8),
    Conv("pw", "none", out_channels=8, kernel=(1, 1)),
    Add("res", "relu", inputs=("pool", "pw")),
    Conv("grouped", "tanh", out_channels=8, kernel=(1, 1), groups=2),
    GlobalAvgPool("gap"),
    Dense("fc", "none", out_features=5),
))


def check_every_mode(backend, net, weights: dict, x: np.ndarray) -> list[str]:
    """Assert that every mode of `backend` matches the oracle on `x`; the modes checked."""
    ref = oracle.forward(net, weights, x)
    modes = backend.modes() or [None]
    last = None
    for mode in modes:
        try:
            prepared = backend.prepare(net, weights, len(x), mode=mode)
        finally:   # the last mode's net closed only now: a replay mode is the plain pass recorded, as in `compare run`
            if last is not None:
                last.close()
        last = prepared
        try:
            check = check_prepared(prepared, x, ref)
            failed = [r.name for r in check.layers if not r.passed]
            assert check.status == "PASS", (mode, check.end_to_end, failed)
            prepared.load_input(x)
            timings = prepared.run_timed()
            assert [t.name for t in timings] == [layer.name for layer in net.layers], mode
            assert compare_arrays(prepared.fetch_output(), ref[-1]).passed, (mode, "run_timed")
            outs = prepared.layer_outputs(x)
            assert len(outs) == len(net.layers), mode
            for layer, out, want in zip(net.layers, outs, ref):
                assert compare_arrays(out, want).passed, (mode, "layer_outputs", layer.name)
        except BaseException:
            prepared.close()
            raise
    last.close()
    return modes
