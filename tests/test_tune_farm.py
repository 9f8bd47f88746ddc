"""`compare tune --scheduler`: CLBlast's and tinygrad's searches spread over
a Dask cluster's workers (a LocalCluster of two on this machine), the
results written by the client alone; a worker killed mid-search loses only
what it was timing; an address where no scheduler answers is refused in
one line within the budget.  The local search needs no Dask."""
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from backends.clblast.record import ProblemRecord
from conftest import backend_or_skip, module_or_skip

ARGV = ["tune", "--net", "lenet", "--batch", "1", "--routines", "gemv", "--scope", "clblast"]


def test_the_local_search_imports_no_dask():
    code = ("import sys, compare.commands.tune, backends.tuning, backends.tuning.clblast.scope\n"
            "import backends.tuning.tinygrad.scope\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_scheduler_and_devices_are_refused_in_one_line_when_wrong(tmp_path):
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    for argv, message in [(["--devices", "all"], "--devices all tunes every device kind among a farm's workers"),
                          (["--scheduler", "nowhere"], "--scheduler 'nowhere' names no port"),
                          (["--scheduler", "tcp://127.0.0.1:9", "--scope", "tiles"], "tiles run here: tune it "
                                                                                      "without --scheduler")]:
        proc = subprocess.run([sys.executable, "-m", "compare", *ARGV[:-2], *argv], capture_output=True, text=True,
                              env=env, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture
def cluster():
    backend_or_skip("clblast")
    distributed = module_or_skip("distributed", "farm")   # under `make test` a failure, not a skip
    before = dict(os.environ)   # LocalCluster sets heap and thread settings in this process's environment
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as c:
            with distributed.Client(c) as client:
                yield c, client
    finally:
        os.environ.clear()
        os.environ.update(before)


def _records(cache) -> list[ProblemRecord]:
    folder = next((cache / "clblast-tuning").iterdir())
    out = []
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())   # every file whole
        if path.name not in ("device.json", "claims.json") and not path.name.startswith("net-"):
            out.append(ProblemRecord.from_json(data))
    assert not list(folder.glob("*.damaged-*"))
    return out


def _by(records) -> dict[str, int]:
    by: dict[str, int] = {}
    for rec in records:
        for stage in rec.stages.values():
            for t in stage.tried.values():
                by[t.by] = by.get(t.by, 0) + 1
    return by


@pytest.mark.long
def test_two_workers_fill_the_store_and_a_worker_killed_mid_search_loses_only_what_it_was_timing(
        cluster, tmp_path, monkeypatch):
    """Both workers time configurations, the records name which did which, as a local run's records name
    this process; one killed once both have answered: the search goes on on the other, and every answer
    either gave is in the store, whole.  The budget is counted in configurations tried (budget.Steps), and
    the moments come from the search itself, so the same happens at any speed."""
    from backends import tuning
    from backends.tuning.budget import Steps
    from backends.tuning.clblast.search import Search
    from compare.files import check_writable
    from nets import LENET
    c, client = cluster
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    workers = client.run(os.getpid)   # address -> pid
    victim = sorted(workers)[0]
    survivor = next(w for w in workers if w != victim)
    budget = 100_000   # configurations: more than the whole search; the test ends it once it has seen enough
    steps, at_kill = Steps(), {}
    record = Search._record

    def watched(search, child, line):   # each answer as the search keeps it, in the test's hands
        record(search, child, line)
        by = _by(search.records.values())
        if not at_kill and set(by) == set(workers):   # both have answered: kill one
            at_kill.update(by)
            os.kill(workers[victim], signal.SIGKILL)
        elif at_kill and search.said and by.get(survivor, 0) > at_kill[survivor]:
            steps.step(budget)   # the loss seen and the survivor went on: the whole budget spent at once
    monkeypatch.setattr(Search, "_record", watched)
    request = tuning.Request([LENET], ["clblast"], budget, batch=1, routines=["gemv"],
                             scheduler=tuning.parse_address(c.scheduler_address),
                             harness=tuning.Harness(None, None, check_writable))
    out = " ".join("\n".join(tuning.tune(request, clock=steps).lines).split())   # its lines as one
    assert at_kill, "the two workers never both answered"
    assert f"on 2 worker(s): {', '.join(sorted(workers))}" in out
    assert re.search(rf"worker {re.escape(victim)} lost mid-search: ", out), out
    records = _records(tmp_path)
    by = _by(records)
    assert set(by) == set(workers)                          # which worker timed what
    assert by[victim] >= at_kill[victim]                    # nothing it answered was lost
    assert by[survivor] > at_kill[survivor]                 # the search went on on the other
    assert sum(by.values()) == int(re.search(r"CLBlast: (\d+) configurations tried", out)[1])   # none twice
    # as a local run: the problems of the asked routines, their stages in CLBlast's order, none tried twice
    assert sorted(r.problem.key for r in records) == ["gemv 120x400", "gemv 120x400 transposed", "gemv 84x120",
                                                      "gemv 84x120 transposed"]
    assert all(list(r.stages) == ["xgemv V=1", "xgemv V=2", "xgemv V=3"] for r in records)


def test_the_farm_tunes_this_machines_kind_or_every_kind_and_names_the_workers_left_out():
    from backends.clblast.record import DeviceId
    from backends.clblast.tuned import clblast_version
    from backends.tuning import farm
    from backends.tuning.address import Address
    from backends.tuning.clblast.space import DeviceLimits
    from nets.errors import UserError
    lib, limits = clblast_version(), DeviceLimits(65536, 256, (256, 256, 256))
    a, b = DeviceId("A", "p", "1", lib), DeviceId("B", "p", "2", lib)
    kinds = [farm.Kind(a, limits, False, [farm.Place("tcp://w1:1", "0:0", False, 2)]),
             farm.Kind(b, limits, True, [farm.Place("tcp://w2:1", "0:0", True, 8, label="gpu0"),
                                         farm.Place("tcp://w4:1", "1:0", True, 8)])]
    found = farm.Farm(Address("tcp", "s", 8786), None, kinds, {"tcp://w3:1": "no OpenCL device"})
    (kind,) = farm.kinds_tuned(found, b, False)            # this machine's kind, on its workers only
    assert [p.name for p in kind.places] == ["gpu0 (tcp://w2:1)", "tcp://w4:1"]
    where = found.where(kind, False)
    assert "left out, another device: tcp://w1:1 (A (1, " in where and "no OpenCL device: tcp://w3:1" in where
    assert farm.kinds_tuned(found, b, True) == kinds       # --devices all: each kind
    with pytest.raises(UserError, match="no worker has this machine's device C"):
        farm.kinds_tuned(found, DeviceId("C", "p", "9", lib), False)
    with pytest.raises(UserError, match="tune each with --devices all"):
        farm.kinds_tuned(found, None, False)               # no device here, and two kinds there
    kinds.pop(0)
    assert farm.kinds_tuned(found, None, False) == [kinds[0]]   # no device here: the only kind there is


# -- tinygrad's kernels over the farm
def test_tinygrad_on_two_workers_fills_the_store_a_local_run_reads_and_says_who_searched_what(tmp_path, monkeypatch):
    backend_or_skip("tinygrad")
    distributed = module_or_skip("distributed", "farm")
    for k, v in {"BEAM_UPCAST_MAX": "1", "BEAM_LOCAL_MAX": "1"}.items():   # a small search: seconds a kernel
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    before = dict(os.environ)
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as c:
            argv = [sys.executable, "-m", "compare", "tune", "--scope", "tinygrad", "--net", "lenet", "--batch", "1"]
            proc = subprocess.run(argv + ["--budget-s", "240", "--scheduler", c.scheduler_address],
                                  capture_output=True, text=True, timeout=600)
            workers = sorted(c.scheduler_info["workers"])
    finally:
        os.environ.clear()
        os.environ.update(before)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"tinygrad: 6 kernels searched this run at width 2 .*, 0 left", " ".join(proc.stdout.split())), \
        proc.stdout
    assert f"on 2 worker(s): {', '.join(workers)}" in " ".join(proc.stdout.split())   # its lines wrapped
    # the store a local run reads (no --scheduler): every kernel, each naming the worker that searched it
    shown = subprocess.run(argv + ["--show"], capture_output=True, text=True, timeout=300)
    assert "lenet batch 1: 6 of 6 distinct kernels searched at width 2" in shown.stdout, shown.stdout + shown.stderr
    on = re.findall(r"searched in \d+ s on (\S+):", " ".join(shown.stdout.split()))   # its lines wrapped
    assert len(on) == 6 and set(on) <= set(workers), shown.stdout
    choices = json.loads(next(tmp_path.glob("tinygrad-search/*/choices.json")).read_text())
    assert sorted(c["where"] for c in choices["kernels"]) == sorted(on)


