"""`compare report`: tables and plots rendered from results files and sweeps, every page then checked."""
from __future__ import annotations

import sys

import backends
from nets.errors import UserError

from ..analysis import baseline_names, parse_baselines
from ..files import Output, check_apart, check_writable
from ..results import load_results
from .common import human, once


def cmd_report(args) -> int:
    from ..report import REPORT_NAMES, REPORT_ROOM, render_report
    from ..sweep import is_sweep, load_sweep
    baseline_names(args.baseline)   # an empty one, before the files are read
    check_apart([Output("--out", args.out, REPORT_NAMES)], [("results file", p) for p in args.files])
    check_writable(args.out, "--out", folder=True, room=REPORT_ROOM)
    results, paths, sweeps = [], [], []
    for p in once(args.files):
        if is_sweep(p):
            sweeps.append(load_sweep(p))
        else:
            results.append(load_results(p))
            paths.append(p)
    runs = results + [r for s in sweeps for r in s.results]
    # a name of the files' backends counts too: they may come from another version of this tool
    baselines = parse_baselines(args.baseline, known=set(backends.names()) | {b.name for r in runs for b in r.backends})
    try:
        written = render_report(results, paths, args.out, published=args.published,
                                baselines=baselines, sweeps=sweeps)
    except OSError as exc:   # nothing measured is lost: the report is rendered again from the same files
        raise UserError(f"cannot write the report into --out {args.out} ({exc.strerror or exc}): nothing of it was "
                        f"written there; free some room and run `compare report` again") from None
    from ..report.pagecheck import check_folder
    pages, images, problems = check_folder(args.out)
    with human(not args.json):
        if not args.quiet:
            for path in written:
                print(f"wrote {path}")
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{args.out}: {pages} pages and {images} images checked, "
              + (f"{len(problems)} problems" if problems else "every link and image there"))
    if args.json:
        from ..machine import emit, report_payload
        emit("report", report_payload(args.out, written, pages, images, problems, results, paths))
    return 1 if problems else 0
