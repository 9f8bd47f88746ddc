"""Ctrl-C (SIGINT) and SIGTERM at several points of the commands: the
command stops, prints one line, exits 130 (143 for SIGTERM), writes no
new file and leaves every existing one as it was.  The signals go to the
whole process group, as a terminal sends Ctrl-C.

No test guesses how long the command takes to get somewhere: each waits
until the command says it is there (nets/ready.py: a point written to the
file COMPARE_READY_FILE names, or a file of its store), then signals it.
HANG_S only guards against a hang; none of it is spent when all is well."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyopencl as cl
import pytest

from backends.opencl.runtime import get_runtime
from nets import errors
from nets.ready import VARIABLE
from compare.cli import main
from conftest import backend_or_skip

HANG_S = 300


class Command:
    """`compare argv` in a process group of its own, its stderr kept in a file (a pipe nobody reads while the
    test waits could fill and stop it), the points it reaches in another."""

    def __init__(self, argv, points: Path, env=None):
        self.points = points
        self._err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "compare", *argv], stdout=subprocess.DEVNULL,
                                     stderr=self._err, text=True, start_new_session=True,
                                     env=dict(os.environ, **{VARIABLE: str(points)}, **(env or {})))

    def reached(self) -> list[str]:
        return self.points.read_text().split() if self.points.exists() else []

    def wait_until(self, ready, what: str) -> None:
        """Until `ready()`; a failure if the command ended first or HANG_S passed."""
        deadline = time.monotonic() + HANG_S
        while not ready():
            if self.proc.poll() is not None:
                pytest.fail(f"the command ended before {what} (exit {self.proc.returncode}): {self.err()[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"no {what} in {HANG_S} s: {self.err()[-3000:]}")
            time.sleep(0.05)

    def signal(self, sig) -> tuple[int, str, float]:
        """`sig` to the whole group; the exit code, stderr and the seconds it took to end."""
        os.killpg(self.proc.pid, sig)
        t0 = time.monotonic()
        try:
            self.proc.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {HANG_S} s after {signal.Signals(sig).name}: {self.err()[-3000:]}")
        return self.proc.returncode, self.err(), time.monotonic() - t0

    def err(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def points(tmp_path_factory):
    return tmp_path_factory.mktemp("ready") / "points"


def _interrupt_at(argv, point: str, points: Path, sig=signal.SIGINT, env=None):
    """`compare argv` signalled once it reaches `point`: (exit code, stderr, the points it reached)."""
    cmd = Command(argv, points, env)
    cmd.wait_until(lambda: point in cmd.reached(), f"point {point!r}")
    code, err, _ = cmd.signal(sig)
    return code, err, cmd.reached()


def _stopped_cleanly(code, err, sig, folder, before: dict):
    assert code == 128 + sig, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines[-1].startswith(f"interrupted ({signal.Signals(sig).name}): stopped"), err
    assert "Traceback" not in err
    assert {p.name: p.read_text() for p in folder.iterdir()} == before   # nothing new, nothing changed


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "earlier.json").write_text("an earlier results file")
    return tmp_path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_timing(folder, points, sig):
    code, err, reached = _interrupt_at(["run", "--net", "lenet", "--backends", "numpy", "--repeats", "30000",
                                        "--peak-gflops", "1", "--out", str(folder / "new.json")], "timing", points, sig)
    _stopped_cleanly(code, err, sig, folder, {"earlier.json": "an earlier results file"})
    assert "timed" not in reached, "the timed passes all ran before the signal was acted on"


def test_ctrl_c_during_kernel_builds(folder, points, tmp_path_factory):
    backend_or_skip("vectorised")
    fresh = tmp_path_factory.mktemp("pocl-cache")   # nothing cached: every kernel compiles now
    code, err, reached = _interrupt_at(["run", "--net", "vgg16", "--backends", "vectorised", "--mode", "performance",
                                        "--peak-gflops", "1", "--out", str(folder / "new.json")], "building", points,
                                       env={"POCL_CACHE_DIR": str(fresh)})
    _stopped_cleanly(code, err, signal.SIGINT, folder, {"earlier.json": "an earlier results file"})
    assert "timing" not in reached


def test_ctrl_c_while_the_tensorflow_child_works(folder, points):
    backend_or_skip("tensorflow")
    code, err, reached = _interrupt_at(["run", "--net", "lenet", "--backends", "tensorflow", "--repeats", "30000",
                                        "--out", str(folder / "new.json")], "timing", points)
    _stopped_cleanly(code, err, signal.SIGINT, folder, {"earlier.json": "an earlier results file"})
    assert "timed" not in reached, "the timed passes all ran before the signal was acted on"
    assert "grace" not in reached, "the child was given its grace instead of stopping with the group"


def _records(cache) -> list[Path]:
    """The problems' records of CLBlast's tuning under `cache` (each written whole, then renamed in place)."""
    return [f for f in cache.glob("clblast-tuning/*/*.json")
            if f.name not in ("device.json", "claims.json") and not f.name.startswith("net-")]


def test_ctrl_c_during_tuning_keeps_what_was_measured_and_writes_nothing_half(folder, points, tmp_path_factory):
    """The search keeps each configuration's result as it comes: an interrupt leaves whole files only,
    and stops the search's children."""
    import json
    backend_or_skip("clblast")
    cache = tmp_path_factory.mktemp("tune-cache")
    cmd = Command(["tune", "--net", "lenet", "--budget-s", "300", "--scope", "clblast"], points,
                  env={"COMPARE_CACHE_DIR": str(cache)})
    cmd.wait_until(lambda: _records(cache), "configuration measured")   # ready: the search is under way
    code, err, _ = cmd.signal(signal.SIGINT)
    _stopped_cleanly(code, err, signal.SIGINT, folder, {"earlier.json": "an earlier results file"})
    files = [f for f in cache.rglob("*") if not f.name.endswith(".lock")]   # the writers' locks stay, empty
    assert not [f for f in files if f.name.startswith(".")], files      # no staging file left behind
    assert _records(cache), "what was measured was not kept"
    for f in files:
        if f.is_file():   # the records only: the search released its claims
            assert json.loads(f.read_text())["schema"] == "clblast-compare/clblast-tuning"
    assert not _search_children_of(cache), "search children still running after the interrupt"


