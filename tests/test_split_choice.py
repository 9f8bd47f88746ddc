"""`vectorised-tiled`'s split sums chosen by measuring (split_choice.py): where
the plan splits a conv's sum, the same tile in one kernel and the same split
added by each tile's last work-group are timed against it with their
launches and the fastest runs; each outcome forced here, checked against the
float64 oracle over several passes with its steps named."""
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


WINNERS = {"adding kernel": "{k} parts + adding kernel", "last adds": "{k} parts, the last work-group adds",
           "one kernel": "one kernel"}
MARKS = {"adding kernel": "adding kernel", "last adds": "last work-group", "one kernel": "one kernel"}   # in its name


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("winner", list(WINNERS))
def test_the_fastest_of_split_last_adds_and_one_kernel_runs(monkeypatch, winner, batch):
    runtime = backend_or_skip("vectorised-tiled").runtime
    # planned as for a GPU with many compute units, so that these small layers split their sums
    monkeypatch.setattr(tiled, "plan_conv", lambda p, c, ci, t, _cu, _gpu, *rest: plan_conv(p, c, ci, t, 10_000,
                                                                                            True, *rest))
    timed = []

    def fastest(rt, forms):
        timed.append(sorted(forms))
        return {f: float(MARKS[winner] not in f) for f in forms}
    monkeypatch.setattr(split_choice, "fastest_ms", fastest)
    weights = init_weights(NET, 4 + batch)
    rng = np.random.default_rng(4 + batch)
    prepared = tiled.TiledNet(runtime, NET, weights, batch, winograd="never", cpu_conv="never")
    try:
        for _ in range(3):   # fresh inputs each pass: the last-adds counts start each pass at 0 again
            x = rng.standard_normal((batch,) + NET.input_shape).astype(np.float32)
            assert check_prepared(prepared, x, oracle.forward(NET, weights, x)).status == "PASS"
        record = prepared.config["split_sums"]
        assert set(record) == {"a", "b"} and len(timed) == 2 and all(len(t) == 3 for t in timed)
        for name in ("a", "b"):
            split = prepared.config["layers"][name]["split"]
            assert (split > 1) == (winner != "one kernel")
            assert record[name]["chosen"] == WINNERS[winner].format(k=split)
        if prepared.rt.profiling_ok:   # named steps come from device events (rusticl has none)
            prepared.load_input(x)
            steps = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
            split = prepared.config["layers"]["b"]["split"]
            assert steps["b"] == {"adding kernel": ["tiled conv", f"add {split} parts+add+relu6"],
                                  "last adds": [f"tiled conv ({split} parts, the last adds)+add+relu6"],
                                  "one kernel": ["tiled conv+add+relu6"]}[winner]
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


def test_a_last_adds_form_that_reads_a_part_too_early_is_refused_at_prepare(monkeypatch):
    """Its counts started at 1, each tile's sum is added one work-group early, before a part is written: the
    output on random inputs is not the adding kernel's, so the next fastest form runs, and says why."""
    runtime = backend_or_skip("vectorised-tiled").runtime
    monkeypatch.setattr(tiled, "plan_conv", lambda p, c, ci, t, _cu, _gpu, *rest: plan_conv(p, c, ci, t, 10_000,
                                                                                            True, *rest))
    monkeypatch.setattr(split_choice, "fastest_ms",
                        lambda rt, forms: {f: 0.0 if "last work-group" in f else 1.0 for f in forms})
    made = tiled.TiledNet.tiled_op

    def early(self, *args, **kwargs):
        op = made(self, *args, **kwargs)
        if op.last_adds:
            counts = op.args[-2]
            self.rt.write(counts, np.ones(counts.size // 4, np.int32))
        return op
    monkeypatch.setattr(tiled.TiledNet, "tiled_op", early)
    weights = init_weights(NET, 9)
    x = np.random.default_rng(9).standard_normal((1,) + NET.input_shape).astype(np.float32)
    prepared = tiled.TiledNet(runtime, NET, weights, 1, winograd="never", cpu_conv="never")
    try:
        assert check_prepared(prepared, x, oracle.forward(NET, weights, x)).status == "PASS"
        for name in ("a", "b"):
            record = prepared.config["split_sums"][name]
            split = prepared.config["layers"][name]["split"]
            assert record["chosen"] == f"{split} parts + adding kernel"
            assert "was not the adding kernel's" in record["refused"][f"{split} parts, the last work-group adds"]
    finally:
        prepared.close()


@pytest.mark.parametrize("platform, kind, offered", [
    ("NVIDIA CUDA", "ALL | GPU", True),
    ("Portable Computing Language", "ALL | CPU", True),
    ("Oclgrind", "ALL | CPU", False),   # it models OpenCL 1.2, where the form's reads are a race
    ("AMD Accelerated Parallel Processing", "ALL | GPU", False),
    ("Portable Computing Language", "ALL | GPU", False),
])
def test_the_last_adds_form_is_offered_only_where_its_reads_are_defined(monkeypatch, platform, kind, offered):
    assert (split_choice.last_adds_refused({"platform": platform, "type": kind}) is None) == offered
    runtime = backend_or_skip("vectorised-tiled").runtime
    monkeypatch.setattr(tiled, "plan_conv", lambda p, c, ci, t, _cu, _gpu, *rest: plan_conv(p, c, ci, t, 10_000,
                                                                                            True, *rest))
    monkeypatch.setattr(tiled, "last_adds_refused", lambda info: split_choice.last_adds_refused(
        {"platform": platform, "type": kind}))
    timed = []
    monkeypatch.setattr(split_choice, "fastest_ms", lambda rt, forms: timed.append(sorted(forms)) or
                        {f: float("last work-group" not in f) for f in forms})
    weights = init_weights(NET, 11)
    prepared = tiled.TiledNet(runtime, NET, weights, 1, winograd="never", cpu_conv="never")
    try:
        assert all(any("last work-group" in f for f in forms) == offered for forms in timed) and timed
        assert ("split_sums_last_adds" in prepared.config) != offered
    finally:
        prepared.close()
