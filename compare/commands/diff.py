"""`compare diff A.json B.json`: each backend's change between two runs of one net, a table and the notes
on what makes them less comparable (the changes are made in compare/diff.py)."""
from __future__ import annotations

from ..diff import changes, load_pair, notes
from ..machine import emit
from ..speedup import Speedup
from ..terminal import table, wrap


def cmd_diff(args) -> int:
    a, b = load_pair(args.a, args.b)
    rows = changes(a, b)
    said = notes(a, b)
    if args.json:
        emit("diff", {"a": args.a, "b": args.b, "net": a.net.name, "batch": a.net.batch, "notes": said,
                      "backends": rows})
        return 0
    print(wrap(f"{a.net.name} batch {a.net.batch}: B ({args.b}) against A ({args.a}), end-to-end compute, "
               f"median; the ratio is A's time over B's with its 95% interval") + "\n")
    fmt = lambda ms: "—" if ms is None else f"{ms:.3f}"  # noqa: E731
    print(table([[r.backend, fmt(r.a_ms), fmt(r.b_ms),
                  "—" if r.ratio is None else Speedup(r.ratio, (r.low, r.high) if r.low else None).bounds(), r.change]
                 for r in rows], ["backend", "A ms", "B ms", "A over B", "change"]))
    for line in said:
        print(wrap(line))
    return 0
