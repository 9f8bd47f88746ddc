"""Every tuning store, every kind of damage (issue 56): a store of garbage,
of the wrong JSON types or of the wrong fields is set aside beside itself
with its date, named in one line on stderr, never overwritten; the next
write starts afresh beside it.  And every store committed under
reports/*/tuning loads as it is, nothing set aside."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from backends import cache
from backends.clblast import problems
from backends.clblast.record import NetChoice, Store
from backends.peers.opencv_tuning import Tuning
from backends.peers.tinygrad_choices import Choice, ChoiceStore, Choices, KernelKey
from backends.store import DeviceId
from compare import device_cache
from nets import LENET
from test_tune import DEVICE, verified_record

REPORTS = Path(__file__).resolve().parent.parent / "reports"
TINY = DeviceId("dev", "plat", "1.0", tinygrad="0.14.0")
INFO = {"platform": "plat", "name": "dev", "driver": "1.0"}
TILES = {"layers": {"n1 in1x8x8 k2 w3x3 s1x1 p0x0": {"tile": [16, 16, 4, 4], "ksplit": 1}}}


@dataclass
class Kind:
    """One store: its file, how it is read (what a read found: falsy when nothing) and written afresh."""

    path: Callable[[Path], Path]
    load: Callable[[Path], object]
    save: Callable[[Path], None]
    wrong_type: Callable[[], str]   # a document of the store's schema with one field of the wrong type


def _choice() -> Choice:
    return Choice(KernelKey(2, "ab", True, ""), [["UPCAST", 0, 4]], "r_1", 1.0, 2.0, 1.5)


def _tiny_wrong_type() -> str:
    d = Choices(TINY, {"k": _choice()}).to_json()
    d["kernels"][0]["search_s"] = "slow"
    return json.dumps(d)


def _record_wrong_type() -> str:
    d = verified_record(problems.gemm(4, 8, 16), {"database": 0.5}).to_json()
    d["stages"] = "none"
    return json.dumps(d)


NET = NetChoice("lenet batch 1", ["k"], "now", {"Xgemm": {"sets": [], "ms": 1.0, "database_ms": 2.0}})

STORES = {
    "tinygrad choices": Kind(lambda root: ChoiceStore(TINY, root).path,
                             lambda root: ChoiceStore(TINY, root).load().kernels,
                             lambda root: ChoiceStore(TINY, root).save(Choices(TINY, {"k": _choice()})),
                             _tiny_wrong_type),
    "clblast record": Kind(lambda root: Store(DEVICE, root)._path(problems.gemm(4, 8, 16)),
                           lambda root: Store(DEVICE, root).load(problems.gemm(4, 8, 16)),
                           lambda root: Store(DEVICE, root).save(verified_record(problems.gemm(4, 8, 16),
                                                                                 {"database": 0.5})),
                           _record_wrong_type),
    "clblast net choice": Kind(lambda root: Store(DEVICE, root)._net_path(NET.net),
                               lambda root: Store(DEVICE, root).load_net(NET.net),
                               lambda root: Store(DEVICE, root).save_net(NET),
                               lambda: json.dumps({**NET.to_json(), "problems": 7})),
    "tiles cache": Kind(lambda root: cache.path("tiles"), lambda root: cache.load("tiles"),
                        lambda root: device_cache.store("tiles", INFO, TILES),
                        lambda: json.dumps({DeviceId.of(INFO).key: {"layers": {"k": {"tile": "big", "ksplit": 1}}}})),
    "forms cache": Kind(lambda root: cache.path("forms"), lambda root: cache.load("forms"),
                        lambda root: device_cache.store("forms", INFO, {"winograd": {"k": "direct"}}),
                        lambda: json.dumps({DeviceId.of(INFO).key: {"winograd": {"k": 3}}})),
    "peak cache": Kind(lambda root: cache.path("peak"), lambda root: cache.load("peak"),
                       lambda root: device_cache.store("peak", INFO, {"gflops": 1.0}),
                       lambda: json.dumps({DeviceId.of(INFO).key: 12.5})),
    "opencv summary": Kind(lambda root: root / "opencv" / "compare-opencv.json",
                           lambda root: Tuning(root / "opencv").summary(),
                           lambda root: Tuning(root / "opencv").note(LENET, 1, {"tuned": 2}),
                           lambda: json.dumps({"lenet@1": "tuned"})),
}

DAMAGE = {
    "garbage": lambda kind: "\x00\x01 not JSON {{{",
    "an array": lambda kind: "[1, 2, 3]",
    "an empty array": lambda kind: "[]",
    "a number": lambda kind: "42",
    "null": lambda kind: "null",
    "wrong fields": lambda kind: json.dumps({"hello": {"world": 1}, "x": 2}),
    "a field of the wrong type": lambda kind: kind.wrong_type(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("store", list(STORES))
def test_a_damaged_or_foreign_store_is_set_aside_in_one_line_and_never_overwritten(tmp_path, monkeypatch, capsys,
                                                                                   store, damage):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    kind = STORES[store]
    path = kind.path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = DAMAGE[damage](kind)
    path.write_text(text)
    assert not kind.load(tmp_path), "a damaged store's content was taken as choices"
    err = capsys.readouterr().err.strip().splitlines()
    aside = list(path.parent.glob(path.name + ".damaged-*"))
    assert len(aside) == 1 and aside[0].read_text() == text, "the damaged store was not kept aside as it was"
    assert len(err) == 1 and str(path) in err[0] and aside[0].name in err[0] and "Traceback" not in err[0], err
    assert aside[0].name.split(".damaged-")[1][:8].isdigit()   # its date
    kind.save(tmp_path)   # the search starts afresh beside it
    assert kind.load(tmp_path) and aside[0].read_text() == text
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("store", ["tinygrad choices", "tiles cache", "opencv summary"])
def test_a_store_found_damaged_by_the_write_is_set_aside_not_overwritten(tmp_path, monkeypatch, capsys, store):
    """The write merges what is on disk: a damaged file there is set aside first, then the new one written."""
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    kind = STORES[store]
    path = kind.path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[]")
    kind.save(tmp_path)
    assert [p.read_text() for p in path.parent.glob(path.name + ".damaged-*")] == ["[]"]
    assert kind.load(tmp_path) and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_choices_file_cut_short_keeps_its_whole_choices(tmp_path, capsys):
    store = ChoiceStore(TINY, tmp_path)
    choices = Choices(TINY, {f"2|{i:02x}|1|": Choice(KernelKey(2, f"{i:02x}", True, ""), [], f"r_{i}", 1.0, 2.0, 1.5)
                             for i in range(10)})
    store.save(choices)
    text = store.path.read_text()
    store.path.write_text(text[:len(text) // 2])
    kept = store.load().kernels
    assert 0 < len(kept) < 10 and all(kept[k] == choices.kernels[k] for k in kept)
    assert "choices of" in capsys.readouterr().err
    assert json.loads(store.path.read_text())["kernels"]   # what was kept is written back whole


def test_choices_of_another_device_are_set_aside_not_used(tmp_path, capsys):
    other = DeviceId("other", "plat", "1.0", tinygrad="0.14.0")
    ChoiceStore(other, tmp_path).save(Choices(other, {"k": _choice()}))
    store = ChoiceStore(TINY, tmp_path)
    store.folder.mkdir(parents=True)
    ChoiceStore(other, tmp_path).path.rename(store.path)
    assert store.load().kernels == {}
    assert "a file of another device" in capsys.readouterr().err


@pytest.mark.parametrize("what", ["folder", "pipe"])
def test_a_store_path_that_is_no_file_is_refused_in_one_line(tmp_path, what):
    import os
    from nets.errors import UserError
    store = ChoiceStore(TINY, tmp_path)
    store.folder.mkdir(parents=True)
    store.path.mkdir() if what == "folder" else os.mkfifo(store.path)
    with pytest.raises(UserError, match="is a (folder|named pipe), not a regular file: move it away"):
        store.load()
    assert store.path.exists()


def _committed(pattern: str) -> list[Path]:
    return sorted(REPORTS.glob(pattern))


@pytest.mark.parametrize("path", _committed("*/tuning/tinygrad-search/*/choices.json"), ids=str)
def test_every_committed_tinygrad_store_loads_whole(path, capsys):
    device = DeviceId(**json.loads(path.read_text())["device"])
    assert device.slug == path.parent.name
    store = ChoiceStore(device, path.parent.parent.parent)
    assert store.path == path and store.load().kernels
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("folder", _committed("*/tuning/clblast-tuning/*"), ids=str)
def test_every_committed_clblast_store_loads_whole(folder, capsys, monkeypatch):
    from backends.store import loader
    said = []
    monkeypatch.setattr(loader, "set_aside", lambda *a: said.append(a))   # never rename a committed file
    store = Store(DEVICE, folder.parent.parent)
    store.folder = folder
    records = store.all()
    nets = [store._read_net(p) for p in folder.glob("net-*.json")]
    assert records and all(n is not None for n in nets) and said == [] and capsys.readouterr().err == ""


@pytest.mark.parametrize("folder", _committed("*/tuning/clblast-tuning/*"), ids=str)
def test_every_committed_clblast_folder_is_named_by_its_device(folder):
    """The one DeviceId names CLBlast's folders as they were named when committed, and writes their device
    as it was written."""
    written = json.loads((folder / "device.json").read_text())["device"]
    device = DeviceId(**written)
    assert device.slug == folder.name and device.to_json() == written and device.key.count(" | ") == 2


@pytest.mark.parametrize("path", _committed("*/tuning/tiles.json"), ids=str)
def test_every_committed_tiles_cache_loads_whole(path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    cache.path("tiles").write_bytes(path.read_bytes())
    assert cache.load("tiles") == json.loads(path.read_text())
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("path", _committed("*/tuning/opencv/*/compare-opencv.json"), ids=str)
def test_every_committed_opencv_summary_loads_whole(path, capsys):
    assert Tuning(path.parent).summary() == json.loads(path.read_text())
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("store", ["tinygrad choices", "clblast record"])
def test_a_file_in_the_place_of_a_store_folder_is_refused_in_one_line_and_kept(tmp_path, monkeypatch, store):
    from nets.errors import UserError
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    kind = STORES[store]
    folder = kind.path(tmp_path).parent
    folder.parent.mkdir(parents=True)
    folder.write_text("mine")
    with pytest.raises(UserError, match=f"tuning folder {folder} cannot be made: {folder} is a regular file; move it"):
        kind.save(tmp_path)
    assert folder.read_text() == "mine"
