"""`--json`: what a command says, as one JSON document on stdout for a
program to read (the schemas are in docs/files.md, "JSON on stdout").
Each document names its schema ("clblast-compare/<command>") and version,
as the results file does; the human text is not printed beside it."""
from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, is_dataclass

VERSION = 1
_emitted = False   # a command prints one document: a failure after it adds no second one


def _clean(obj):
    """JSON's values only: dataclasses as objects, NaN and infinities as null."""
    if is_dataclass(obj):
        return _clean(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def document(command: str, payload: dict) -> dict:
    return {"schema": f"clblast-compare/{command}", "schema_version": VERSION, **_clean(payload)}


def emit(command: str, payload: dict, stream=None) -> None:
    global _emitted
    (stream or sys.stdout).write(json.dumps(document(command, payload), indent=2) + "\n")
    _emitted = stream is None or stream is sys.stdout


def begin() -> None:
    """A command starts: it has printed no document yet."""
    global _emitted
    _emitted = False


def fail(message: str, code: int) -> None:
    """Under --json, a failure is a document too: {"error": message, "exit": code} on stdout (the message
    is on stderr as well), unless the command printed its document before it failed."""
    global _emitted
    if not _emitted:
        emit("error", {"error": message, "exit": code})
    _emitted = False


def check_payload(res) -> dict:
    """`compare check --json`: each backend's verdict against the float64 oracle, and the count."""
    from .tables import worst_layer
    rows = []
    for b in res.backends:
        end = b.check.end_to_end if b.ok and b.check else None
        worst = worst_layer(b) if b.ok and b.check else None
        rows.append({"backend": b.name, "mode": b.mode, "family": b.family, "status": b.status,
                     "check": b.check.status if b.check else None,
                     "rel_l2": end.rel_l2 if end else None, "max_abs": end.max_abs if end else None,
                     "top1": end.top1 if end else None,
                     "worst_layer": worst.name if worst else None, "worst_layer_rel_l2": worst.rel_l2 if worst else None,
                     "reason": (b.reason or "").splitlines()[0] if b.reason else None})
    ran = [r for r in rows if r["status"] in ("OK", "FAILED")]
    return {"device": res.device.name, "net": res.net.name, "batch": res.net.batch,
            "passed": sum(r["check"] == "PASS" and r["status"] == "OK" for r in ran), "checked": len(ran),
            "backends": rows}


def report_payload(out, written, pages: int, images: int, problems: list[str], results, paths) -> dict:
    """`compare report --json`: what was written, the page check, and each results file's answer."""
    from .report.answer import as_data
    return {"out": str(out), "written": [str(p) for p in written], "pages": pages, "images": images,
            "problems": problems, "answers": [{"file": str(p), **asdict(as_data(r))} for p, r in zip(paths, results)]}
