"""The tuning store and the per-device caches under several writers: a write
merges what another process wrote, a damaged file keeps what can be read of
it and is set aside in one line naming it."""
import json

import pytest

from backends import cache
from backends.clblast import problems
from backends.clblast.record import ProblemRecord, StageRecord, Store, Tried
from backends.store import DeviceId, PartialDict, PartialList, salvage, whole
from test_tune import DEVICE, verified_record


def _record(p, n: int, by: str | None = None) -> ProblemRecord:
    rec = verified_record(p, {"database": 0.5, "Xgemm": 0.4})
    stage = StageRecord("xgemm V=1", "Xgemm", "abc", 400)
    for i in range(n):
        stage.add(Tried(i, 1.0 + (i % 7) / 10, None, by), {"MWG": i})
    rec.stages[stage.stage] = stage
    return rec


def test_salvage_keeps_what_comes_before_a_cut():
    assert salvage('{"a": [1, 2.5, "x"], "b": {"c": null}}') == {"a": [1, 2.5, "x"], "b": {"c": None}}
    got = salvage('{"a": [1, 2, 3], "b": [[4, 5, "e"], [6, 7')
    assert got == {"a": [1, 2, 3], "b": [[4, 5, "e"], [6]]}   # the number at the cut may have lost digits
    assert isinstance(got, PartialDict) and whole(got["a"]) and isinstance(got["b"], PartialList)
    assert not whole(got["b"][1]) and whole(got["b"][0])
    assert salvage('{"a": "cut in a str') == {} and salvage("") is None and salvage("not json") is None


def test_a_record_cut_in_half_keeps_its_configurations_before_the_cut_and_is_set_aside(tmp_path, capsys):
    store = Store(DEVICE, tmp_path)
    p = problems.gemm(4, 8, 16)
    path = store.save(_record(p, 300))
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    rec = store.load(p)
    tried = rec.stages["xgemm V=1"].tried
    assert 100 < len(tried) < 300 and sorted(tried) == list(range(len(tried)))   # those before the cut
    assert rec.verified is None                                                # it came after the stages
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and f"kept {len(tried)} configurations tried" in err[0]
    aside = list(tmp_path.rglob("*.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_text() == text[:len(text) // 2]
    # what was kept is the file now, whole; the search takes up after it
    assert json.loads(path.read_text())["key"] == p.key and store.load(p).stages["xgemm V=1"].tried == tried
    assert store.load(p).stages["xgemm V=1"].next_indices(1) == [len(tried)]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("kind", ["peak", "tiles"])
def test_a_damaged_cache_keeps_every_other_devices_entry_and_is_set_aside(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    entries = {f"plat | dev {n} | 1.0": {"gflops": 10.0 * n, "layers": {"k": {"tile": [8, 8, 4, 4], "ksplit": n + 1}}}
               for n in range(3)}
    text = json.dumps(entries, indent=1)
    cache.path(kind).write_text(text[:text.rindex('"gflops"')])   # cut inside the last device's entry
    assert cache.load(kind) == {k: entries[k] for k in list(entries)[:2]}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cache.path(kind)) in err[0] and "the entries of 2 devices kept" in err[0]
    assert len(list(tmp_path.glob(f"{kind}.json.damaged-*"))) == 1
    assert json.loads(cache.path(kind).read_text()) == {k: entries[k] for k in list(entries)[:2]}


def test_a_cache_entry_written_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch):
    from compare import device_cache
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    info = {"platform": "plat", "name": "mine", "driver": "1.0"}
    other = {"platform": "plat", "name": "theirs", "driver": "1.0"}
    device_cache.store("peak", other, {"gflops": 1.0})
    device_cache.store("peak", info, {"gflops": 2.0})
    assert set(cache.load("peak")) == {DeviceId.of(info).key, DeviceId.of(other).key}


def test_two_writers_of_one_record_each_keep_the_others_configurations(tmp_path):
    p = problems.gemm(4, 8, 16)
    mine, theirs = Store(DEVICE, tmp_path), Store(DEVICE, tmp_path)   # two processes' views of one folder
    a, b = ProblemRecord(p), ProblemRecord(p)
    for rec, indices, by in ((a, (0, 1, 2), "a"), (b, (3, 4), "b")):
        rec.stages["s"] = StageRecord("s", "Xgemm", "abc", 10)
        for i in indices:
            rec.stages["s"].add(Tried(i, 1.0 + i, None, by), {"i": i})
    mine.save(a)
    theirs.save(b)                       # b learns a's three, and writes all five
    assert sorted(b.stages["s"].tried) == [0, 1, 2, 3, 4]
    a.stages["s"].add(Tried(5, 0.5, None, "a"), {"i": 5})
    mine.save(a)                         # a's later write keeps b's two
    back = mine.load(p).stages["s"]
    assert sorted(back.tried) == [0, 1, 2, 3, 4, 5] and {back.tried[i].by for i in (3, 4)} == {"b"}
    assert [x["index"] for x in back.best][:2] == [5, 0]
    # another search order's configurations are other ones: not taken
    c = ProblemRecord(p, stages={"s": StageRecord("s", "Xgemm", "other order", 10)})
    assert c.absorb(mine.load(p)) == 0 and not c.stages["s"].tried


def test_a_claim_keeps_another_search_off_until_its_process_is_gone(tmp_path):
    """What a live search claims is skipped by the others; a dead process's claims lapse."""
    import subprocess
    import sys
    from backends.tuning.clblast import claims as claims_module
    from backends.tuning.clblast.claims import Claims
    from backends.tuning.clblast.search import Search
    from test_tune import LIMITS
    store = Store(DEVICE, tmp_path)
    p = problems.gemm(4, 8, 16)
    lead = Search("", store, LIMITS, {p: ["t:x"]}).plans[0]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = Claims(store)
        theirs.me = claims_module.Owner(theirs.me.host, other.pid, claims_module.start_ticks(other.pid))
        with store.lock():
            theirs.sync({lead.key: set(range(10))})
        search = Search("", store, LIMITS, {p: ["t:x"]})
        plans, want = search._claim_next()
        assert plans[0].key == lead.key and [i for i, _ in want][:2] == [10, 11]   # theirs skipped
    finally:
        other.kill()
        other.wait()
    search = Search("", store, LIMITS, {p: ["t:x"]})
    plans, want = search._claim_next()                         # gone: its claims lapsed
    assert [i for i, _ in want][0] == 0
    data = json.loads((store.folder / "claims.json").read_text())
    assert [c["pid"] for c in data["claims"]] == [claims_module.Owner.me().pid]


def _tried_by(folder) -> dict[str, int]:
    """Configurations in the records of `folder`, counted by who timed them; every file must be whole."""
    by: dict[str, int] = {}
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())   # whole JSON, or this fails
        if path.name in ("device.json", "claims.json") or path.name.startswith("net-"):
            continue
        rec = ProblemRecord.from_json(data)
        for stage in rec.stages.values():
            for t in stage.tried.values():
                by[t.by] = by.get(t.by, 0) + 1
    return by


