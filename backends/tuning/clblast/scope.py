"""The `clblast` scope of `compare tune`: CLBlast's default search on every
problem of the nets, on this device (children side by side, `--jobs`) or
on a farm's workers of the device's kind (`--devices all`: every kind
among them, each into its own store, side by side).  It resumes where the
last run stopped, so the depth only grows."""
from __future__ import annotations

import os
import threading

from nets.errors import UserError

from ...clblast import problems as clblast_problems
from . import Asked, Outcome, SearchFailed, Target, show as show_module, tune as tune_clblast


def check(request, place) -> None:
    if not place.on_farm:   # the workers load their own
        from ...clblast.library import require_library
        require_library()
    Asked.of(request.nets, request.batch, request.as_tuner, request.routines)   # refused here, not later
    if request.routines is not None:
        _check_routines(request)


def _check_routines(request) -> None:
    known = (clblast_problems.GEMM, clblast_problems.GEMV, clblast_problems.CONVGEMM)
    asked = request.routines
    if not asked or any(r not in known for r in asked):
        raise UserError(f"--routines takes {', '.join(known)} (comma-separated), not {','.join(asked)!r}")
    if request.as_tuner is not None:
        raise UserError("--routines and --as-tuner exclude each other: --as-tuner searches the Xgemm kernel alone")
    from . import net_problems
    if not any(p.routine in asked for p in net_problems(request.nets, request.batch)):
        raise UserError(f"--routines {','.join(asked)}: no problem of {', '.join(n.name for n in request.nets)} "
                        f"calls {' or '.join(asked)}; name a routine the nets call")


def _here(request) -> Target:
    from ...clblast.tuned import clblast_version
    return Target.of(request.runtime(), clblast_version())


def targets(request, place, seconds: float) -> list[tuple[Target, object, str]]:
    """(the device kind, the pool its children run in, a line saying where) for each kind tuned at `place`
    (a farm connected within `seconds`)."""
    from .children import QUIET_GPU_S, QUIET_S, LocalPool
    if not place.on_farm:
        from ...opencl.runtime import device_index
        rt = request.runtime()
        # side by side only on a GPU: a CPU device's compiles and runs take every core already
        gpu = "GPU" in rt.info["type"]
        jobs = request.jobs or (max(1, min(8, (os.cpu_count() or 2) // 2)) if gpu else 1)
        return [(_here(request), LocalPool(device_index(rt.device), jobs, QUIET_GPU_S if gpu else QUIET_S), "")]
    from .farm import DaskPool
    farm, kinds = place.kinds(request, seconds)
    return [(Target(kind.device, kind.limits, kind.gpu), DaskPool(farm.client, kind.places, request.jobs),
             place.where(kind)) for kind in kinds]


def run(request, budget, place) -> list[str]:
    """The search, then the verification and the choices; each device kind side by side with the whole
    share (their workers are others)."""
    asked = Asked.of(request.nets, request.batch, request.as_tuner, request.routines)
    work = targets(request, place, budget.wall_s())
    for target, _, _ in work:   # before the budget is spent, not after
        request.harness.check_writable(str(target.store().folder / "device.json"), "the CLBlast tuning folder")
    said: list[list[str]] = [[] for _ in work]
    failed: list[str] = []

    def one(n: int, target: Target, pool, where: str) -> None:
        prefix = f"{target.device.name}: " if len(work) > 1 else ""
        try:
            done = tune_clblast(target, asked, budget, pool, lambda text: request.progress(prefix + text),
                                request.verify_only)
        except SearchFailed as exc:
            failed.append(str(exc))
            return
        finally:
            if hasattr(pool, "close"):
                pool.close()
        said[n] = _said(request, target, done, where)
    if len(work) == 1:
        one(0, *work[0])
    else:
        threads = [threading.Thread(target=one, args=(n, *w)) for n, w in enumerate(work)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failed:
        raise UserError(failed[0])
    return [line for lines in said for line in lines]


def _said(request, target: Target, done: Outcome, where: str) -> list[str]:
    search = done.search
    out = [where] if where else []
    out += search.said
    out.append(f"CLBlast: {search.tried_now} configurations tried this run, {len(done.verified)} problems verified; "
               f"written to {search.store.folder}")
    if not request.verify_only:
        out += search.rate.summary(search.left())
    if search.checked:
        out.append(show_module.fresh_line(search.checked))
    out.append(show_module.show(target, request.nets, request.batch, request.as_tuner))
    return out


def show(request, place) -> str:
    if not place.on_farm:
        return show_module.show(_here(request), request.nets, request.batch, request.as_tuner)
    out = []
    for target, pool, _ in targets(request, place, request.budget_s):
        out.append(show_module.show(target, request.nets, request.batch, request.as_tuner))
        if hasattr(pool, "close"):
            pool.close()
    return "\n".join(out)
