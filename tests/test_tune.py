"""`compare tune`: the problems a net poses, the tuning files, the choice of
candidates and of sets, a real search on this device that a second run
continues, the verification, and a run that then applies what was verified."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends.clblast import problems
from backends.clblast.overrides import ALWAYS_DIRECT, ALWAYS_INDIRECT
from backends.clblast.record import (Candidate, DeviceId, ProblemRecord, StageRecord, Store, Tried, Verified)
from backends.tuning.budget import STEPS_ENV, Budget, Steps
from backends.tuning.clblast.space import STAGES, DeviceLimits, limits_from_device
from backends.clblast.tuned import Depth, Tuning
from nets import LENET, MOBILENET_V2, Conv, Dense, Net, Subsample
from conftest import backend_or_skip

DEVICE = DeviceId("dev", "plat", "1.0", "libclblast.so.1.5.3")


def verified_record(problem, times: dict) -> ProblemRecord:
    """A record whose verification timed CLBlast's database and one set per kernel named in `times`."""
    params = {"XgemmDirect": {"WGD": 1}, "Xgemm": {"MWG": 1}, "Xconvgemm": {"WGD": 2}, "Xgemv": {"WGS1": 1},
              "XgemvFast": {"WGS2": 1}, "XgemvFastRot": {"WGS3": 1}}
    route = {"XgemmDirect": [("GemmRoutine", ALWAYS_DIRECT)], "Xgemm": [("GemmRoutine", ALWAYS_INDIRECT)]}
    cands = [Candidate("database" if k == "database" else k, [] if k == "database" else
                       [(k, params[k])] + route.get(k, []), ms) for k, ms in times.items()]
    return ProblemRecord(problem, ["t:x"], {}, Verified("now", {}, "test", cands))


def test_the_problems_of_a_net_are_the_calls_the_backends_make():
    found = problems.net_problems(LENET, 100)
    keys = {p.key: layers for p, layers in found.items()}
    # C1: W (6 x 25) times im2col (25 x 784) per image; and xCONVGEMM of the whole batch
    assert keys["gemm 6x784x25 batch 100"] == ["c1"]
    assert keys["convgemm 1x32x32 k5x5 p0x0 s1x1 out 6 batch 100"] == ["c1"]
    assert keys["gemm 6x196x24 batch 100"] == ["s2"]          # the study's sparse filters: 6 channels in and out
    assert keys["gemm 100x120x400"] == ["f5"]                 # dense at batch 100: X (100 x 400) W (400 x 120)
    one = Net("t", (2, 5, 5), (Conv("a", "relu", out_channels=3, kernel=(3, 3), pad=(1, 1)),
                              Conv("b", "relu", out_channels=3, kernel=(3, 3), pad=(1, 1)),
                              Subsample("s", "relu"), Dense("c", out_features=4)))
    found = problems.net_problems(one, 1)
    assert found[problems.gemm(3, 25, 18)] == ["a"] and found[problems.gemm(3, 25, 27)] == ["b"]
    # batch 1: a GEMV, with the weights stored either way
    assert found[problems.gemv(4, 12, True)] == ["c"] and found[problems.gemv(4, 12, False)] == ["c"]
    assert problems.gemm(2, 3, 4, 5).flops == 2 * 2 * 3 * 4 * 5


def test_a_record_round_trips_and_a_damaged_or_foreign_file_is_searched_afresh(tmp_path):
    store = Store(DEVICE, tmp_path)
    p = problems.gemm(4, 8, 16)
    rec = verified_record(p, {"database": 0.5, "Xgemm": 0.4})
    stage = StageRecord("xgemm V=1", "Xgemm", "abc", 10)
    stage.add(Tried(0, 0.3), {"MWG": 16})
    stage.add(Tried(1, None, "wrong result"), {"MWG": 32})
    rec.stages[stage.stage] = stage
    path = store.save(rec)
    back = store.load(p)
    assert back.to_json() == rec.to_json() and back.verified.winner().label == "Xgemm"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [r.problem for r in store.all()] == [p]
    path.write_text(path.read_text()[:40])                      # cut short
    assert store.load(p) is None
    data = rec.to_json()
    data["version"] = 99
    path.write_text(json.dumps(data))                            # another version of the format
    assert store.load(p) is None
    assert Store(DeviceId("dev", "plat", "1.1", "libclblast.so.1.5.3"), tmp_path).folder != store.folder


def test_a_stage_continues_after_what_was_tried_and_counts_each_once():
    stage = StageRecord("xgemm_direct V=1", "XgemmDirect", "abc", 6)
    for i in (0, 1, 3):
        stage.add(Tried(i, 1.0 + i), {"i": i})
    assert stage.next_indices(10) == [2, 4, 5]
    assert stage.next_indices(2, skip={2}) == [4, 5]
    stage.add(Tried(3, 0.5), {"i": 3})                           # the same configuration again: counted once
    assert stage.done() == 3 and stage.best_ms() == 0.5
    assert stage.progress() == [(1, 1.0), (3, 0.5)]


