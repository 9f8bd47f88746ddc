"""`compare tune`: CLBlast tuned for the device with CLBlast's own tuners,
as the study did before measuring anything (seed 003, section 4.1), under a
time budget, the result kept in the user's cache for `compare run`.

Three scopes share the budget evenly:
- device: every kernel at the tuner's own sizes, one parameter set per
  kernel (the study's `make alltuners`), used by `clblast` and
  `clblast-convgemm`;
- shape: the nets' own problems (each conv and dense layer's GEMM, GEMV or
  xCONVGEMM sizes), used per layer by `clblast-best` where they win;
- tiles: our own `vectorised-tiled`, every tile and split per conv layer
  (compare/tune_tiles.py): our kernels get the same chance as CLBlast's.
Each job gets what is left of its scope's budget divided by the jobs left,
samples about as many configurations as fit (the seconds per configuration
are measured as it goes) and is stopped at its cap with the best it found.
Nothing is written until the end: an interrupt leaves the old file.
"""
from __future__ import annotations

import datetime as _dt
import time

from tabulate import tabulate

from backends.clblast import problems, tuners
from backends.clblast.library import library_file
from backends.clblast.tuned import KIND
from backends.opencl.runtime import get_runtime

from . import device_cache
from .errors import UserError
from .keep import Kept
from .models import load_net

SCOPES = ("device", "shape", "tiles")
MIN_JOB_S = 2.0


def _jobs(nets: list[str], batch: int | None, scopes) -> list[tuners.Job]:
    jobs = problems.device_jobs() if "device" in scopes else []
    if "shape" in scopes:
        for name in nets:
            net = load_net(name)
            jobs += problems.layer_jobs(net, batch or net.default_batch)
    return jobs


def _shares(jobs, budget_s: float) -> dict[str, float]:
    """The budget of each CLBlast scope present (compare/cli.py splits the
    whole budget evenly between the scopes asked for)."""
    present = [s for s in SCOPES if any(j.scope == s for j in jobs)]
    return {s: budget_s / len(present) for s in present}


def tune(device: str | None, nets: list[str], batch: int | None, budget_s: float, scopes=SCOPES,
         progress=lambda s: None) -> tuple[dict, list]:
    """Run the jobs; (the tuning file's entry for the device, one row per job for the table)."""
    problem = tuners.environment_ok()
    if problem:
        raise UserError(problem)
    rt = get_runtime(device)
    try:
        where = tuners.tuner_device(rt.info["platform"], rt.info["name"])
    except LookupError as exc:
        raise UserError(str(exc)) from None
    jobs = _jobs(nets, batch, scopes)
    left = _shares(jobs, budget_s)
    per_config = tuners.SECONDS_PER_CONFIG
    device_sets, shape_sets, rows = {}, [], []
    start = time.monotonic()
    for i, job in enumerate(jobs):
        waiting = sum(1 for j in jobs[i:] if j.scope == job.scope)
        cap = max(left[job.scope] / waiting, MIN_JOB_S)
        configs = max(int(cap / per_config), 2)
        shown = f"tune [{i + 1}/{len(jobs)}, {budget_s - (time.monotonic() - start):.0f} s left]"
        out = tuners.run(job, where, cap, configs, lambda s: progress(f"{shown} {s}"))
        left[job.scope] -= out.seconds
        if out.tried:
            per_config = 0.5 * per_config + 0.5 * out.seconds / out.tried
        if out.device_seen and out.device_seen != rt.info["name"]:
            raise UserError(f"CLBlast's tuner ran on {out.device_seen!r}, not on {rt.info['name']!r}: "
                            f"its platform order differs from `clinfo -l`'s; set OCL_ICD_VENDORS to this device's driver")
        found = {k: {"parameters": f.parameters, "ms": f.ms} for k, f in out.best.items()}
        common = {"tuner": job.tuner, "tried": out.tried, "matched": out.matched, "seconds": round(out.seconds, 1),
                  "stopped_at_cap": out.stopped_at_cap}
        if job.scope == "device":
            for kernel, best in found.items():
                device_sets[kernel] = {**best, **common}
        elif found:
            shape_sets.append({**common, "args": job.args, "layers": job.label, "kernels": found})
        rows.append([job.scope, job.tuner, job.label if job.scope == "shape" else "tuner's own sizes",
                     job.key or "-", out.tried, out.matched,
                     ", ".join(f"{k} {f.ms:.3f} ms" for k, f in out.best.items()) or "none matched",
                     f"{out.seconds:.0f}" + (" (cap)" if out.stopped_at_cap else "")])
    lib = library_file()
    entry = {"device": rt.info["name"], "platform": rt.info["platform"], "driver": rt.info["driver"],
             "clblast": lib.rsplit("/", 1)[-1] if lib else "unknown",
             "tuned": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "budget_s": budget_s, "took_s": round(time.monotonic() - start, 1),
             "nets": nets, "device_sets": device_sets, "shape_sets": shape_sets}
    return entry, rows


def merge(old: dict | None, new: dict) -> dict:
    """A new tuning replaces the kernels and problems it tuned and keeps the others."""
    if not old:
        return new
    kept = [s for s in old.get("shape_sets", [])
            if not any(s["tuner"] == n["tuner"] and s["args"] == n["args"] for n in new["shape_sets"])]
    return {**new, "device_sets": {**old.get("device_sets", {}), **new["device_sets"]},
            "shape_sets": kept + new["shape_sets"]}


def store(info: dict, entry: dict) -> Kept:
    from backends import cache
    return device_cache.store(KIND, info, merge(cache.entry(KIND, info), entry), "the tuning cache")


def table(rows) -> str:
    return tabulate(rows, headers=["scope", "tuner", "for", "sizes", "tried", "matched", "best per kernel", "s"],
                    disable_numparse=True)
