"""The runner's own process drawn (`compare run --draws N`, N > 1), as the sides' children are drawn
(compare/draws.py).  On the H200's guest a fresh process draws its speed as it starts, and the runner's
drew slow too: on 2026-11-29 four of five runner processes ran a fixed piece of plain Python 1.8x slower
than fresh processes beside them (reports/nvidia-h200/NOTES.md), and the runner's process runs our
kernels.  So before such a run the runner times that piece (backends/host.py) in itself and
in two fresh processes; where it is SLOW_PROCESS times slower than the faster of them, the run starts
again in a fresh process, which this one waits for and hands its signals to.  At most N processes in
all: the last runs whatever it drew.  The figure of each runner process drawn goes into the results
(Host.runner_draws), this one's last.  Not drawn by default, unlike the children (backends/screen.py):
in steps 33-34 each of three runners drawn again was slow again (and a slowness can set in after a
process starts, NOTES.md), while a fresh runner costs the first answer its imports again."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from backends.host import plain_python_ms
from backends.isolated import Worker

from .noise import SLOW_PROCESS

ENV = "COMPARE_RUNNER_DRAWS"   # the figures (ms) of the runner processes drawn before this one, comma-separated
FRESH = 2                      # fresh processes timed beside this one
_ROOT = str(Path(__file__).resolve().parents[1])   # where `compare` imports from, for the fresh runner
_drawn: list[float] = []       # set by `redraw` in the process that runs: every runner's figure, this one's last


def earlier() -> list[float]:
    """The figures of the runner processes drawn before this one (none where this is the first)."""
    try:
        return [float(v) for v in os.environ.get(ENV, "").split(",") if v.strip()]
    except ValueError:
        return []   # set by hand to something else: this is the first


def drawn() -> list[float] | None:
    """Each runner process's figure, this one's last; None where the runner was not drawn."""
    return list(_drawn) or None


def fresh_ms() -> float | None:
    """The faster of FRESH fresh processes' figures, timed one after another, each as a backend's child times
    it (backends/isolated.py); None where none could run."""
    got = []
    for _ in range(FRESH):
        worker = None
        try:
            worker = Worker("a fresh process's plain Python")
            got.append(worker.plain_python_ms())
        except Exception:  # noqa: BLE001 - a probe that cannot run: this process runs the run
            continue
        finally:
            if worker is not None:
                worker.close()
    return min(got) if got else None


def _importable(env: dict) -> dict:
    """`env` with this checkout first on PYTHONPATH, so a fresh process imports what this one did."""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    return env


def slow(mine: float, fresh: float | None) -> bool:
    return fresh is not None and mine >= SLOW_PROCESS * fresh


def redraw(argv: list[str], draws: int) -> int | None:
    """Before a run drawn `draws` times: None where this process runs it (its figure kept for the results),
    else the exit status of the run a fresh process made, this one having waited for it."""
    before = earlier()
    os.environ.pop(ENV, None)   # read: this run's own children are not runners drawn
    mine = round(plain_python_ms(), 2)
    if len(before) + 1 >= draws or not slow(mine, fresh_ms()):
        _drawn[:] = before + [mine]
        return None
    env = _importable({**os.environ, ENV: ",".join(f"{v:g}" for v in before + [mine])})
    # its own process group: a ^C reaches it once, through this process, as does `timeout`'s TERM
    child = subprocess.Popen([sys.executable, "-m", "compare", *argv], env=env, process_group=0)
    handed = {s: signal.signal(s, lambda signum, _frame: child.send_signal(signum))
              for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = child.wait()
        return 128 - code if code < 0 else code   # ended by a signal: as a shell says it
    finally:
        for s, previous in handed.items():
            signal.signal(s, previous)
