"""Configurations per second of CLBlast's search on this machine: here with
one child and two (`--jobs`, no Dask), and through a Dask LocalCluster of
one worker and of two (`--scheduler`), each on a fresh tuning folder with PoCL's
kernel cache off (so no run finds another's compiles), and the ratio of two
workers to one.

    .venv/bin/python benchmarks/tune_farm.py [--budget-s 60] [--net lenet] [--batch 1] [--routines gemv]

Each run is `compare tune --scope clblast` with the same budget; the rate is
the search's own ("this search: N configurations in T s, R per second"),
without the start, the costs and the verification.  Compiling dominates a
configuration, so the ratio is bounded by the cores that compile: on a
2-core machine two workers, each compiling in its child, take both cores,
and the client and the scheduler take their share too.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rate(argv: list[str], env: dict) -> tuple[float, int, str]:
    """(configurations per second, configurations, the rate line) of one `compare tune` run."""
    with tempfile.TemporaryDirectory(prefix="tune-farm-") as cache:
        proc = subprocess.run([sys.executable, "-m", "compare", *argv], capture_output=True, text=True, cwd=ROOT,
                              env={**env, "COMPARE_CACHE_DIR": cache}, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"compare {' '.join(argv)} failed: {proc.stderr.strip()[-500:]}")
    found = re.search(r"this search: ([\d,]+) configurations in .*?, ([\d.]+) per second", proc.stdout)
    if found is None:
        raise SystemExit(f"no rate in the output of compare {' '.join(argv)}:\n{proc.stdout[-1000:]}")
    return float(found[2]), int(found[1].replace(",", "")), found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=60.0)
    parser.add_argument("--net", default="lenet")
    parser.add_argument("--batch", default="1")
    parser.add_argument("--routines", default="gemv")
    args = parser.parse_args()
    from distributed import LocalCluster

    env = dict(os.environ, POCL_KERNEL_CACHE="0")
    os.environ["POCL_KERNEL_CACHE"] = "0"   # the workers LocalCluster starts inherit it
    base = ["tune", "--net", args.net, "--batch", args.batch, "--routines", args.routines, "--scope", "clblast",
            "--budget-s", str(args.budget_s)]
    rows = [(f"here, --jobs {j} (no Dask)", *rate(base + ["--jobs", str(j)], env)) for j in (1, 2)]
    for n in (1, 2):
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            rows.append((f"LocalCluster, {n} worker{'s' if n > 1 else ''}",
                         *rate(base + ["--scheduler", cluster.scheduler_address], env)))
    print(f"CLBlast's search of {args.net} batch {args.batch} ({args.routines}), {args.budget_s:.0f} s budget a run, "
          f"{os.cpu_count()} cores, PoCL's kernel cache off:")
    for name, per_s, n, _ in rows:
        print(f"  {name:32s} {per_s:6.2f} configurations/s ({n} timed)")
    here1, here2, one, two = (r[1] for r in rows)
    print(f"two workers against one: {two / one:.2f}x (here, two children against one: {here2 / here1:.2f}x); "
          f"one worker against one child here: {one / here1:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