def _search_children_of(cache) -> list[str]:
    """Pids of search children started for this cache folder (they inherit COMPARE_CACHE_DIR), so that
    another suite's searches on the same machine are not counted."""
    mine = f"COMPARE_CACHE_DIR={cache}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (b"backends.tuning.clblast.child" in (proc / "cmdline").read_bytes()
                    and mine in (proc / "environ").read_bytes().split(b"\0")):
                found.append(proc.name)
        except OSError:   # gone meanwhile, or not ours to read
            continue
    return found


def test_a_build_that_fails_because_a_signal_came_is_the_signal(monkeypatch):
    # an OpenCL compiler whose temporary files its own signal handler removed
    # reports a failed build: once a signal has come, that is the interrupt
    rt = get_runtime()

    def cut_short(self, *args, **kwargs):
        errors.note_signal(signal.SIGINT)
        raise cl.RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE - unable to rename temporary file")
    monkeypatch.setattr(cl.Program, "build", cut_short)
    try:
        with pytest.raises(errors.Interrupted):
            rt.program("__kernel void k(__global float *a) { a[0] = 1.0f; }", {"UNIQUE": 12345})
    finally:
        errors.forget_signals()


def test_a_build_holds_ctrl_c_back_from_the_processes_the_compiler_starts(monkeypatch):
    """PoCL links each program with a linker process of its own; a Ctrl-C to the process group killed it
    mid-build and PoCL aborted the whole run (exit -6, 1 run in 10 interrupted during builds).  A build
    holds the signals, so what it starts inherits them held, and they arrive once it is done."""
    rt = get_runtime()
    started = []

    def build_starting_a_process(self, *args, **kwargs):
        # says it is up once Python has started: a Ctrl-C that reached it before then has killed it
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                                stdout=subprocess.PIPE, text=True)
        os.kill(proc.pid, signal.SIGINT)   # as a Ctrl-C to the group reaches the linker
        started.append(proc)
        return self
    monkeypatch.setattr(cl.Program, "build", build_starting_a_process)
    rt.program("__kernel void k(__global float *a) { a[0] = 2.0f; }", {"UNIQUE": 23456})
    proc = started[0]
    try:
        assert proc.stdout.readline() == "up\n", "the compiler's process died of the Ctrl-C"
        assert proc.poll() is None, "the compiler's process died of the Ctrl-C"
    finally:
        proc.kill()
        proc.wait()


def test_ctrl_c_while_a_report_is_written_leaves_the_old_report(tmp_path, monkeypatch, capsys):
    from compare.report import plots
    from compare.results import write_results
    from results_factory import small_results
    write_results(tmp_path / "r.json", small_results())
    out = tmp_path / "rep"
    assert main(["report", str(tmp_path / "r.json"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = []

    def interrupted(res, path, *rest):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return False
    monkeypatch.setattr(plots, "speedups", interrupted)
    monkeypatch.setattr(plots, "utilisation", interrupted)
    assert main(["report", str(tmp_path / "r.json"), "--out", str(out)]) == 130
    assert capsys.readouterr().err.startswith("interrupted (SIGINT)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "rep"]   # no staging folder left


def _processes_of(cache, settle_s: float = 5.0) -> list[str]:
    """Every process still running with COMPARE_CACHE_DIR=cache (the tune's children and what they started),
    looked at until none is or `settle_s` passed: a child killed as its parent ended can take a moment on a
    loaded machine to be gone (seen once in the suite on 2 cores); one left running is still found."""
    mine = f"COMPARE_CACHE_DIR={cache}".encode()
    end = time.monotonic() + settle_s
    while True:
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if mine in (proc / "environ").read_bytes().split(b"\0") and (proc / "stat").read_text().split()[2] != "Z":
                    found.append(proc.name)
            except (OSError, IndexError):
                continue
        if not found or time.monotonic() >= end:
            return found
        time.sleep(0.2)


def test_ctrl_c_in_a_multi_scope_tune_ends_every_child_and_thread_at_once(points, tmp_path_factory):
    """Was: 10 s to exit (the search's child given its grace) and a thread's `ValueError: seek of closed file`."""
    backend_or_skip("tinygrad")
    cache = tmp_path_factory.mktemp("tune-cache")
    cmd = Command(["tune", "--scope", "tinygrad,tiles", "--net", "lenet", "--budget-s", "600"], points,
                  env={"COMPARE_CACHE_DIR": str(cache)})
    # ready: the survey is saved, so the search threads are waiting on the child's search
    cmd.wait_until(lambda: list(cache.glob("tinygrad-search/*/choices.json")), "survey saved")
    code, err, took = cmd.signal(signal.SIGINT)
    assert code == 130 and "Traceback" not in err and "Exception in thread" not in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interrupted (SIGINT): stopped"), err[-3000:]
    assert "grace" not in cmd.reached(), f"a child was given its grace to end ({took:.1f} s to stop)"
    assert not _processes_of(cache), "a child of the tune still runs after the interrupt"
