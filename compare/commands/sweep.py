"""`compare sweep`: a net at several batches, a results file each and a sweep file, with where CLBlast
catches up."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
from collections.abc import Iterator
from pathlib import Path

from nets.weights import make_input

from .. import sweep as sw
from ..analysis import parse_baselines
from ..files import RESULTS_ROOM, Output, check_apart, check_writable
from ..keep import Keeper
from ..progress import Progress
from ..report import answer
from ..results import RunResult, Source
from ..runner import Plan, steps
from ..tables import summary_table
from ..terminal import table as fit_table, wrap
from .common import human, unwritten
from .execute import inputs
from .plan import Asked, Room, build_plan, fixed_batch, needed


def cmd_sweep(args) -> int:
    if not args.json:
        return _sweep(args)[0]
    from ..machine import emit
    with human(False):   # the text for people on stderr, the document on stdout
        code, said = _sweep(args)
    emit("sweep", said)
    return code


def _sweep(args) -> tuple[int, dict]:
    """The exit code, and what --json says of the sweep."""
    from ..report.sweeps import batches_text, comparisons, crossover, notes, per_image_table, speedup_table
    baselines = parse_baselines(args.baseline)
    asked = Asked.from_args(args, batch=None)   # a list of batches: each planned by _plans
    if args.out:
        check_apart([Output("--out", args.out, ("*-batch*.json", sw.SWEEP_FILE))], inputs(asked))
        check_writable(args.out, "--out", folder=True)
    base, batches, plans = _plans(asked, args.batch)
    out = args.out or f"results/sweep-{Path(args.net).stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    check_writable(out, "--out", folder=True, room=len(batches) * RESULTS_ROOM)
    runs = f"at least {base.repeats}" if base.min_time_s else f"{base.repeats}"   # calibrated: compare/noise.py
    print(f"{base.net.name} at {batches_text(batches)}, {runs} timed runs each, into {out}\n")
    done: list[RunResult] = []
    progress = Progress()

    def finished(res: RunResult, path: Path | None) -> None:
        progress.done()
        done.append(res)
        print(wrap(f"== {res.net.name} batch {res.net.batch} on {res.device.name} ({res.net.flops / 1e9:.3g} GFLOP per "
              f"pass), median of {runs} runs: {path or 'not written'}", indent="   "))
        print(summary_table(res, baselines) + "\n")

    keeper = Keeper(out)
    progress.expect(len(batches) * steps(base))   # every batch's: one time left for the whole sweep
    try:
        try:
            path = sw.run_sweep(plans, keeper, base.command, progress, finished)
        finally:
            progress.done()
    except KeyboardInterrupt:
        if done:   # their files are whole and stay; the sweep file is written only at the end
            print(f"sweep stopped after batch {done[-1].net.batch}: the results files of "
                  f"{batches_text([r.net.batch for r in done])} are in {keeper.folder}, and no sweep file",
                  file=sys.stderr)
        raise
    print(f"{base.net.name}: time per image (ms), end-to-end compute over the batch")
    for headers, rows in (per_image_table(done), speedup_table(done)):
        print(fit_table(rows, headers) + "\n")
    print(wrap(f"where CLBlast catches up: {crossover(comparisons(done))}"))
    for note in notes(done):
        print(wrap(note))
    if keeper.error is None:
        print(f"\nsweep written to {path}; `compare report {path}` renders it")
    for res in done:
        for b in res.backends:
            if b.status == "FAILED" and not sw.does_not_fit(b):
                print(f"error: batch {res.net.batch}: backend {b.name} failed: {b.reason}", file=sys.stderr)
    stayed = f"; what was written into {out} before stays there too" if keeper.written_before_failing else ""
    said = {"sweep": None if keeper.error else str(path), "net": base.net.name, "batches": batches,
            "crossover": crossover(comparisons(done)),
            "answers": [dataclasses.asdict(answer.as_data(res)) for res in done]}
    unwritten([keeper.problem("into --out", "sweep", f" (`compare report {keeper.folder}` renders it{stayed})")])
    return sw.exit_code(done), said


def _plans(asked: Asked, batches_given: str | None) -> tuple[Plan, list[int], Iterator[Plan]]:
    """A sweep's first plan, its batches and a plan per batch, made as each is
    reached: the same net, weights and device throughout, and a fresh seeded
    input per batch (seed + batch), so no batch's images are another's."""
    given = sw.parse_batches(batches_given) if batches_given is not None else None
    base = build_plan(dataclasses.replace(asked, batch=given[0] if given else None), "both")
    batches = given or sw.default_batches(base.net.name)
    for batch in batches:
        fixed_batch(base.net, batch)
    room = Room(base.net, len(base.backends), base.repeats, base.warmup,
                needed(base.net, base.backends, "both", base.interleave))
    room.holds(batches[-1], f"batch {batches[-1]} of the sweep", "batches up to {} fit")   # the largest, before any runs

    def plans():
        for batch in batches:
            seed = asked.seed + batch
            yield dataclasses.replace(base, batch=batch, x=make_input(base.net, batch, seed),
                                      sources={**base.sources, "input": Source("seed", seed=seed)})
    return base, batches, plans()
