"""`compare run`: time every layer on each backend, check the outputs, write a results file, answer."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
from pathlib import Path

from nets.errors import UserError

from ..analysis import parse_baselines
from ..files import check_writable
from ..keep import keep_file, text_writer
from ..report import answer
from ..results import RunResult, to_json
from ..runner import Plan, exit_code
from ..tables import check_table, layer_table, modes_table, summary_table
from ..terminal import wrap
from ..timing import BLOCK_MS
from .common import STDOUT, human, print_failures, unwritten
from .execute import outputs_apart, plan_and_execute
from .plan import Asked


def cmd_run(args) -> int:
    out = args.out or _default_out(Path(args.net).stem)
    parse_baselines(args.baseline)   # before any work, as every name given
    asked = Asked.from_args(args)
    outputs_apart(asked, None if out == STDOUT else out, args.save_outputs)
    if out != STDOUT:
        check_writable(out, "--out")
    if out == STDOUT and args.json:
        raise UserError("--out - and --json both want stdout: give one (--out FILE keeps the results file)")
    with human(out != STDOUT and not args.json):
        results, plan, problems = plan_and_execute(asked, args.mode, args.save_outputs, args.quiet)
    if out == STDOUT:
        sys.stdout.write(to_json(results) + "\n")
        kept = None
    else:
        kept = keep_file(out, text_writer(to_json(results)), "--out", "results")
    if args.json:
        from ..machine import emit
        emit("run", {"results": None if kept is None or kept.problem else out,
                     **dataclasses.asdict(answer.as_data(results))})
    with human(out != STDOUT and not args.json):
        if not args.quiet:
            _tables(results, plan, args.baseline)
        if kept is not None and kept.problem is None and not args.quiet:
            print(f"\nresults written to {out}")
        print_failures(results)
        unwritten(problems + [kept.problem if kept else None])
        said = _answer_text(results)
        if said:   # the conclusion last, where a reader of the terminal looks
            print(("" if args.quiet else "\n") + "The answer:\n" + said)
    return exit_code(results)


def _default_out(net_name: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"results/{net_name}-{stamp}.json"


def _tables(results: RunResult, plan: Plan, baseline: str) -> None:
    device = results.device.name
    print(wrap(f"{plan.net.name} batch {plan.batch} on {device} ({results.net.flops / 1e9:.2f} GFLOP per pass), "
               f"median of {plan.repeats} runs" + (f" or more a backend, until they add up to {plan.min_time_s:g} s"
                                                   if plan.min_time_s else "")
               + f", each the mean of passes back to back adding up to {BLOCK_MS:g} ms (docs/baselines.md)") + "\n")
    for b in results.backends:
        if b.ok and b.timing:
            print(wrap(f"== {b.name}: {b.summary} [{b.info.get('device', device)}]", indent="   "))
            print(layer_table(results, b) + "\n")
    print(summary_table(results, parse_baselines(baseline)))
    modes = modes_table(results)
    if modes:
        print("\n" + modes)
    if plan.checks:
        print("\n" + check_table(results))


def _answer_text(results: RunResult) -> str | None:
    said = answer.lines(results)
    if not said:
        return None
    return "\n".join([answer.heading(results)] + [wrap("- " + line, indent="  ") for line in said])
