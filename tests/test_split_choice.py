"""`vectorised-tiled`'s split sums chosen by measuring (split_choice.py): where
the plan splits a conv's sum, the same tile in one kernel is timed against
it with its launches and the faster runs; both outcomes forced here, each
checked against the float64 oracle with its steps named."""
import numpy as np
import pytest

from backends.handwritten import split_choice, tiled
from backends.handwritten.tiled_plan import plan_conv
from compare import oracle
from compare.checking import check_prepared
from nets import Add, Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import backend_or_skip

# a 3x3 conv, then one whose add is folded into its (or its adding kernel's) epilogue
NET = Net("t", (12, 9, 7), (
    Conv("a", "relu", out_channels=20, kernel=(3, 3), pad=(1, 1)),
    Conv("b", "none", out_channels=20, kernel=(3, 3), stride=(1, 1), pad=(1, 1)),
    Add("add", "relu6", inputs=("b", "a")),
    GlobalAvgPool("gap")))


@pytest.mark.parametrize("split_wins", [True, False])
def test_the_faster_of_split_and_one_kernel_runs(monkeypatch, split_wins):
    runtime = backend_or_skip("vectorised-tiled").runtime
    # planned as for a GPU with many compute units, so that these small layers split their sums
    monkeypatch.setattr(tiled, "plan_conv", lambda p, c, ci, t, _cu, _gpu, *rest: plan_conv(p, c, ci, t, 10_000,
                                                                                            True, *rest))
    timed = []

    def fastest(rt, forms):
        timed.append(sorted(forms))
        return {f: float((f == "one kernel") == split_wins) for f in forms}
    monkeypatch.setattr(split_choice, "fastest_ms", fastest)
    weights = init_weights(NET, 4)
    x = np.random.default_rng(4).standard_normal((2,) + NET.input_shape).astype(np.float32)
    prepared = tiled.TiledNet(runtime, NET, weights, 2, winograd="never", cpu_conv="never")
    try:
        assert check_prepared(prepared, x, oracle.forward(NET, weights, x)).status == "PASS"
        record = prepared.config["split_sums"]
        assert set(record) == {"a", "b"} and len(timed) == 2 and all(len(t) == 2 for t in timed)
        for name in ("a", "b"):
            split = prepared.config["layers"][name]["split"]
            assert (split > 1) == split_wins and record[name]["chosen"] == (
                f"{split} parts + adding kernel" if split_wins else "one kernel")
        if prepared.rt.profiling_ok:   # named steps come from device events (rusticl has none)
            prepared.load_input(x)
            steps = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
            split = prepared.config["layers"]["b"]["split"]
            assert steps["b"] == (["tiled conv", f"add {split} parts+add+relu6"] if split_wins
                                  else ["tiled conv+add+relu6"])
    finally:
        prepared.close()


def test_a_forced_split_is_not_measured(monkeypatch):
    runtime = backend_or_skip("vectorised-tiled").runtime
    monkeypatch.setattr(split_choice, "fastest_ms", lambda *a: pytest.fail("a forced split was measured"))
    weights = init_weights(NET, 5)
    prepared = tiled.TiledNet(runtime, NET, weights, 1, ksplit=2, winograd="never")
    try:
        assert "split_sums" not in prepared.config and prepared.config["layers"]["a"]["split"] == 2
    finally:
        prepared.close()
