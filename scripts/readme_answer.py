"""Writes the README's answer table anew from the committed results, by the command its marker comment
names (tests/test_readme.py fails while the two disagree).

    .venv/bin/python scripts/readme_answer.py
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"(<!-- answer-table: (?P<command>.*?) -->\n)(?P<table>.*?)(\n<!-- answer-table end -->)", re.S)


def generated(text: str) -> tuple[str, str]:
    """(the table in the README, the table its command makes now)."""
    from compare.cli import main
    found = BLOCK.search(text)
    if found is None:
        raise SystemExit("README.md has no answer-table block")
    argv = shlex.split(found["command"])[1:]   # 'compare answer ...'
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv)
    return found["table"], out.getvalue().rstrip("\n")


def main() -> int:
    text = README.read_text(encoding="utf-8")
    _, table = generated(text)
    README.write_text(BLOCK.sub(lambda m: m.group(1) + table + m.group(4), text, count=1), encoding="utf-8")
    print(f"wrote the answer table into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
