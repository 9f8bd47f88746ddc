"""What the subcommands share: a one-line check of a count, where the text for people goes, and the last
word on failed backends and on files that could not be written where asked."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from nets.errors import UserError

STDOUT = "-"   # --out -: the results file's JSON on stdout, and what is said for people on stderr


def positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise UserError(f"{name} must be a positive integer, not {value}")
    return value


def human(to_stdout: bool):
    """Where the text for people goes: stdout, or stderr while stdout carries a JSON document."""
    return contextlib.nullcontext() if to_stdout else contextlib.redirect_stdout(sys.stderr)


def print_failures(results) -> None:
    for b in results.backends:
        if b.status == "FAILED":
            print(f"error: backend {b.name} failed: {b.reason}", file=sys.stderr)


def unwritten(problems: list[str]) -> None:
    """A UserError (exit 2) when a file could not be written where asked, raised
    after everything else was said, so its line, naming where the files are, comes last."""
    problems = [p for p in problems if p]
    for p in problems[:-1]:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        raise UserError(problems[-1])


def once(files: list[str]) -> list[str]:
    """The files given, each once (one file given twice would be counted twice)."""
    seen: dict[Path, str] = {}
    for p in files:
        key = Path(os.path.realpath(p))   # never raises: a loop of links is load_results's to name
        if key in seen:
            raise UserError(f"{p} is given twice (also as {seen[key]}): give each results file or sweep once")
        seen[key] = p
    return list(files)
