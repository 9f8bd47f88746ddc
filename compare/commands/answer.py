"""`compare answer`: the study's question answered from results files, in sentences, as the README's table
(--table, --markdown) or as JSON."""
from __future__ import annotations

import dataclasses

from nets.errors import UserError

from ..analysis import timed
from ..results import load_results
from ..terminal import table as fit_table, wrap
from .common import once


def cmd_answer(args) -> int:
    from tabulate import tabulate

    from ..names import for_markdown, for_terminal
    from ..report.answer import TABLE_NOTE, answer_tables, as_data, heading, lines
    results = [load_results(p) for p in once(args.files)]
    for p, r in zip(args.files, results):
        if not timed(r):
            raise UserError(f"results file {p} times no backend (mode {r.mode!r}; "
                            f"{', '.join(sorted({b.status for b in r.backends}))}): nothing to answer; "
                            f"`compare run` times them")
    if not args.json:   # names are data: escaped for where they are shown (compare/names.py)
        results = [(for_markdown if args.markdown else for_terminal)(r) for r in results]
    if args.json:
        from ..machine import emit
        emit("answer", {"files": [{"file": p, **dataclasses.asdict(as_data(r))} for p, r in zip(args.files, results)]})
    elif args.markdown:   # the README's tables
        from ..report.document import _cell   # a '|' of a name would split its cell
        blocks = [f"**{device}**\n\n" + tabulate([[_cell(c) for c in r] for r in rows], headers=headers,
                                                 tablefmt="github", disable_numparse=True)
                  for device, headers, rows in answer_tables(results)]
        print("\n\n".join(blocks))
    elif args.table:
        for device, headers, rows in answer_tables(results):
            print(f"{device}\n" + fit_table([[c.replace("`", "") for c in r] for r in rows], headers) + "\n")
        print(wrap(TABLE_NOTE))
    else:
        for r in results:
            said = lines(r)
            if said:
                print("\n".join([heading(r)] + [wrap("- " + line, indent="  ") for line in said]))
    return 0
