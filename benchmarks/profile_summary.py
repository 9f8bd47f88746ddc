"""Where a profiled run's time went (backends/profiled.py): per process, the functions that held it longest.

    COMPARE_PROFILE_DIR=results/prof .venv/bin/python -m compare run --net vgg16 --backends ...
    .venv/bin/python benchmarks/profile_summary.py results/prof [--top 25]

Printed per process (the runner first, then each child by when it ended): its total, then the `--top`
functions by cumulative time and by own time, with calls and seconds.  A child's time waiting for its next
request shows as `posix.read` under `_serve`."""
from __future__ import annotations

import argparse
import io
import os
import pstats
import sys


def summary(path: str, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    total = max((row[3] for row in stats.stats.values()), default=0.0)   # the outermost call's cumulative
    out.write(f"== {os.path.basename(path)}: {total:.1f} s\n")
    for key in ("cumulative", "tottime"):
        out.write(f"-- by {key} --\n")
        stats.sort_stats(key).print_stats(top)
    return out.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    files = sorted((os.path.join(args.folder, f) for f in os.listdir(args.folder) if f.endswith(".prof")),
                   key=lambda p: (not os.path.basename(p).startswith("runner"), os.path.getmtime(p)))
    if not files:
        print(f"error: no .prof files in {args.folder}; run with COMPARE_PROFILE_DIR={args.folder}", file=sys.stderr)
        return 2
    for path in files:
        print(summary(path, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
