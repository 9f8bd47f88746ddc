"""`compare check`: each backend's outputs against the float64 oracle, a table and a verdict; exit 1 when one
fails."""
from __future__ import annotations

import sys

from nets.errors import CheckFailed, UserError

from ..files import check_writable
from ..keep import keep_file, text_writer
from ..results import RunResult, to_json
from ..runner import exit_code
from ..tables import check_table
from ..terminal import wrap
from .common import STDOUT, human, print_failures, unwritten
from .execute import outputs_apart, plan_and_execute
from .plan import Asked


def cmd_check(args) -> int:
    to_stdout = args.out == STDOUT
    asked = Asked.from_args(args)
    outputs_apart(asked, None if to_stdout else args.out, args.save_outputs)
    if args.out and not to_stdout:
        check_writable(args.out, "--out")
    if to_stdout and args.json:
        raise UserError("--out - and --json both want stdout: give one (--out FILE keeps the results file)")
    with human(not (to_stdout or args.json)):
        results, plan, problems = plan_and_execute(asked, "correctness", args.save_outputs, args.quiet)
    if to_stdout:
        sys.stdout.write(to_json(results) + "\n")
    elif args.out:
        problems.append(keep_file(args.out, text_writer(to_json(results)), "--out", "results").problem)
    if args.json:
        from ..machine import check_payload, emit
        emit("check", check_payload(results))
    with human(not (to_stdout or args.json)):
        if not args.quiet:
            print(wrap(f"{plan.net.name} batch {plan.batch}: outputs against the float64 oracle "
                       f"(each layer on the oracle's input, and end to end)") + "\n")
            print(check_table(results))
            if args.data:
                from ..digits import accuracy_table
                print("\n" + accuracy_table(results))
        print_failures(results)
        code = exit_code(results)
        failed = None
        if code == 1 and not any(b.status == "FAILED" for b in results.backends):
            failed = "check failed: see the table above"
        if args.data and code == 0:
            from ..digits import disagreements
            if disagreements(results):
                failed = (f"check failed: {', '.join(disagreements(results))} predicted differently "
                          f"(see the accuracy table)")
        print(("" if args.quiet else "\n") + _verdict(results))
        if failed and any(problems):   # said first: the line naming where the files are comes last
            print(f"error: {failed}", file=sys.stderr)
        unwritten(problems)
    if failed:
        raise CheckFailed(failed)
    return code


def _verdict(results: RunResult) -> str:
    """`compare check`'s last line: how many of the backends that ran passed."""
    ran = [b for b in results.backends if b.status in ("OK", "FAILED")]
    passed = [b for b in ran if b.passed]
    idle = len(results.backends) - len(ran)
    return (f"{len(passed)} of {len(ran)} passed" + (f" ({idle} could not run here: see above)" if idle else "")
            + ("" if len(passed) == len(ran) else f"; failed: {', '.join(b.name for b in ran if not b.passed)}"))
