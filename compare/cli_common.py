"""What the subcommands share: one-line checks of their arguments, the
device option, and the last word on files that could not be written."""
from __future__ import annotations

import sys

from nets.errors import UserError


def positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise UserError(f"{name} must be a positive integer, not {value}")
    return value


def seed_arg(text: str) -> int:
    """--seed's type: a whole number, 0 or more, as numpy's seeded generators take (argparse says a refusal in
    one line)."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {value}")
    return value


def unwritten(problems: list[str]) -> None:
    """A UserError (exit 2) when a file could not be written where asked, raised
    after everything else was said, so its line, naming where the files are, comes last."""
    problems = [p for p in problems if p]
    for p in problems[:-1]:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        raise UserError(problems[-1])


def add_device_option(p, help="OpenCL device: index 'P:D' or a name fragment (default: first GPU, else PoCL)"):
    p.add_argument("--device", help=help)
