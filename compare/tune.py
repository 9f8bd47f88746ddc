"""`compare tune`, the driver: the budget shared among the scopes asked for,
each scope run with its part, what it found printed.  A scope is a name
and a callable given the run and a Budget (SCOPES); the searches
themselves belong to their backends (backends/tuner for CLBlast,
backends/handwritten/tiles_search.py for our tiles).

CLBlast's scope tunes the device here (children side by side, `--jobs`),
or with `--scheduler` the workers of a Dask cluster that hold the device
kind (`--devices all`: every kind among them, each into its own store, side
by side).  It resumes where the last run stopped, so the depth only grows.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Callable

from backends import tuner
from backends.tuner import Asked, Budget, SearchFailed, Target

from nets.errors import UserError

from . import oracle, tune_show
from .checking import compare_arrays
from .files import check_writable


@dataclass
class Run:
    """What one `compare tune` was asked, as the scopes need it."""

    nets: list
    batch: int | None
    progress: Callable[[str], None]
    device: str | None = None          # --device: the device here
    jobs: int | None = None            # children side by side (per worker on a farm); None: the default
    as_tuner: list[str] | None = None
    routines: list[str] | None = None
    verify_only: bool = False
    scheduler: str | None = None       # a Dask scheduler's address: tune on its workers
    every_kind: bool = False           # --devices all
    tiled: list = field(default_factory=list)        # the nets our tiles are tuned for
    beam_width: int = 2                # tinygrad's search width
    unwritten: list[str] = field(default_factory=list)   # files kept elsewhere than asked, each in one line
    _rt: object = None

    def runtime(self):
        if self._rt is None:
            from backends.opencl.runtime import get_runtime
            self._rt = get_runtime(self.device)
        return self._rt


@dataclass(frozen=True)
class Scope:
    name: str
    run: Callable[[Run, Budget], None]
    weight: float   # its part of the budget beside the other scopes asked for


def run_scopes(run: Run, names: list[str], budget: Budget) -> None:
    """Each scope asked for, in turn, with its part of the budget (its Budget starts when it does)."""
    seconds = budget.shares({name: SCOPES[name].weight for name in names})
    for name in names:
        SCOPES[name].run(run, Budget(seconds[name]))


# -- CLBlast
def targets(run: Run) -> list[tuple[Target, object, str]]:
    """(the device kind, the pool its children run in, a line saying where) for each kind tuned."""
    from backends.clblast.tuned import clblast_version
    from backends.tuner.children import LocalPool
    if run.scheduler is None:
        from backends.opencl.runtime import device_index
        rt = run.runtime()
        # side by side only on a GPU: a CPU device's compiles and runs take every core already
        jobs = run.jobs or (max(1, min(8, (os.cpu_count() or 2) // 2)) if "GPU" in rt.info["type"] else 1)
        return [(Target.of(rt, clblast_version()), LocalPool(device_index(rt.device), jobs), "")]
    from backends.tuner import farm
    try:
        client, kinds, bare = farm.connect(run.scheduler)
    except (OSError, TimeoutError) as exc:
        raise UserError(f"--scheduler {run.scheduler}: no Dask scheduler answered ({exc}); start one with "
                        f"`dask scheduler` and workers with `dask worker {run.scheduler}`") from None
    if not kinds:
        raise UserError(f"--scheduler {run.scheduler}: no worker has an OpenCL device"
                        + (f" ({'; '.join(f'{w}: {why}' for w, why in bare.items())})" if bare else ""))
    chosen = kinds if run.every_kind else [_kind_here(run, kinds)]
    out = []
    for kind in chosen:
        others = [f"{p.worker} ({k.device.name}, {k.device.driver}, {k.device.clblast})"
                  for k in kinds if k is not kind for p in k.places if p.worker not in {q.worker for q in kind.places}]
        where = (f"farm: {kind.device.name} ({kind.device.driver}, {kind.device.clblast}) on "
                 f"{len(kind.places)} worker(s): {', '.join(p.name for p in kind.places)}"
                 + (f"; left out, another device: {'; '.join(others)}" if others and not run.every_kind else "")
                 + (f"; left out, no OpenCL device: {', '.join(bare)}" if bare else ""))
        out.append((Target(kind.device, kind.limits, kind.gpu), farm.DaskPool(client, kind.places, run.jobs), where))
    return out


def _kind_here(run: Run, kinds):
    """The kind of this machine's device (--device); where this machine has none, the only kind there is."""
    from backends.clblast.tuned import clblast_version
    from backends.clblast.record import DeviceId
    names = "; ".join(f"{k.device.name} ({k.device.driver}, {k.device.clblast}) on {len(k.places)}" for k in kinds)
    try:
        here = DeviceId.of(run.runtime().info, clblast_version())
    except UserError:
        if len(kinds) == 1:
            return kinds[0]
        raise UserError(f"--scheduler: this machine has no OpenCL device to name the one tuned, and the workers "
                        f"hold several kinds ({names}): tune each with --devices all") from None
    for kind in kinds:
        if kind.device == here:
            return kind
    raise UserError(f"--scheduler: no worker has this machine's device {here.name} ({here.driver}, "
                    f"{here.clblast}); the workers hold {names}: name --devices all to tune those")