# -- addresses where no scheduler answers
class _Listener:
    """A TCP listener on a free port of this machine that answers each connection with `reply` (None: says
    nothing and keeps the connection open)."""

    def __init__(self, reply: bytes | None):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.held = []

        def serve():
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                self.held.append(conn)
                if reply is not None:
                    conn.sendall(reply)
        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        for c in self.held:
            c.close()
        self.sock.close()


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case, message", [
    ("http://127.0.0.1:8786", "the scheme 'http' is not a Dask scheduler's"),
    ("127.0.0.1", "names no port"),
    ("tcp://127.0.0.1:0", "port 0 is not one from 1 to 65535"),
    ("tcp://127.0.0.1:70000", "with a port from 1 to 65535"),
    ("tcp://:8786", "names no host"),
    ("tcp://h:1/path", "a scheduler's address has a host and a port only"),
    ("refused", "nothing listens there (connection refused)"),
    ("silent", "something listens there but said nothing within"),
    ("http", "the listener there is not a Dask scheduler (it began with b'HTTP/1.1"),
    ("huge", "the listener there is not a Dask scheduler (it began with b'\\xff"),
    ("short", "the listener there is not a Dask scheduler (it sent b'"),
])
def test_an_address_where_no_scheduler_answers_is_refused_in_one_line_within_the_budget(case, message, tmp_path):
    module_or_skip("distributed", "farm")
    replies = {"silent": None, "http": b"HTTP/1.1 400 Bad Request\r\n\r\n", "huge": b"\xff" * 64,
               "short": (12).to_bytes(8, "little") + b"hello there!"}
    listener = _Listener(replies[case]) if case in replies else None
    address = (f"tcp://127.0.0.1:{listener.port}" if listener else
               f"tcp://127.0.0.1:{_free_port()}" if case == "refused" else case)
    try:
        proc = subprocess.run([sys.executable, "-m", "compare", *ARGV, "--budget-s", "4", "--scheduler", address],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path)))
    finally:
        if listener:
            listener.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and address.split("/")[-1] in lines[0]
    waited = re.search(r"within (\d+) s", lines[0])
    if case == "silent":   # waited on the budget's clock (4 s, less what came before), not SAY_S or Dask's own
        assert waited and 1 <= int(waited[1]) <= 4, lines[0]
    # what it took is not asserted: the interpreter's start is the machine's; the run's timeout is a hang guard


def test_the_farm_is_connected_once_for_every_scope_within_the_first_share_and_closed_once(monkeypatch):
    from backends.tuning import farm, place
    from backends.tuning.address import parse

    calls = []

    class Connected:
        def close(self):
            calls.append("close")

        def where(self, kind, every_kind):
            return f"{kind} (every kind: {every_kind})"

    monkeypatch.setattr(farm, "connect", lambda address, seconds: calls.append(("connect", str(address), seconds))
                        or Connected())
    monkeypatch.setattr(farm, "kinds_tuned", lambda connected, here, every_kind: ["kind A"])
    monkeypatch.setattr(place, "_here", lambda request: None)
    on = place.OnFarm(parse("tcp://farm:8786"), every_kind=True)
    assert on.on_farm and not place.Here().on_farm
    assert on.kinds(None, 5.0)[1] == ["kind A"] and on.kinds(None, 900.0)[1] == ["kind A"]   # the second scope's
    assert on.where("kind A") == "kind A (every kind: True)"
    on.close()
    on.close()
    assert calls == [("connect", "tcp://farm:8786", 5.0), "close"]
