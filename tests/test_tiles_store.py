"""The tiles' cache keeps every net's layers: a tune of one net adds its layers to the device's
entry instead of replacing the layers another net's tune measured (the H200's five nets are
tuned one net per GPU, into one file)."""
from __future__ import annotations

import json

from backends import cache
from backends.tuning.tiles.search import merged
from backends.store import DeviceId
from compare import device_cache

INFO = {"platform": "P", "name": "D", "driver": "1"}


def _layer(ms: float) -> dict:
    return {"tile": [64, 64, 8, 8], "ksplit": 1, "ms": ms}


def _entry(layers: dict) -> dict:
    return {"device": "D", "tuned": "now", "budget_s": 1.0, "took_s": 0.5,
            "layers": {key: _layer(ms) for key, ms in layers.items()}}


def test_a_second_net_keeps_the_first_nets_layers(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    device_cache.store("tiles", INFO, _entry({"a": 1.0, "shared": 3.0}), merge=merged)
    device_cache.store("tiles", INFO, _entry({"b": 2.0, "shared": 2.5}), merge=merged)
    layers = json.loads(cache.path("tiles").read_text())[DeviceId.of(INFO).key]["layers"]
    assert layers == {"a": _layer(1.0), "b": _layer(2.0), "shared": _layer(2.5)}   # the newer timing wins


def test_a_foreign_entry_is_replaced_not_merged():
    new = _entry({"b": 2.0})
    assert merged(None, new) == new
    assert merged({"layers": [1, 2]}, new) == new