def tune_clblast(run: Run, budget: Budget) -> None:
    """CLBlast's default search on every problem of the nets, then the verification and the choices; each
    device kind side by side with the whole budget (their workers are others)."""
    if run.scheduler is None:
        from backends.clblast.library import require_library
        require_library()
    asked = Asked.of(run.nets, run.batch, run.as_tuner, run.routines)
    work = targets(run)
    for target, _, _ in work:   # before the budget is spent, not after
        check_writable(str(target.store().folder / "device.json"), "the CLBlast tuning folder")
    said: list[list[str]] = [[] for _ in work]
    failed: list[str] = []

    def one(n: int, target: Target, pool, where: str) -> None:
        prefix = f"{target.device.name}: " if len(work) > 1 else ""
        try:
            done = tuner.tune(target, asked, budget, pool,
                              lambda text: run.progress(prefix + text), run.verify_only)
        except SearchFailed as exc:
            failed.append(str(exc))
            return
        finally:
            if hasattr(pool, "close"):
                pool.close()
        said[n] = _said(run, target, done, where)
    if len(work) == 1:
        one(0, *work[0])
    else:
        threads = [threading.Thread(target=one, args=(n, *w)) for n, w in enumerate(work)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for lines in said:
        print("\n".join(lines))
    if failed:
        raise UserError(failed[0])


def _said(run: Run, target: Target, done: tuner.Outcome, where: str) -> list[str]:
    search = done.search
    out = [where] if where else []
    out += search.said
    out.append(f"CLBlast: {search.tried_now} configurations tried this run, {len(done.verified)} problems verified; "
               f"written to {search.store.folder}")
    if not run.verify_only:
        out += search.rate.summary(search.left())
    if search.checked:
        out.append(tune_show.fresh_line(search.checked))
    out.append(tune_show.show(target, run.nets, run.batch, run.as_tuner))
    return out


# -- our tiles
def _oracle_checker(one, weights, x):
    """A test of a tile candidate's output against the float64 oracle, as every backend's is checked."""
    ref = oracle.forward(one, weights, x)[-1]
    return lambda out: compare_arrays(out, ref).passed


def tune_tiles(run: Run, budget: Budget) -> None:
    """vectorised-tiled's tiles on every conv layer of the nets it runs, each candidate checked against the
    oracle, kept in the tiles' cache."""
    if not run.tiled:
        return
    from backends.handwritten import tiles_search
    from backends.handwritten.tiles_tuned import KIND
    from tabulate import tabulate

    from . import device_cache
    rt = run.runtime()
    tiles, rows = tiles_search.tune_tiles(rt, run.tiled, [run.batch or n.default_batch for n in run.tiled],
                                          budget.seconds, _oracle_checker, run.progress)
    print(tabulate(rows, headers=["scope", "tuner", "for", "sizes", "tried", "matched", "best", "s"],
                   disable_numparse=True))
    kept = device_cache.store(KIND, rt.info, tiles, "the tiles' cache")
    run.unwritten.append(kept.problem)
    print(f"vectorised-tiled: {len(tiles['layers'])} conv layers timed in {tiles['took_s']:.0f} s; "
          f"written to {kept.path or 'nowhere'}")


# -- tinygrad's schedule search
def tune_tinygrad(run: Run, budget: Budget) -> None:
    """tinygrad's BEAM search of every kernel of the nets on this device, the costliest first, each choice
    kept as it comes (backends/peers/tinygrad_search.py)."""
    from backends.peers import tinygrad_search
    done = tinygrad_search.tune(run.runtime(), run.nets, run.batch, budget.seconds, run.beam_width, run.progress)
    print("\n".join(done.lines()))


# our tiles take little time: a tenth of the budget beside CLBlast's search; tinygrad's search half of it
SCOPES = {s.name: s for s in (Scope("clblast", tune_clblast, 9.0), Scope("tiles", tune_tiles, 1.0),
                              Scope("tinygrad", tune_tinygrad, 10.0))}
