"""Forms measured once by `compare tune --scope forms` and built from the
device's forms cache at prepare (backends/handwritten/forms_tuned.py,
backends/tuning/forms/, winograd.py's recall): the search keeps what a
prepare chose, a run builds only that form (checked against the direct
kernel, and the net against the float64 oracle, at shapes the nets do not
have), a recorded form that no longer builds or matches is measured again
and says so, and a net whose output fails keeps nothing."""
import numpy as np
import pytest

from backends import cache
from backends.handwritten import winograd
from backends.handwritten.forms_tuned import KIND, TunedForms, form_key
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.tuning.budget import Budget
from backends.tuning.forms import search
from compare import device_cache, oracle
from compare.checking import check_prepared
from nets import Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import backend_or_skip

NETS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}


def _net(seed: int) -> tuple[Net, int]:
    """Two 3x3 stride-1 convs (Winograd's layers) and a head, at a random shape."""
    rng = np.random.default_rng(seed)
    c, k, h, w = (int(v) for v in rng.integers((1, 1, 4, 4), (20, 20, 13, 13)))
    return Net(f"forms{seed}", (c, h, w), (
        Conv("a", "relu", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        GlobalAvgPool("gap"))), int(rng.integers(1, 3))


def _oracle_checker(net, weights, x):
    ref = oracle.forward(net, weights, x)[-1]
    return lambda y: bool(np.allclose(y, ref, rtol=1e-4, atol=1e-5))


@pytest.fixture
def rt(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    return backend_or_skip("vectorised").runtime


def _recalled(rt) -> TunedForms:
    return TunedForms.for_device(rt.info)


@pytest.mark.parametrize("backend", sorted(NETS))
def test_a_run_builds_the_form_the_tune_measured(rt, backend):
    net, batch = _net(11 if backend == "vectorised" else 12)
    entry, rows, said = search.tune_forms(rt, [(net, batch, [backend])], Budget(60), _oracle_checker)
    assert not said and len(rows) == 1
    keys = {form_key(backend, batch, net.in_shape(i), net.layers[i]) for i in (0, 1)}
    assert set(entry["winograd"]) == keys
    device_cache.store(KIND, rt.info, entry, "the forms' cache", merge=search.merged)

    weights = init_weights(net, 3)
    x = np.random.default_rng(3).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = NETS[backend](rt, net, weights, batch, recalled=_recalled(rt))
    try:
        assert check_prepared(prepared, x, oracle.forward(net, weights, x)).status == "PASS"
        for i, name in ((0, "a"), (1, "b")):
            record = prepared.config["winograd"][name]
            assert record["chosen"] == entry["winograd"][form_key(backend, batch, net.in_shape(i), net.layers[i])]
            assert record["how"].startswith("measured by `compare tune --scope forms`")
            assert "ms" not in record   # nothing timed at this prepare
    finally:
        prepared.close()


@pytest.mark.parametrize("form, why", [("F(4x4,3x3) GEMM 999x999 (1x1)", "no longer among"),
                                       ("F(7x7,3x3)", "not a Winograd form"),
                                       ("F(2x2,3x3)", "above")])
def test_a_recorded_form_that_no_longer_holds_is_measured_again(rt, monkeypatch, form, why):
    net, batch = _net(13)
    device_cache.store(KIND, rt.info, {"winograd": {form_key("vectorised", batch, net.in_shape(0), net.layers[0]): form}},
                       "the forms' cache")
    if why == "above":
        monkeypatch.setattr(winograd, "MAX_REL_L2", 0.0)   # every Winograd form now differs too much
    weights = init_weights(net, 1)
    x = np.random.default_rng(1).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = VectorisedNet(rt, net, weights, batch, recalled=_recalled(rt), cpu_conv="never")
    try:
        record = prepared.config["winograd"]["a"]
        assert why in record["not_recalled"] and "ms" in record   # measured, as with nothing recorded
        assert "not_recalled" not in prepared.config["winograd"]["b"]   # b had nothing recorded
        assert check_prepared(prepared, x, oracle.forward(net, weights, x)).status == "PASS"
    finally:
        prepared.close()


def test_a_recorded_direct_kernel_is_kept_without_measuring(rt):
    net, batch = _net(14)
    device_cache.store(KIND, rt.info, {"winograd": {form_key("vectorised", batch, net.in_shape(1), net.layers[1]):
                                                    "direct"}}, "the forms' cache")
    prepared = VectorisedNet(rt, net, init_weights(net, 0), batch, recalled=_recalled(rt))
    try:
        assert prepared.config["winograd"]["b"] == {"chosen": "direct", "how": _recalled(rt).how()}
        assert "ms" in prepared.config["winograd"]["a"]   # not recorded: measured
    finally:
        prepared.close()


def test_a_tune_goes_on_where_the_last_stopped_and_keeps_what_it_measured(rt):
    """A pair (backend, net) measured and kept is not measured again; the others are, and both are kept."""
    net, batch = _net(16)
    first, rows, said = search.tune_forms(rt, [(net, batch, ["vectorised"])], Budget(60), _oracle_checker)
    label = search.pair_label("vectorised", net, batch)
    assert list(first["measured"]) == [label] and len(rows) == 1
    device_cache.store(KIND, rt.info, first, "the forms' cache", merge=search.merged)
    kept = _recalled(rt).entry
    second, rows, said = search.tune_forms(rt, [(net, batch, ["vectorised", "vectorised-tiled"])], Budget(60),
                                           _oracle_checker, kept=kept)
    assert [r[1] for r in rows] == ["vectorised-tiled"] and label in said[0] and "measure again" in said[0]
    both = search.merged(kept, second)
    assert set(both["measured"]) == {label, search.pair_label("vectorised-tiled", net, batch)}
    assert set(first["winograd"]) <= set(both["winograd"])


def test_a_net_whose_output_fails_keeps_nothing(rt):
    net, batch = _net(15)
    entry, rows, said = search.tune_forms(rt, [(net, batch, ["vectorised"])], Budget(60),
                                          lambda net, weights, x: lambda y: False)
    assert entry["winograd"] == {} and rows == [] and "failed the check against float64" in said[0]


def test_another_nets_forms_stay_when_one_is_tuned_again():
    assert search.merged({"winograd": {"x": "direct", "y": "F(2x2,3x3)"}, "offered": {"x": ["direct"]}},
                         {"tuned": "t", "winograd": {"y": "direct"}, "offered": {"y": ["direct", "F(2x2,3x3)"]}}) \
        == {"tuned": "t", "winograd": {"x": "direct", "y": "direct"},
            "offered": {"x": ["direct"], "y": ["direct", "F(2x2,3x3)"]}, "measured": {}}
    assert cache.ENTRY_CHECKS[KIND].startswith("backends.handwritten.forms_tuned")


def test_a_form_added_since_the_record_was_made_has_the_layer_measured_again(rt):
    """The record keeps the forms each layer's was chosen from; where this code offers one it did not have (a
    form added since, as the CPU's vector GEMM was), the layer is measured again and says why."""
    net, batch = _net(15)
    entry, _, _ = search.tune_forms(rt, [(net, batch, ["vectorised"])], Budget(60), _oracle_checker)
    keys = [form_key("vectorised", batch, net.in_shape(i), net.layers[i]) for i in (0, 1)]
    assert all("direct" in entry["offered"][k] and len(entry["offered"][k]) > 1 for k in keys)
    dropped = entry["offered"][keys[0]][-1] if entry["offered"][keys[0]][-1] != "direct" else entry["offered"][keys[0]][0]
    entry["offered"][keys[0]] = [f for f in entry["offered"][keys[0]] if f != dropped]   # as if made before it
    device_cache.store(KIND, rt.info, entry, "the forms' cache")
    prepared = VectorisedNet(rt, net, init_weights(net, 0), batch, recalled=_recalled(rt))
    try:
        a, b = prepared.config["winograd"]["a"], prepared.config["winograd"]["b"]
        assert f"chosen before {dropped} existed" in a["not_recalled"] and "ms" in a   # measured again
        assert "not_recalled" not in b and "ms" not in b   # b's record knew every form: built as recorded
    finally:
        prepared.close()
