"""Where a run's time goes, process by process: with COMPARE_PROFILE_DIR set, the runner (started as
`python -m compare`) and every child it starts (isolated.py) run under cProfile and leave their statistics
there as `<role>-<pid>.prof` when they end normally (benchmarks/profile_summary.py reads them).  Unset,
nothing is profiled and nothing is written.  The first VGG-16 answer on the H200 (issue 53) was read this
way: which prepare, compile or check is slow."""
from __future__ import annotations

import cProfile
import os
from contextlib import contextmanager

ENV = "COMPARE_PROFILE_DIR"


@contextmanager
def profiled(role: str):
    """Within: this process profiled where COMPARE_PROFILE_DIR names a folder; its statistics written on the
    way out, an exception's way too (a run that failed is worth reading)."""
    folder = os.environ.get(ENV)
    if not folder:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        os.makedirs(folder, exist_ok=True)
        profile.dump_stats(os.path.join(folder, f"{role}-{os.getpid()}.prof"))