@pytest.mark.long
def test_two_tunes_on_one_folder_started_together_and_a_third_once_they_search_share_the_work(tmp_path):
    """Every configuration any of them timed is in the store, none was timed by two, every file is whole,
    no claim is left behind."""
    import os
    import re
    import socket
    import subprocess
    import sys
    import time
    from conftest import backend_or_skip
    backend_or_skip("clblast")
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    # The GEMMs' space outlasts every budget, so the third still finds work however fast the first two are
    # (the GEMVs' 272 configurations were all timed in 12 s on CI).
    argv = [sys.executable, "-m", "compare", "tune", "--net", "lenet", "--batch", "1", "--routines", "gemm",
            "--scope", "clblast", "--jobs", "1"]

    def start():
        # The budget counts the start-up too, which took over 20 s on CI's two loaded cores (a tune then timed
        # nothing): each gets room to reach the search whatever the load.
        return subprocess.Popen(argv + ["--budget-s", "45"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)

    def searching(procs) -> bool:
        """Each of `procs` has timed a configuration into the store."""
        by = {}
        try:
            for folder in (tmp_path / "clblast-tuning").glob("*"):
                by.update(_tried_by(folder))
        except FileNotFoundError:   # a claim released between the listing and the reading: look again
            return False
        return all(f"{socket.gethostname()} pid {proc.pid}" in by for proc in procs)
    procs = [start(), start()]
    deadline = time.monotonic() + 300   # a guard against a hang only
    while not searching(procs):   # the third joins a search under way, not one still starting
        ended = [proc for proc in procs if proc.poll() is not None]
        assert not ended and time.monotonic() < deadline, [proc.communicate()[1][-2000:] for proc in ended]
        time.sleep(0.2)
    procs.append(start())
    tried = {}
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        tried[f"{socket.gethostname()} pid {proc.pid}"] = int(re.search(r"CLBlast: (\d+) configurations tried", out)[1])
    assert all(n >= 1 for n in tried.values()), tried
    folder = next((tmp_path / "clblast-tuning").iterdir())
    assert _tried_by(folder) == tried   # each one's own, all of them, none twice
    assert not (folder / "claims.json").exists()   # each released its own claims
    assert not list(folder.glob("*.damaged-*"))
