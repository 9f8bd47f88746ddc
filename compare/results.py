"""The versioned results file: what `compare run` writes and `compare report` reads.

Times are in milliseconds; a timing is a summary from compare.stats
(median, min, max, q1, q3, iqr, n).  Files are written atomically.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .errors import UserError
from .files import write_text_atomic

SCHEMA = "clblast-compare/results"
VERSION = 1
STATUSES = ("OK", "FAILED", "UNAVAILABLE", "UNSUPPORTED")


def _clean(obj):
    """JSON has no NaN or Inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_results(path: str | os.PathLike, results: dict) -> None:
    write_text_atomic(path, json.dumps(_clean(results), indent=1, allow_nan=False) + "\n")


def load_results(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"results file {path} not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"results file {path} is not valid JSON ({exc}); was it cut short?") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError(f"{path} is not a clblast-compare results file (no '\"schema\": \"{SCHEMA}\"')")
    version = data.get("schema_version")
    if version != VERSION:
        raise UserError(f"{path} has results schema version {version}; this compare reads version {VERSION}: "
                        f"re-run `compare run` to make a current file")
    problem = _shape_problem(data)
    if problem:
        raise UserError(f"results file {path} is malformed: {problem}")
    return data


def _shape_problem(data: dict) -> str | None:
    net = data.get("net")
    if not isinstance(net, dict) or not isinstance(net.get("layers"), list) or "name" not in net:
        return "'net' with 'name' and 'layers' is missing"
    if not isinstance(data.get("device"), dict):
        return "'device' is missing"
    backends = data.get("backends")
    if not isinstance(backends, list):
        return "'backends' is not a list"
    for i, b in enumerate(backends):
        if not isinstance(b, dict) or "name" not in b or b.get("status") not in STATUSES:
            return f"backend entry {i} lacks a name or a status in {STATUSES}"
        if b["status"] == "OK" and b.get("timing") is not None:
            t = b["timing"]
            if not isinstance(t, dict) or not isinstance(t.get("layers"), list):
                return f"backend {b['name']}: 'timing.layers' is missing"
    return None
