"""The tuner's child processes (child.py), started, read and watched: the
same here (`--jobs` children side by side) and on a farm's worker
(farm.py), which runs this very code.

A child answers in JSON lines as it goes; one silent too long (`quiet_s`),
or silent and idle (watch.py: PoCL's spoilt heap can deadlock malloc), is
stopped and the reason kept; one past its time, or asked to stop, is
stopped without blame.  LocalPool is the search's place to run children on
this machine; farm.DaskPool is the same over a Dask cluster.
"""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from . import watch

QUIET_S = 180.0   # a search child silent this long (one configuration) is stopped: a hung build or kernel
#                   (sooner where it is also idle: watch.IDLE_S) ...
QUIET_GPU_S = 60.0   # ... on a GPU, whose driver compiles the largest configuration in seconds and runs it in
#                      milliseconds: a kernel that never ends keeps the host spinning, so it is never idle


@dataclass
class Ended:
    """How a child ended: its exit code; why we stopped it where it was its doing (hung, silent); whether
    it was stopped without blame (its time was up, or asked); its last line on stderr."""

    code: int | None
    why: str | None = None
    stopped: bool = False
    last_words: str = "(no output)"


def spawn(req: dict) -> subprocess.Popen:
    """A child of the tuner working on `req`."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    # side by side, children must not each start a thread per core for numpy's BLAS
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "backends.tuning.clblast.child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                            start_new_session=True)   # Ctrl-C is the parent's: it stops its children itself
    proc.stderr_file = err
    proc.stdin.write(json.dumps(req))
    proc.stdin.close()
    return proc


def _last_words(proc) -> str:
    try:
        proc.stderr_file.seek(0)
        lines = proc.stderr_file.read().decode(errors="replace").strip().splitlines()
    except (OSError, AttributeError):
        return "(no output)"
    return lines[-1][:300] if lines else "(no output)"


def run_child(req: dict, emit: Callable[[str], None], seconds: float, quiet_s: float | None = QUIET_S,
              should_stop: Callable[[], bool] = lambda: False) -> Ended:
    """Run one child on `req` here, each line it writes handed to `emit` as it comes, for at most `seconds`."""
    proc = spawn(req)
    lines: queue.Queue = queue.Queue()

    def read():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=read, daemon=True).start()
    now = time.monotonic()
    end, last, seen = now + seconds, now, watch.Watch(proc.pid, now)
    why, stopped = None, False
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                now = time.monotonic()
                if should_stop() or now >= end:
                    stopped = True
                elif quiet_s is not None and now - last > quiet_s:
                    why = f"no answer in {quiet_s:.0f} s (stopped)"
                elif seen.hung(now, last):
                    why = f"hung: silent and no processor time for {watch.IDLE_S:.0f} s (stopped)"
                if stopped or why:
                    break
                continue
            if line is None:
                break
            last = time.monotonic()
            emit(line)
    finally:
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
    while True:   # what it said before it was stopped is kept
        try:
            line = lines.get(timeout=2.0)
        except queue.Empty:
            break
        if line is None:
            break
        emit(line)
    return Ended(code, why, stopped, _last_words(proc))


def answers(req: dict, timeout: float) -> tuple[list[dict], bool]:
    """The JSON lines a child answers `req` with, and whether it ended within `timeout`: it exited, or it
    hung (silent and idle for watch.IDLE_S: stopped, the answers it owed missing)."""
    got: list[dict] = []

    def keep(line: str) -> None:
        try:
            d = json.loads(line)
        except ValueError:
            return   # a library's stray output on stdout
        if isinstance(d, dict):
            got.append(d)
    ended = run_child(req, keep, max(timeout, 0.0), quiet_s=None)
    return got, not ended.stopped


def this_process() -> str:
    """Who times configurations here, as a record names it: this machine and process."""
    return f"{socket.gethostname()} pid {os.getpid()}"


class LocalPool:
    """Children on this machine, `jobs` of them side by side, on the OpenCL device `device_index`; a search
    child silent `quiet_s` is stopped."""

    def __init__(self, device_index: str, jobs: int = 1, quiet_s: float = QUIET_S):
        self.device_index, self.jobs, self.name, self.quiet_s = device_index, max(1, jobs), this_process(), quiet_s
        self._stop: dict[int, threading.Event] = {}

    def slots(self) -> list[str]:
        return [self.name] * self.jobs

    def lost(self) -> list[str]:
        return []   # this machine does not go away

    def start(self, req: dict, place: str, events: queue.Queue, handle) -> None:
        """Run a search child on `req`; its lines come into `events` as (handle, line), then (handle, Ended)."""
        stop = self._stop[id(handle)] = threading.Event()

        def work():
            try:
                ended = run_child({**req, "device": self.device_index}, lambda line: events.put((handle, line)),
                                  float("inf"), self.quiet_s, should_stop=stop.is_set)
            except Exception as exc:  # noqa: BLE001 - said as the child's end, never a thread's traceback
                # (an interrupt can end the process while this thread still starts a child or its reader)
                ended = Ended(None, None, stop.is_set(), f"the child could not run: {type(exc).__name__}: {exc}")
            self._stop.pop(id(handle), None)
            events.put((handle, ended))
        threading.Thread(target=work, daemon=True).start()

    def stop(self, handle) -> None:
        if id(handle) in self._stop:
            self._stop[id(handle)].set()

    def answers(self, req: dict, timeout: float) -> tuple[list[dict], bool]:
        return answers({**req, "device": self.device_index}, timeout)

    def close(self) -> None:
        for stop in list(self._stop.values()):
            stop.set()