def test_the_candidates_are_the_database_then_the_best_of_each_kernel():
    from backends.tuning.clblast.search import Search
    from backends.tuning.clblast.verify import TOP
    search = Search.__new__(Search)
    rec = ProblemRecord(problems.gemm(4, 8, 16))
    for name, kernel in (("xgemm V=1", "Xgemm"), ("xgemm_direct V=1", "XgemmDirect")):
        stage = StageRecord(name, kernel, "abc", 10)
        for i in range(5):
            stage.add(Tried(i, 1.0 + i), {"P": i})
        rec.stages[name] = stage
    cands = search.candidates(rec)
    assert cands[0] == ("database", [])
    assert len(cands) == 1 + 2 * TOP
    routes = {sets[0][0]: sets[1] for _, sets in cands[1:]}
    assert routes == {"Xgemm": ("GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 0}),
                      "XgemmDirect": ("GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 1 << 20})}
    # a GEMV call picks one of three kernels itself: each candidate sets all three
    rec = ProblemRecord(problems.gemv(8, 16, True))
    for stage in STAGES["xgemv"]:
        rec.stages[stage.name] = StageRecord(stage.name, stage.kernel, "abc", 3)
        rec.stages[stage.name].add(Tried(0, 1.0), {stage.kernel: 1})
    cands = search.candidates(rec)
    assert cands[0] == ("database", []) and len(cands) == 2
    assert [k for k, _ in cands[1][1]] == ["Xgemv", "XgemvFast", "XgemvFastRot"]


def test_a_kind_of_call_is_tuned_for_the_whole_net_or_not_at_all():
    a, b, g = problems.gemm(4, 8, 16), problems.gemm(8, 8, 8), problems.gemv(4, 8, True)
    records = {a: verified_record(a, {"database": 0.3, "XgemmDirect": 0.2, "Xgemm": 0.25}),
               g: verified_record(g, {"database": 0.3, "Xgemv": 0.4})}
    tuning = Tuning(records, {a: 1, b: 1, g: 1})
    assert tuning.sets(a) == []           # b has no verified set: CLBlast's overrides could not be undone for it
    assert tuning.sets(g) == [("Xgemv", {"WGS1": 1})]   # the best tuned set, even where the database was faster
    records[b] = verified_record(b, {"database": 0.3, "Xgemm": 0.1})
    tuning = Tuning(records, {a: 1, b: 1, g: 1})
    assert dict(tuning.sets(a))["XgemmDirect"] == {"WGD": 1} and dict(tuning.sets(b))["Xgemm"] == {"MWG": 1}
    # routed direct, b has no set: no GEMM of the net is routed direct with a tuned set; indirect, both have one
    assert tuning.sets(a, "XgemmDirect") == [] and tuning.sets(b, "XgemmDirect") == []
    assert dict(tuning.sets(a, "Xgemm"))["Xgemm"] == {"MWG": 1} and tuning.sets(b, "Xgemm")
    # every problem's database time is known (verified): so is the share of the complete ones
    assert str(tuning.depth()).endswith("complete on 0 of 3 problems (those of 0% of CLBlast's database time, "
                                        "cheapest composition per layer), "
                                        "verified on 3")
    assert Tuning(None, {a: 1}).source == "CLBlast database default"


def test_one_set_per_kernel_for_the_net_where_it_beats_the_database_in_sum():
    from backends.clblast.record import NetChoice
    a, g, c = problems.gemm(4, 8, 16), problems.gemv(4, 8, True), problems.convgemm(1, (2, 5, 5), 3, (3, 3), (1, 1), (1, 1))
    direct = [["XgemmDirect", {"WGD": 8}], ["GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 1 << 20}]]
    indirect = [["Xgemm", {"MWG": 16}], ["GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 0}]]
    net = NetChoice("t batch 1", [], "now", {
        "XgemmDirect": {"label": "d", "sets": direct, "ms": 1.0, "database_ms": 2.0},
        "Xgemm": {"label": "i", "sets": indirect, "ms": 1.5, "database_ms": 2.0},
        "Xgemv": {"label": "v", "sets": [["Xgemv", {"WGS1": 1}]], "ms": 3.0, "database_ms": 2.0}})
    tuning = Tuning({}, {a: 1, g: 1, c: 1}, net=net, per_problem=False)
    assert tuning.sets(a) == [tuple(x) for x in direct]              # the route whose sum is lower
    assert tuning.sets(a, "Xgemm") == [tuple(x) for x in indirect]  # clblast-best's indirect candidate
    assert tuning.sets(g) == [] and tuning.sets(c) == []            # slower than the database, or none chosen
    assert "one set per kernel for the whole net" in tuning.source
    assert Tuning({}, {a: 1}, net=net, per_problem=False, apply=False).sets(a) == []


def _compare(*argv, env):
    return subprocess.run([sys.executable, "-m", "compare", *argv], capture_output=True, text=True, env=env,
                          timeout=900)


@pytest.mark.long
def test_two_budget_limited_runs_on_this_device_the_second_continuing_the_first(tmp_path, monkeypatch):
    """A tiny GEMM on PoCL: what the first run tried is not tried again; the depth grows; then the
    verification times CLBlast's database and the best found, through the routine."""
    backend_or_skip("clblast")
    from backends.tuning.clblast import verify
    from backends.tuning.clblast.search import Search
    # the best configuration of each kernel alone re-timed (not 3): each candidate is a routine compiled on
    # PoCL, 10-15 s here, and the loop over them is the same for one
    monkeypatch.setattr(verify, "TOP", 1)
    from backends.opencl.runtime import device_index, get_runtime
    rt = get_runtime()
    store = Store(DeviceId.of(rt.info, "test"), tmp_path)
    p = problems.gemm(4, 8, 16)
    limits = limits_from_device(rt.device)

    def run(configurations):   # a budget of configurations tried: the same runs at any speed (one more may
        search = Search(device_index(rt.device), store, limits, {p: ["t:x"]})   # come as the child stops)
        search.search(Budget(configurations, Steps()))
        return search
    first = run(2)
    tried_first = {s.stage: set(s.tried) for s in store.load(p).stages.values()}
    assert 2 <= first.tried_now == sum(len(t) for t in tried_first.values())
    second = run(2)
    rec = store.load(p)
    assert second.tried_now >= 2
    assert rec.depth()[0] == first.tried_now + second.tried_now          # nothing tried twice
    for name, stage in rec.stages.items():
        assert tried_first[name] <= set(stage.tried)
    verified = second.verify(240)   # returns when done; a loaded machine compiles slowly
    rec = store.load(p)
    assert verified == [p] and rec.verified.database().ms > 0 and rec.verified.best_tuned().ms > 0
    assert not rec.needs_verifying()
    # one set per kernel for a net posing the problem twice: timed against the database, summed
    from backends.tuning.clblast.verify import verify_net
    choice = verify_net(second, "t batch 1", {p: 2}, 90)
    family = choice.families["XgemmDirect"]
    assert family["ms"] > 0 and family["database_ms"] > 0 and store.load_net("t batch 1").to_json() == choice.to_json()
    assert verify_net(second, "t batch 1", {p: 2}, 90) is not None   # unchanged verification: kept as it is


@pytest.mark.long
def test_with_several_children_the_candidates_are_built_side_by_side_then_timed_a_batch_a_child(tmp_path):
    """Two problems, each with CLBlast's database and two searched sets, one of which CLBlast refuses: the
    build children find the refused one, the timed child is not given it, and one child times both
    problems (their databases first); each problem's verification keeps all three candidates."""
    backend_or_skip("clblast")
    from backends.tuning.clblast.children import LocalPool
    from backends.tuning.clblast.search import Search
    from backends.tuning.clblast.space import stages_for
    from backends.opencl.runtime import device_index, get_runtime
    rt = get_runtime()
    store = Store(DeviceId.of(rt.info, "test"), tmp_path)
    stage = stages_for("xgemm_direct")[0]
    good = stage.configurations(limits_from_device(rt.device))[0]
    bad = {**good, "WGD": 3}   # not a multiple of its thread counts: CLBlast refuses to compile it
    a, b = problems.gemm(8, 16, 24), problems.gemm(16, 8, 32)
    search = Search(device_index(rt.device), store, limits_from_device(rt.device), {a: ["t:x"], b: ["t:x"]})
    for p in (a, b):   # as if searched: the refused set found fastest (where a search child misjudged it)
        search.records[p].stages[stage.name].add(Tried(0, 0.2), good)
        search.records[p].stages[stage.name].add(Tried(1, 0.1), bad)
    search.pool = LocalPool(device_index(rt.device), jobs=2)
    asked = []
    answers = search.pool.answers
    search.pool.answers = lambda req, timeout: (asked.append(req), answers(req, timeout))[1]
    assert sorted(p.key for p in search.verify(600)) == sorted([a.key, b.key])
    assert [r["task"] for r in asked] == ["build", "build", "verify"]
    timed = asked[-1]["items"]
    assert [len(item["candidates"]) for item in timed] == [2, 2]    # the database and the good set
    for p in (a, b):
        by_label = {c.label: c for c in store.load(p).verified.candidates}
        assert by_label["database"].ms > 0
        refused = [c for c in by_label.values() if c.sets and c.sets[0][1]["WGD"] == 3]
        assert len(refused) == 1 and refused[0].ms is None and refused[0].error
        assert store.load(p).verified.best_tuned().sets[0][1] == good


def test_a_child_times_each_configuration_on_every_problem_of_its_stage_that_lacks_it(tmp_path):
    """Compiling dominates: one child takes a configuration to all the problems still lacking it."""
    from backends.tuning.clblast.search import CHUNK, Search, _Child
    store = Store(DEVICE, tmp_path)
    big, small, g = problems.gemm(64, 64, 64), problems.gemm(8, 8, 8, 4), problems.gemv(4, 8, True)
    search = Search("", store, LIMITS, {p: ["t:x"] for p in (big, small, g)})
    lead = search.plans[0]
    assert lead.problem == big
    twin = next(p for p in search.plans if p.problem == small and p.stage.name == lead.stage.name)
    for i in range(10):   # the small GEMM has the first ten already
        twin.record.add(Tried(i, 1.0), lead.order[i])
    plans, want = search._next_chunk()
    assert [p.problem for p in plans] == [big, small]     # the GEMV's stages are others
    assert [i for i, _ in want] == list(range(min(CHUNK, lead.record.default_count)))
    assert all(where == ([0] if i < 10 else [0, 1]) for i, where in want)
    search.children.append(_Child(plans, want))  # in a child's hands: the next chunk takes others
    held = {(p.stage.name, i) for i, _ in want for p in plans}
    plans, want = search._next_chunk()
    assert [p.problem for p in plans] == [big, small]
    assert not held & {(p.stage.name, i) for i, _ in want for p in plans}


def fake_children(monkeypatch, body: str) -> None:
    """The search's children replaced by a Python script: `body` runs after the request is read into `req`
    (json, os, sys and time imported); a child stopped as hung is so after 1 s."""
    from backends.tuning.clblast import children, watch
    script = "import json, os, sys, time\nreq = json.loads(sys.stdin.read())\n" + body + "\n"

    def spawn(req):
        proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        proc.stdin.write(json.dumps(req))
        proc.stdin.close()
        return proc
    monkeypatch.setattr(children, "spawn", spawn)
    monkeypatch.setattr(watch, "IDLE_S", 1.0)


@pytest.mark.parametrize("end, why", [("os.abort()", "the child process died on it (exit -6)"),
                                       ("time.sleep(600)", "hung: silent and no processor time for 1 s")])
def test_a_configuration_that_kills_or_hangs_its_child_is_recorded_and_counted_and_the_rest_go_on(
        tmp_path, monkeypatch, end, why):
    """A child answers its first configuration and then dies or sleeps for good (as PoCL's heap does on some
    GEMMK=1 kernels: an abort, or a deadlock in malloc): that second one is kept as failed and counts as
    tried, the third is tried by a later child."""
    from backends.tuning.clblast.search import Search
    fake_children(monkeypatch, "print(json.dumps({'ready': True}), flush=True)\n"
                               "index, _, where = req['configs'][0]\n"
                               "print(json.dumps({'index': index, 'problem': where[0], 'ms': 1.0, 'error': None}), "
                               "flush=True)\n" + end)
    store = Store(DEVICE, tmp_path)
    p = problems.gemm(4, 8, 16)
    search = Search("", store, LIMITS, {p: ["t:x"]})
    first = search.plans[0].stage.name
    search.search(Budget(3, Steps()))   # three configurations tried, however long each child takes to start
    tried = store.load(p).stages[first].tried
    assert tried[0].ms == 1.0 and tried[1].ms is None and tried[1].error.startswith(why)
    assert tried[2].ms == 1.0 and len(tried) == 3   # the next child starts after the one that failed
    assert search.tried_now == store.load(p).depth()[0]


def _queue_breakers(tmp_path, monkeypatch, first: str, children: int):
    """A search of one small GEMM whose every child runs `first`, is ready, and ends on its first configuration
    as one that broke the device's queue does (exit LOST), until `children` have: the search, its store, the
    problem."""
    from backends.tuning.clblast.child import LOST
    from backends.tuning.clblast.search import Search
    fake_children(monkeypatch, first + "print(json.dumps({'ready': True}), flush=True)\n"
                               "index, _, where = req['configs'][0]\n"
                               "print(json.dumps({'index': index, 'problem': where[0], 'ms': None, "
                               f"'error': 'OUT_OF_RESOURCES'}}), flush=True)\nsys.exit({LOST})")
    store = Store(DEVICE, tmp_path)
    p = problems.gemm(4, 8, 16)
    search = Search("", store, LIMITS, {p: ["t:x"]})
    search.search(Budget(children, Steps()))   # each child tries one configuration
    return search, store, p


def test_a_child_that_cannot_run_ends_as_said_never_as_a_threads_traceback(monkeypatch):
    """An interrupt can end the process while the pool's thread still starts a child: whatever run_child
    raises comes back as that child's end, with what it said, and nothing reaches threading's excepthook."""
    import queue
    import threading
    from backends.tuning.clblast import children
    from backends.tuning.clblast.children import Ended, LocalPool

    def cannot(*args, **kwargs):
        raise RuntimeError("can't create new thread at interpreter shutdown")
    monkeypatch.setattr(children, "run_child", cannot)
    hooked = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    events, handle = queue.Queue(), object()
    LocalPool("0:0").start({"task": "search"}, "here", events, handle)
    got, ended = events.get(timeout=30)
    assert got is handle and isinstance(ended, Ended) and not hooked
    assert ended.code is None and ended.why is None and not ended.stopped   # not a configuration's doing
    assert ended.last_words == "the child could not run: RuntimeError: can't create new thread at interpreter shutdown"


def test_a_child_ended_by_a_configuration_that_broke_the_queue_is_counted_and_its_start_timed(tmp_path, monkeypatch):
    """The search's summary says what its children's starts cost and how many a configuration ended (exit
    LOST: the queue unusable after it), the usual cause of a slow stretch on NVIDIA's driver."""
    search, store, p = _queue_breakers(tmp_path, monkeypatch, "time.sleep(0.3)\n", 3)
    tried = store.load(p).stages[search.plans[0].stage.name].tried
    assert len(tried) == 3 and all(t.error == "OUT_OF_RESOURCES" for t in tried.values())   # each in a fresh child
    assert search.rate.lost >= len(tried) - 1 and len(search.rate.ready_s) >= len(tried)
    assert min(search.rate.ready_s) >= 0.3
    line = next(line for line in search.rate.summary({}) if "children started" in line)
    assert f"{search.rate.lost:,} ended by a configuration that broke the device's queue" in line


@pytest.mark.parametrize("end, what", [
    ("print(json.dumps({'index': index, 'problem': where[0], 'ms': None, 'error': 'OUT_OF_RESOURCES'}), flush=True)\n"
     "sys.exit(LOST)", "broke the device's queue"),
    ("time.sleep(600)", "hung its child")])
def test_a_configuration_that_broke_the_queue_or_hung_is_failed_on_its_stage_mates_without_a_child_each(
        tmp_path, monkeypatch, end, what):
    """Two GEMMs share a stage: a configuration that breaks the queue on the first, or hangs there (seen on
    the H200: one configuration hung on 41 problems, 180 s each), is kept as failed on the second too,
    saying where, so each such configuration costs one child, not one per problem."""
    from backends.tuning.clblast.child import LOST
    from backends.tuning.clblast.search import Search
    fake_children(monkeypatch, "print(json.dumps({'ready': True}), flush=True)\n"
                               "index, _, where = req['configs'][0]\n" + end.replace("LOST", str(LOST)))
    store = Store(DEVICE, tmp_path)
    a, b = problems.gemm(4, 8, 16), problems.gemm(8, 4, 16)
    search = Search("", store, LIMITS, {a: ["t:a"], b: ["t:b"]})
    lead = search.plans[0]
    mate = next(p for p in search.plans if p is not lead and p.stage.name == lead.stage.name)
    search.search(Budget(4, Steps()))   # two children: each fails on the lead, its mate kept as failed
    led, mated = store.load(lead.problem).stages[lead.stage.name].tried, \
        store.load(mate.problem).stages[lead.stage.name].tried
    assert len(led) == 2 and all(t.ms is None and t.error for t in led.values())
    assert sorted(mated) == sorted(led)   # one child per failing configuration, not per problem
    assert all(mated[i].error == f"not tried: this configuration {what} on {lead.problem.key}" for i in led)
    assert search.rate.lost == (len(led) if "queue" in what else 0)
    assert search.tried_now == sum(store.load(p).depth()[0] for p in (a, b))


def test_a_process_busy_on_the_processor_is_not_idle_and_a_sleeping_one_is():
    """On a clock the test moves (Watch is told the time), against the processor time each really used."""
    from backends.tuning.clblast.watch import READ_EVERY_S, Watch, cpu_seconds
    ready = "import time; print('ready', flush=True)\n"
    busy = subprocess.Popen([sys.executable, "-c", ready + "while True: pass"], stdout=subprocess.PIPE, text=True)
    asleep = subprocess.Popen([sys.executable, "-c", ready + "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline() == asleep.stdout.readline() == "ready\n"   # their start-ups are over
        watches = [Watch(busy.pid, 0.0), Watch(asleep.pid, 0.0)]
        while cpu_seconds(busy.pid) <= watches[0].cpu:   # the busy one used the processor since (a tick)
            pass
        later = max(1.5, READ_EVERY_S)
        assert watches[0].idle_for(later) == 0.0 and watches[1].idle_for(later) == later
    finally:
        busy.kill()
        asleep.kill()
        busy.wait()
        asleep.wait()
    assert cpu_seconds(busy.pid) is None   # gone: not readable


def test_one_child_searches_two_problems_of_a_stage_on_this_device(tmp_path):
    """Both records get the configurations tried; a second problem adds no compile of its own."""
    backend_or_skip("clblast")
    from backends.tuning.clblast.search import Search
    from backends.opencl.runtime import device_index, get_runtime
    rt = get_runtime()
    store = Store(DeviceId.of(rt.info, "test"), tmp_path)
    a, b = problems.gemm(4, 8, 16), problems.gemm(8, 4, 16)
    search = Search(device_index(rt.device), store, limits_from_device(rt.device), {a: ["t:x"], b: ["t:y"]})
    search.search(Budget(4, Steps()))   # four configurations tried (two on each problem, when none kills the child)
    # a configuration that kills the child (some GEMMK=1 kernels on PoCL) is kept for the problem in hand
    # only; the other problem gets it when its own turn comes
    tried = [{(s.stage, i) for s in store.load(p).stages.values() for i, t in s.tried.items()
              if "died on it" not in (t.error or "")} for p in (a, b)]
    assert tried[0] and tried[1]
    assert len(tried[0] ^ tried[1]) <= 2   # only the configuration in hand when each run stopped may differ


def test_tune_shows_its_depth_and_refuses_bad_options_in_one_line(tmp_path):
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    shown = _compare("tune", "--net", "lenet", "--show", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "0% of CLBlast's default search (0 of " in shown.stdout and "gemm 6x784x25 batch 100" in shown.stdout
    assert "lenet batch 100: not tuned: none of its 10 problems searched yet" in shown.stdout
    for argv, message in [(["--budget-s", "0"], "--budget-s must be a finite number of seconds from 1 to 2,592,000, not 0"),
                          (["--scope", "everything"], "--scope takes clblast, tiles, forms, tinygrad, opencv or all (comma-separated)"),
                          (["--scope", "tinygrad", "--beam-width", "0"], "--beam-width"),
                          (["--net", "nosuch", "--budget-s", "5"], "unknown net 'nosuch'"),
                          (["--jobs", "0"], "--jobs"),
                          (["--routines", "blas"], "--routines takes gemm, gemv, convgemm (comma-separated)"),
                          (["--routines", "gemv", "--as-tuner", "all"], "--routines and --as-tuner exclude each")]:
        proc = _compare("tune", *argv, env=env)
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_verified_tuning_is_applied_in_the_tuned_modes_and_the_database_is_the_other(tmp_path, monkeypatch):
    """Sets verified for every problem of a small net, and one set per kernel chosen for it, are what
    `clblast` and `clblast-best` run with in their tuned modes; each mode checked, the fastest kept."""
    backend_or_skip("clblast")
    from backends.opencl.runtime import get_runtime
    from backends.clblast.record import NetChoice
    from backends.clblast.tuned import clblast_version
    rt = get_runtime()
    limits = limits_from_device(rt.device)
    store = Store(DeviceId.of(rt.info, clblast_version()), tmp_path)
    first = {stage.kernel: stage.search_order(limits)[0] for t in STAGES for stage in STAGES[t][:1]}
    first.update({stage.kernel: stage.search_order(limits)[0] for stage in STAGES["xgemv"]})
    direct = [("XgemmDirect", first["XgemmDirect"]), ("GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 1 << 20})]
    trio = [(k, first[k]) for k in ("Xgemv", "XgemvFast", "XgemvFastRot")]
    family = {"gemm": direct, "gemv": trio, "convgemm": [("Xconvgemm", first["Xconvgemm"])]}
    net_problems = problems.net_problems(LENET, 2)
    for p in net_problems:
        store.save(ProblemRecord(p, [], {}, Verified("now", {}, "test", [Candidate("database", [], 1.0),
                                                                          Candidate("tuned", family[p.routine], 2.0)])))
    store.save_net(NetChoice("lenet batch 2", sorted(p.key for p in net_problems), "now", {
        name: {"label": "first", "sets": [list(x) for x in sets], "ms": 1.0, "database_ms": 2.0}
        for name, sets in (("XgemmDirect", direct), ("Xconvgemm", family["convgemm"]))}))
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    out = tmp_path / "r.json"
    run = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "clblast,clblast-best", "--repeats", "2",
                   "--warmup", "1", "--out", str(out), env=env)
    assert run.returncode == 0, run.stderr
    for entry in json.loads(out.read_text())["backends"]:
        modes = {m["name"]: m for m in entry["modes"]}
        assert set(modes) == {"tuned", "tuned-per-problem", "database"}, modes
        assert all(m["status"] == "OK" for m in modes.values()), modes
        assert entry["mode"] == min(modes, key=lambda m: modes[m]["compute"]["median"])
        assert entry["check"]["status"] == "PASS"
        source = entry["config"]["clblast_parameters"]
        assert source.startswith("tuned by `compare tune`" if entry["mode"] != "database" else "CLBlast database")
        assert ("complete on 0 of 10 problems (those of 0% of CLBlast's database time, cheapest composition per "
                "layer), verified on 10"
                in entry["config"]["clblast_tuning_depth"])
    # whichever mode won, the tuned mode runs with the chosen sets in force (looked into where it runs: its child)
    import backends
    from nets.weights import init_weights
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    for batch in (2, 3):   # batch 3, never searched, runs batch 2's choice
        prepared = backends.get("clblast").prepare(LENET, init_weights(LENET, 0), batch, mode="tuned")
        try:
            assert prepared.config["clblast_parameters_in_force"]["XgemmDirect"] == first["XgemmDirect"], batch
        finally:
            prepared.close()
    # batch 3, never searched: the tuned mode runs batch 2's choice (as CLBlast runs a device's tuning at
    # every size), timed against the database; no problem of it has a set of its own
    three = tmp_path / "r3.json"
    run = _compare("run", "--net", "lenet", "--batch", "3", "--backends", "clblast", "--repeats", "2",
                   "--warmup", "1", "--out", str(three), env=env)
    assert run.returncode == 0, run.stderr
    entry = json.loads(three.read_text())["backends"][0]
    modes = {m["name"]: m for m in entry["modes"]}
    assert modes["tuned"]["status"] == "OK" and modes["database"]["status"] == "OK", modes
    assert modes["tuned-per-problem"]["status"] == "UNSUPPORTED", modes
    assert entry["check"]["status"] == "PASS" and entry["config"]["clblast_tuned_at"] == "lenet batch 2"
    if entry["mode"] == "tuned":
        assert entry["config"]["clblast_parameters"].startswith("tuned by `compare tune` at lenet batch 2:")


def test_tiles_are_measured_and_then_used(tmp_path):
    backend_or_skip("vectorised-tiled")
    # a budget of 6 candidates tried (the tests' hook): each of the 2 layers gets its even share, at any speed
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path), **{STEPS_ENV: "1"})
    tuned = _compare("tune", "--net", "lenet", "--batch", "2", "--budget-s", "6", "--scope", "tiles", env=env)
    assert tuned.returncode == 0, tuned.stderr
    entry = next(iter(json.loads((tmp_path / "tiles.json").read_text()).values()))
    layers = entry["layers"]
    assert set(layers) == {"n2 in1x32x32 k6 w5x5 s1x1 p0x0", "n2 in6x14x14 k16 w5x5 s1x1 p0x0"}
    for found in layers.values():
        # the cost model's own choice is always timed, and the choice is never slower than it
        assert found["timed"] >= 1 and found["model"]["ms"] is not None and found["ms"] <= found["model"]["ms"]
        assert found["timed"] + found["refused"] == 3, found
    out = tmp_path / "r.json"
    run = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "vectorised-tiled", "--mode", "correctness",
                   "--out", str(out), env=env)
    assert run.returncode == 0, run.stderr
    config = json.loads(out.read_text())["backends"][0]["config"]
    assert all(source.startswith("measured by `compare tune`") for source in config["tile_source"].values())
    assert set(config["tile_source"]) == {"c1", "c3"}


def test_the_kernel_alone_as_the_tuner_runs_it_computes_the_whole_product():
    backend_or_skip("clblast")
    import numpy as np
    from backends.clblast.call import Call
    from backends.opencl.runtime import get_runtime
    # VGG-16's conv3_2 GEMM (256 filters, 56x56 pixels, 2304) is the issue's 3200 x 256 x 2304
    assert problems.xgemm_alone(problems.gemm(256, 3136, 2304)).key == "xgemm alone 3200x256x2304"
    call = Call(get_runtime(None), problems.Problem(problems.XGEMM_ALONE, (256, 128, 128)))
    assert call.check() is None
    a, b = call.inputs                                  # stored column major: A (m x k), B (n x k)
    want = a.T.astype(np.float64) @ b.astype(np.float64)      # C (m x n) = A B^T
    got = call.out.get().reshape(128, 256).T            # column-major C
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_kernel_alone_is_verified_on_its_tuners_clock_and_the_routine_on_the_wall_clock():
    backend_or_skip("clblast")
    from backends.clblast.call import Call
    from backends.tuning.clblast.children import LocalPool
    from backends.tuning.clblast.verify import _verify_child, verify_how
    from backends.opencl.runtime import device_index, get_runtime
    rt = get_runtime(None)
    alone, routine = problems.Problem(problems.XGEMM_ALONE, (128, 128, 128)), problems.gemm(16, 100, 150)
    assert "event" in verify_how(alone) and "least" in verify_how(alone)
    assert "wall clock" in verify_how(routine) and "median" in verify_how(routine)
    call = Call(rt, alone)
    assert call.check() is None and call.kernel_ms() > 0
    with pytest.raises(ValueError, match="only the Xgemm kernel alone"):
        Call(rt, routine).kernel_ms()
    # the child times the database's kernel on that clock
    timed = _verify_child(LocalPool(device_index(rt.device)), {"task": "verify", "items": [
        {"problem": alone.to_json(), "candidates": [["database", []]]}], "rounds": 3, "cap_s": 5}, timeout=120)
    ms, error = timed[alone.key]["database"]
    assert ms > 0 and error is None
    # a verification timed on another clock than the problem's is made again; one on its clock is not
    stage = StageRecord("xgemm V=1", "Xgemm", "fp", 2)
    stage.add(Tried(0, 0.1), {"MWG": 16})
    rec = ProblemRecord(alone, ["t:x"], {stage.stage: stage},
                        Verified("now", {stage.stage: 1}, verify_how(routine), [Candidate("database", [], 0.2)]))
    assert rec.needs_verifying(verify_how(alone)) and not rec.needs_verifying(verify_how(routine))


def test_as_tuner_searches_the_kernel_alone_and_refuses_layers_without_a_gemm(tmp_path):
    backend_or_skip("clblast")
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    bad = _compare("tune", "--net", "lenet", "--batch", "1", "--as-tuner", "f6", "--show", env=env)
    assert bad.returncode == 2 and "no batch-1 GEMM of lenet is posed by those layers" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    # a budget of 3 configurations tried (the tests' hook): the search's 80% of it ends on the third, at any speed
    ran = _compare("tune", "--net", "lenet", "--batch", "1", "--as-tuner", "c3", "--scope", "clblast",
                   "--budget-s", "3", "--jobs", "1", env=dict(env, **{STEPS_ENV: "1"}))
    assert ran.returncode == 0, ran.stderr
    assert "xgemm alone 128x128x256" in ran.stdout and "gemm 16x100x150" not in ran.stdout
    saved = [json.loads(p.read_text()) for p in tmp_path.glob("clblast-tuning/*/xgemm-*.json")]
    assert len(saved) == 1 and saved[0]["layers"] == ["lenet:c3"]
    from backends.clblast.record import ProblemRecord
    rec = ProblemRecord.from_json(saved[0])
    tried = [t for stage in rec.stages.values() for t in stage.tried.values()]
    assert rec.problem.routine == problems.XGEMM_ALONE and any(t.ms is not None for t in tried)
    # (one more may come as the child is stopped)
    assert len(tried) >= 3 and f"CLBlast: {len(tried)} configurations tried this run" in ran.stdout


@pytest.mark.parametrize("depth, text", [
    (Depth(25, 0, 0, 0, 0, 0), "not tuned: none of its 25 problems searched yet"),
    (Depth(25, 2, 1, 3049, 3049, 2), "100% of CLBlast's default search on the 2 of 25 problems searched "
                                     "(3,049 of 3,049 configurations), complete on 2 of 25 problems, verified on 1"),
    (Depth(10, 10, 10, 9928, 9928, 10), "100% of CLBlast's default search (9,928 of 9,928 configurations), "
                                        "complete on 10 of 10 problems, verified on 10"),
    (Depth(0, 0, 0, 0, 0, 0), "no CLBlast problem"),
    # ResNet-18 on the H100: 70 configurations short of all is not 100%
    (Depth(25, 23, 25, 19169, 19239, 25), "99.6% of CLBlast's default search (19,169 of 19,239 configurations), "
                                          "complete on 23 of 25 problems, verified on 25"),
    (Depth(25, 24, 25, 19238, 19239, 25), "99.9% of CLBlast's default search (19,238 of 19,239 configurations), "
                                          "complete on 24 of 25 problems, verified on 25"),
    (Depth(25, 8, 7, 11334, 19239, 25, 0.834), "59% of CLBlast's default search (11,334 of 19,239 configurations), "
                                               "complete on 8 of 25 problems (those of 83% of CLBlast's database "
                                               "time, cheapest composition per layer), verified on 7"),
])
def test_the_depth_says_how_many_problems_were_searched_at_all(depth, text):
    # a net whose problems were never searched must not read as "0% (0 of 0 configurations)"
    assert str(depth) == text


LIMITS = DeviceLimits(65536, 1024, (1024, 1024, 64))   # a GPU's, so no test needs OpenCL to order a search


def _order(search) -> list:
    """The problems in the order the search takes them: each once, as its stages come."""
    return list(dict.fromkeys(plan.problem for plan in search.plans))


def test_the_search_goes_costliest_first_by_database_time_and_calls_then_by_flops(tmp_path):
    from backends.tuning.clblast.search import Search, _stage_rank
    store = Store(DEVICE, tmp_path)
    big, mid = problems.gemm(256, 3136, 2304), problems.gemm(64, 64, 64)
    dw = problems.convgemm(1, (1, 7, 7), 1, (3, 3), (1, 1), (1, 1))    # a depthwise conv: one call per image and group
    untimed_big, untimed_small = problems.gemm(128, 128, 128), problems.gemv(4, 8, True)
    for p, ms in ((big, 1.0), (dw, 0.01), (mid, 0.5)):
        store.save(ProblemRecord(p, database_ms=ms))
    asked = {p: ["t:x"] for p in (untimed_small, mid, big, untimed_big, dw)}
    by_flops = Search("", store, LIMITS, asked)                      # one call each: dw costs least
    assert _order(by_flops) == [big, mid, dw, untimed_big, untimed_small]
    search = Search("", store, LIMITS, asked, calls={dw: 960})       # 9.6 ms a pass against big's 1.0
    assert _order(search) == [dw, big, mid, untimed_big, untimed_small] == list(search.records)
    assert search.cost(dw) == pytest.approx(9.6) and search.cost(untimed_big) is None
    for p in asked:   # within a problem, the stages keep their order
        stages = [plan.stage for plan in search.plans if plan.problem == p]
        assert stages == sorted(stages, key=_stage_rank)
    # a verified database time stands before the one measured for the order
    store.save(verified_record(mid, {"database": 3.0, "Xgemm": 2.0}))
    assert _order(Search("", store, LIMITS, asked, calls={dw: 960}))[:3] == [dw, mid, big]


def test_measuring_costs_keeps_each_time_and_a_failed_child_leaves_the_flops_order(tmp_path, monkeypatch):
    from backends.tuning.clblast import children
    from backends.tuning.clblast.search import Search
    store = Store(DEVICE, tmp_path)
    big, dw = problems.gemm(256, 3136, 2304), problems.convgemm(1, (1, 7, 7), 1, (3, 3), (1, 1), (1, 1))
    small = problems.gemm(8, 8, 8)
    asked, calls = {p: ["t:x"] for p in (big, dw, small)}, {dw: 960}
    said, requests = [], []

    def child(req, timeout):   # the cross child: the database's time of each problem it got to
        requests.append(req)
        return [{"ready": True}, {"label": "database", "problem": big.key, "ms": 1.0, "error": None},
                {"label": "database", "problem": dw.key, "ms": 0.01, "error": None},
                {"label": "database", "problem": small.key, "ms": None, "error": "wrong result"}], True
    monkeypatch.setattr(children, "answers", child)
    search = Search("", store, LIMITS, asked, progress=said.append, calls=calls)
    search.measure_costs(10)
    assert requests[0]["task"] == "cross" and requests[0]["candidates"] == []
    assert _order(search) == [dw, big, small]
    assert store.load(dw).database_ms == 0.01 and store.load(small) is None
    assert "1 of 3 problems not timed (the child failed on them); they go last, by FLOPs" in said[-1]
    # known times are not measured again
    requests.clear()
    Search("", store, LIMITS, {p: ["t:x"] for p in (big, dw)}, calls=calls).measure_costs(10)
    assert requests == []

    def dead(req, timeout):
        return [], True
    monkeypatch.setattr(children, "answers", dead)
    said.clear()
    search = Search("", Store(DEVICE, tmp_path / "other"), LIMITS, asked, progress=said.append, calls=calls)
    search.measure_costs(10)
    assert _order(search) == [big, small, dw] and "3 of 3 problems not timed" in said[-1]


def test_measuring_costs_on_this_device_times_the_database_of_each_problem(tmp_path):
    backend_or_skip("clblast")
    from backends.tuning.clblast.search import Search
    from backends.opencl.runtime import device_index, get_runtime
    rt = get_runtime()
    store = Store(DeviceId.of(rt.info, "test"), tmp_path)
    asked = {problems.gemm(4, 8, 16): ["t:x"], problems.convgemm(1, (1, 7, 7), 1, (3, 3), (1, 1), (1, 1)): ["t:y"]}
    search = Search(device_index(rt.device), store, limits_from_device(rt.device), asked)
    search.measure_costs(120)   # returns when the child is done
    for p in asked:
        assert store.load(p).database_ms > 0 and search.cost(p) == store.load(p).database_ms


def test_old_tuning_files_load_and_the_database_time_is_the_verified_one_first():
    files = list((Path(__file__).resolve().parent.parent / "reports").glob("*/tuning/clblast-tuning/*/*.json"))
    saved = [json.loads(f.read_text()) for f in files
             if f.name not in ("device.json", "claims.json") and not f.name.startswith("net-")]   # records alone
    old = [d for d in saved if "database_ms" not in d]   # written before database_ms was kept
    assert old and len(old) < len(saved), "the tuning files in reports/ are gone, or none is of either kind"
    for d in saved:   # the verification's database time where verified, else the one kept (none in old files)
        rec = ProblemRecord.from_json(d)
        db = rec.verified.database() if rec.verified else None
        assert rec.database_ms == d.get("database_ms")
        assert rec.database_time() == (db.ms if db and db.ms is not None else d.get("database_ms"))
    rec = ProblemRecord(problems.gemm(4, 8, 16), database_ms=0.25)
    assert ProblemRecord.from_json(rec.to_json()).database_time() == 0.25
    rec.verified = verified_record(rec.problem, {"database": 0.5}).verified
    assert ProblemRecord.from_json(rec.to_json()).database_time() == 0.5


def test_the_depth_says_which_share_of_clblasts_time_the_complete_problems_make():
    a, b = problems.gemm(4, 8, 16), problems.gemm(8, 8, 8)
    c = problems.convgemm(1, (1, 7, 7), 1, (3, 3), (1, 1), (1, 1))
    records = {}
    for p, ms, complete in ((a, 1.0, True), (b, 2.0, False), (c, 0.01, True)):
        stage = StageRecord("s", "Xgemm", "abc", 2)
        for i in range(2 if complete else 1):
            stage.add(Tried(i, 1.0), {})
        records[p] = ProblemRecord(p, [], {"s": stage}, database_ms=ms)
    calls = {a: 1, b: 1, c: 100}                          # c: 1.0 ms a pass, as much as a
    depth = Tuning(records, calls).depth()
    assert depth.share == pytest.approx(0.5)
    assert str(depth) == ("83% of CLBlast's default search (5 of 6 configurations), complete on 2 of 3 problems "
                          "(those of 50% of CLBlast's database time, cheapest composition per layer), verified on 0")
    records[b].database_ms = None                         # one time unknown: no share, the text as before
    assert Tuning(records, calls).depth().share is None
    assert str(Tuning(records, calls).depth()).endswith("complete on 2 of 3 problems, verified on 0")
    # a record holding only the database's time is no search
    records[b] = ProblemRecord(b, database_ms=2.0)
    assert Tuning(records, calls).depth().searched == 2


def test_show_gives_each_net_the_share_of_clblasts_time_its_complete_problems_make(tmp_path):
    from backends.tuning.clblast.show import net_lines
    store = Store(DEVICE, tmp_path)
    calls = problems.net_calls(LENET, 2)
    gemms = [p for p in calls if p.routine == problems.GEMM]
    heaviest = max(gemms, key=lambda p: p.flops)
    for p in calls:   # a GEMM call 1 ms, an xCONVGEMM 2 ms: the GEMMs are the cheapest composition of every layer
        stage = StageRecord("s", "Xgemm", "abc", 1)
        if p == heaviest:   # only the heaviest searched to the end
            stage.add(Tried(0, 1.0), {})
        store.save(ProblemRecord(p, [], {"s": stage}, database_ms=1.0 if p in gemms else 2.0))
    lines = net_lines(store, {r.problem: r for r in store.all()}, [LENET], 2)
    assert len(gemms) == 6 and all(calls[p] == 1 for p in gemms)   # so the heaviest is 1/6 of the cheapest pass
    assert lines[0] == ("lenet batch 2: 100% of CLBlast's default search on the 1 of 10 problems searched (1 of 1 "
                        "configurations), complete on 1 of 10 problems (those of 17% of CLBlast's database "
                        "time, cheapest composition per layer), verified on 0")


def test_clblasts_pass_takes_the_cheapest_composition_of_each_layer():
    gemm, conv = problems.gemm(1, 196, 9, 384), problems.convgemm(1, (1, 14, 14), 1, (3, 3), (1, 1), (1, 1))
    fc_t, fc = problems.gemv(10, 20, True), problems.gemv(10, 20, False)
    layers = [[{gemm: 1}, {conv: 384}], [{fc_t: 1}, {fc: 1}]]
    times = {gemm: 0.04, conv: 0.03, fc_t: 0.02, fc: 0.01}
    # the depthwise conv: one batched GEMM (0.04 ms) beats 384 xCONVGEMMs (11.5 ms); the dense layer: the plain GEMV
    assert problems.cheapest_costs(layers, times.get) == pytest.approx({gemm: 0.04, conv: 0.0, fc_t: 0.0, fc: 0.01})
    # a layer with a time not known is left out, the others stand
    assert problems.cheapest_costs(layers, {gemm: 0.04, fc_t: 0.02, fc: 0.01}.get) == pytest.approx(
        {fc_t: 0.0, fc: 0.01})
    # a problem no layer poses is a layer of its own
    lone = problems.gemm(8, 8, 8)
    assert problems.covering(layers, {gemm: 1, lone: 3})[-1] == [{lone: 3}]
    # MobileNet-v2's depthwise convs come as both compositions, the xCONVGEMM once per channel
    ways = problems.net_compositions(MOBILENET_V2, 1)
    depthwise = [w for w in ways if any(p.routine == problems.CONVGEMM and n > 1 for way in w for p, n in way.items())]
    assert len(depthwise) == 17 and all(len(w) == 2 for w in depthwise)


def test_the_search_takes_the_problems_of_clblasts_cheapest_pass_first_most_of_it_per_configuration(tmp_path):
    from backends.tuning.clblast.search import Search
    store = Store(DEVICE, tmp_path)
    dw_gemm, dw_conv = problems.gemm(1, 196, 9, 384), problems.convgemm(1, (1, 14, 14), 1, (3, 3), (1, 1), (1, 1))
    pw_gemm, pw_conv = problems.gemm(64, 196, 384), problems.convgemm(1, (384, 14, 14), 64, (1, 1), (0, 0), (1, 1))
    for p, ms in ((dw_gemm, 0.04), (dw_conv, 0.03), (pw_gemm, 0.05), (pw_conv, 0.04)):
        store.save(ProblemRecord(p, database_ms=ms))
    layers = [[{dw_gemm: 1}, {dw_conv: 384}], [{pw_gemm: 1}, {pw_conv: 1}]]
    calls = {dw_gemm: 1, dw_conv: 384, pw_gemm: 1, pw_conv: 1}
    search = Search("", store, LIMITS, {p: ["t:x"] for p in calls}, calls=calls, layers=layers)
    # the xCONVGEMM costs its pass 0.04 ms over 193 configurations, the batched GEMM 0.04 over 1,526; the
    # per-channel xCONVGEMMs (11.5 ms, but of no cheapest composition) and the dearer 1x1 GEMM go after
    assert _order(search) == [pw_conv, dw_gemm, dw_conv, pw_gemm]
    assert search.cheapest_cost(dw_conv) == 0.0 and search.cost(dw_conv) == pytest.approx(11.52)


def test_a_routine_with_every_problem_verified_is_chosen_for_the_net_the_others_keep_the_database(
        tmp_path, monkeypatch):
    from backends.tuning.clblast import children
    from backends.tuning.clblast.search import Search
    from backends.tuning.clblast.verify import verify_net
    store = Store(DEVICE, tmp_path)
    a, b, g = problems.gemm(4, 8, 16), problems.gemm(8, 8, 8), problems.gemv(10, 20, True)
    store.save(verified_record(a, {"database": 0.3, "XgemmDirect": 0.2}))
    store.save(verified_record(g, {"database": 0.3, "Xgemv": 0.1}))
    weights = {a: 1, b: 1, g: 2}

    def child(req, timeout):   # the cross child: each candidate on each problem, 0.1 ms less than the database
        if req["task"] == "fresh":   # and every set right in force from the start
            return [{"problem": problems.Problem.from_json(p).key, "error": None} for p in req["problems"]], True
        return [{"label": label, "problem": problems.Problem.from_json(p).key,
                 "ms": 0.3 if label == "database" else 0.2}
                for label in ["database"] + [c[0] for c in req["candidates"]] for p in req["problems"]], True
    monkeypatch.setattr(children, "answers", child)
    search = Search("", store, LIMITS, {p: ["t:x"] for p in weights})
    choice = verify_net(search, "t batch 1", weights, 30)
    # b, a GEMM, is not verified: no GEMM family is chosen; the GEMV is, over its calls
    assert set(choice.families) == {"Xgemv"} and choice.families["Xgemv"]["ms"] == pytest.approx(0.4)
    assert choice.sets("Xgemv") and Tuning({}, weights, net=choice, per_problem=False).sets(a) == []
    store.save(verified_record(b, {"database": 0.3, "Xgemm": 0.25}))   # now every GEMM is: chosen anew
    again = verify_net(Search("", store, LIMITS, {p: ["t:x"] for p in weights}), "t batch 1", weights, 30)
    assert {"XgemmDirect", "Xgemm", "Xgemv"} == set(again.families)
    nothing = Store(DEVICE, tmp_path / "none")   # no routine with its problems all verified: no choice
    assert verify_net(Search("", nothing, LIMITS, {p: ["t:x"] for p in weights}), "t batch 1", weights, 30) is None


def test_a_routine_none_of_whose_problems_was_verified_again_keeps_its_net_choice_untimed(tmp_path, monkeypatch):
    from backends.tuning.clblast import children
    from backends.tuning.clblast.search import Search
    from backends.tuning.clblast.verify import verify_net
    store = Store(DEVICE, tmp_path)
    a, g = problems.gemm(4, 8, 16), problems.gemv(10, 20, True)
    weights = {a: 1, g: 2}

    def save(p, times, when):
        rec = verified_record(p, times)
        rec.verified.when = when
        store.save(rec)
    save(a, {"database": 0.3, "XgemmDirect": 0.2}, "2026-01-01T00:00:00+00:00")
    save(g, {"database": 0.3, "Xgemv": 0.1}, "2026-01-01T00:00:00+00:00")
    timed = []

    def child(req, timeout):
        if req["task"] == "fresh":   # every set right in force from the start; not a timing
            return [{"problem": problems.Problem.from_json(p).key, "error": None} for p in req["problems"]], True
        timed.append({problems.Problem.from_json(p).routine for p in req["problems"]})
        return [{"label": label, "problem": problems.Problem.from_json(p).key,
                 "ms": 0.3 if label == "database" else 0.2}
                for label in ["database"] + [c[0] for c in req["candidates"]] for p in req["problems"]], True
    monkeypatch.setattr(children, "answers", child)
    first = verify_net(Search("", store, LIMITS, {p: ["t:x"] for p in weights}), "t batch 1", weights, 30)
    assert {"XgemmDirect", "Xgemv"} == set(first.families) and len(timed) == 2
    timed.clear()
    save(a, {"database": 0.3, "XgemmDirect": 0.15}, "2099-01-01T00:00:00+00:00")   # the GEMM verified anew
    again = verify_net(Search("", store, LIMITS, {p: ["t:x"] for p in weights}), "t batch 1", weights, 30)
    assert timed == [{problems.GEMM}]                          # only the GEMM's sets timed again
    assert again.families["Xgemv"] == first.families["Xgemv"]


def test_a_batch_without_a_choice_of_its_own_runs_the_nearest_batchs_and_says_so(tmp_path):
    """CLBlast runs a device's tuned parameters at every size: a sweep's batch 2 gets the choice made at
    batch 1 (nearest by ratio, the smaller on a tie), never another net's, and the source names it."""
    from backends.clblast.record import NetChoice
    store = Store(DEVICE, tmp_path)
    a = problems.gemm(4, 8, 16)
    sets = [["XgemmDirect", {"WGD": 1}], ["GemmRoutine", dict(ALWAYS_DIRECT)]]
    for key in ("t batch 1", "t batch 4", "tt batch 2"):
        store.save_net(NetChoice(key, [a.key], "now", {"XgemmDirect": {"label": key, "sets": sets, "ms": 1.0,
                                                                        "database_ms": 2.0}}))
    assert store.load_net_nearest("t", 4).net == "t batch 4"          # its own
    assert store.load_net_nearest("t", 2).net == "t batch 1"          # 2x from both: the smaller
    assert store.load_net_nearest("t", 3).net == "t batch 4"
    assert store.load_net_nearest("t", 100).net == "t batch 4"
    assert store.load_net_nearest("u", 1) is None
    b = problems.gemm(4, 16, 16)                                       # batch 2's problem: never searched
    borrowed = Tuning({}, {b: 1}, net=store.load_net_nearest("t", 2), per_problem=False, own_key="t batch 2")
    assert borrowed.borrowed and borrowed.sets(b) == [(k, dict(p)) for k, p in sets]
    assert borrowed.source.startswith("tuned by `compare tune` at t batch 1: one set per kernel chosen for that "
                                      "net, in force for 1 of 1 problems")
    assert "this batch's own problems: not tuned" in borrowed.source
    each = Tuning({}, {b: 1}, net=store.load_net_nearest("t", 2), own_key="t batch 2")   # per problem: none
    assert not each.borrowed and each.changes_nothing()


def test_a_child_after_a_broken_queue_does_not_check_the_database_again(tmp_path, monkeypatch):
    """A configuration that breaks NVIDIA's queue ends its child, and the next one starts at once on the
    rest: it is told which problems an earlier child found right with CLBlast's database, so it builds no
    database program again (2.8 s a child on the H200 before, 242 such children in one 6-minute search)."""
    seen = tmp_path / "checked.txt"
    _queue_breakers(tmp_path, monkeypatch, f"open({str(seen)!r}, 'a').write(json.dumps(req['checked']) + '\\n')\n", 3)
    asked = [json.loads(line) for line in seen.read_text().splitlines()]
    assert asked == [[], [0], [0]]


def test_a_real_child_checks_only_the_problems_not_checked_before():
    backend_or_skip("clblast")
    from backends.opencl.runtime import device_index, get_runtime
    from backends.tuning.clblast import children
    from backends.tuning.clblast.space import STAGES
    a, b = problems.gemm(8, 8, 8), problems.gemm(16, 8, 8)
    stage = STAGES["xgemm_direct"][0]
    config = stage.search_order(LIMITS)[0]
    req = {"task": "search", "device": device_index(get_runtime().device), "problems": [a.to_json(), b.to_json()],
           "kernel": stage.kernel, "route": None, "configs": [[0, config, [0, 1]]], "repeats": 1, "checked": [1]}
    proc = children.spawn(req)
    out = proc.stdout.read()
    proc.wait(timeout=300)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines[0] == {"ready": True, "checked": 1}
    assert {(r["problem"], r["error"]) for r in lines[1:]} == {(0, None), (1, None)}
