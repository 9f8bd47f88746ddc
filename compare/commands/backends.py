"""`compare backends`: every backend, whether it can run here, and what it is or why not."""
from __future__ import annotations

import backends

from ..terminal import table as fit_table


def cmd_backends(args) -> int:
    rows = _rows()
    if args.json:
        from ..machine import emit
        emit("backends", {"backends": rows})
        return 0
    print(fit_table([[r["name"], r["status"], r["reason"] or r["summary"] or ""] for r in rows],
                    ["backend", "status", "what it is / why not"]))
    return 0


def _rows() -> list[dict]:
    rows = []
    for name in backends.names():
        reason = backends.unavailable_reason(name)
        cls = backends.backend_class(name) if not (reason or "").startswith("cannot import") else None
        rows.append({"name": name, "status": "available" if reason is None else "unavailable",
                     "family": str(cls.family) if cls else None, "summary": cls.summary if cls else None,
                     "reason": reason})
    return rows
