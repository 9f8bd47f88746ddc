"""`compare tune --scheduler`: CLBlast's search spread over a Dask cluster's
workers (a LocalCluster of two on this machine), the results written by the
client alone; a worker killed mid-search loses only what it was timing.
The local search needs no Dask."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from backends.clblast.record import ProblemRecord
from conftest import backend_or_skip, module_or_skip

ARGV = ["tune", "--net", "lenet", "--batch", "1", "--routines", "gemv", "--scope", "clblast"]


def test_the_local_search_imports_no_dask():
    code = ("import sys, compare.tune, compare.tune_cli, backends.tuner, backends.tuner.search\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_scheduler_and_devices_are_refused_in_one_line_when_wrong(tmp_path):
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    for argv, message in [(["--devices", "all"], "--devices all tunes every device kind among a farm's workers"),
                          (["--scheduler", "nowhere"], "--scheduler takes a Dask scheduler's address"),
                          (["--scheduler", "tcp://127.0.0.1:9", "--scope", "tiles"], "our tiles are tuned here")]:
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


def test_two_workers_fill_the_store_and_a_worker_killed_mid_search_loses_only_what_it_was_timing(
        cluster, tmp_path):
    """Both workers time configurations, the records name which did which, as a local run's records name
    this process; one killed once it has answered: the search goes on on the other, and every answer
    either gave is in the store, whole."""
    c, client = cluster
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    workers = client.run(os.getpid)   # address -> pid
    proc = subprocess.Popen([sys.executable, "-m", "compare", *ARGV, "--budget-s", "30", "--scheduler",
                             c.scheduler_address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    killed, at_kill = None, {}
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
        try:
            at_kill = _by(_records(tmp_path))
        except (StopIteration, ValueError, OSError):
            continue   # not written yet
        if set(at_kill) == set(workers):   # both have answered: kill one
            killed = sorted(workers)[0]
            os.kill(workers[killed], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert killed is not None, f"the two workers did not both answer in time: {at_kill}"
    assert f"on 2 worker(s): {', '.join(sorted(workers))}" in out
    assert re.search(rf"worker {re.escape(killed)} lost mid-search: ", out), out
    records = _records(tmp_path)
    by = _by(records)
    survivor = next(w for w in workers if w != killed)
    assert set(by) == set(workers)                          # which worker timed what
    assert by[killed] >= at_kill[killed]                    # nothing it answered was lost
    assert by[survivor] > at_kill[survivor]                 # the search went on on the other
    assert sum(by.values()) == int(re.search(r"CLBlast: (\d+) configurations tried", out)[1])   # none twice
    # as a local run: the problems of the asked routines, their stages in CLBlast's order, none tried twice
    assert sorted(r.problem.key for r in records) == ["gemv 120x400", "gemv 120x400 transposed", "gemv 84x120",
                                                      "gemv 84x120 transposed"]
    assert all(list(r.stages) == ["xgemv V=1", "xgemv V=2", "xgemv V=3"] for r in records)


def test_the_farm_tunes_this_machines_kind_or_every_kind_and_names_the_workers_left_out(monkeypatch):
    from types import SimpleNamespace

    from backends.clblast.record import DeviceId
    from backends.clblast.tuned import clblast_version
    from backends.tuner import farm
    from backends.tuner.space import DeviceLimits
    from compare import tune
    from nets.errors import UserError
    lib, limits = clblast_version(), DeviceLimits(65536, 256, (256, 256, 256))
    a, b = DeviceId("A", "p", "1", lib), DeviceId("B", "p", "2", lib)
    kinds = [farm.Kind(a, limits, False, [farm.Place("tcp://w1:1", "0:0", False, 2)]),
             farm.Kind(b, limits, True, [farm.Place("tcp://w2:1", "0:0", True, 8), farm.Place("tcp://w4:1", "1:0", True, 8)])]
    monkeypatch.setattr(farm, "connect", lambda address: (None, kinds, {"tcp://w3:1": "no OpenCL device"}))
    monkeypatch.setattr(farm, "DaskPool", lambda client, places, jobs: [p.worker for p in places])

    def run(here: str | None, every: bool = False):
        r = tune.Run([], None, print, scheduler="tcp://s:8786", every_kind=every)
        if here is None:
            def no_device():
                raise UserError("no OpenCL platform")
            r.runtime = no_device
        else:
            r._rt = SimpleNamespace(info={"name": here, "platform": "p", "driver": {"A": "1", "B": "2"}.get(here, "9")})
        return tune.targets(r)
    (target, pool, where), = run("B")                     # this machine's kind, on its workers only
    assert target.device == b and pool == ["tcp://w2:1", "tcp://w4:1"]
    assert "left out, another device: tcp://w1:1 (A, 1, " in where and "no OpenCL device: tcp://w3:1" in where
    assert [t.device for t, _, _ in run("B", every=True)] == [a, b]   # --devices all: each kind
    with pytest.raises(UserError, match="no worker has this machine's device C"):
        run("C")
    with pytest.raises(UserError, match="tune each with --devices all"):
        run(None)                                          # no device here, and two kinds there
    kinds.pop(0)
    assert [t.device for t, _, _ in run(None)] == [b]      # no device here: the only kind there is
