"""Text for the terminal: tables drawn by rich, fitted to the width of the terminal the output shows in (WIDTH
columns where it goes to none: a file, a pipe, the tests), their widest columns wrapped first; and paragraphs
wrapped at word boundaries to the same width."""
from __future__ import annotations

import io
import re
import shutil
import sys
import textwrap

from rich.box import Box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

WIDTH = 100
# tabulate's plain look, which the committed reports show: no borders, a rule of dashes under the header,
# columns apart by a space of their own and one of padding
PLAIN = Box("    \n"
            "    \n"
            " -  \n"
            "    \n"
            "    \n"
            "    \n"
            "    \n"
            "    \n", ascii=True)
LONGEST_WORD = 24   # a longer word (a path) may be broken
# a space no line may break at (rich breaks at every whitespace, U+00A0's too): drawn as a space
GLUE = "\ue000"


def width() -> int:
    """The columns of the terminal standard output shows in, or WIDTH when it shows in none."""
    return shutil.get_terminal_size((WIDTH, 24)).columns if sys.stdout.isatty() else WIDTH


def _unbroken(text: str) -> str:
    """An interval ('[2.24, 3.37]') and a time with its unit ('0.546 ms') as one word, so that no line break
    splits them (one may come between a ratio and its interval)."""
    text = re.sub(r"(\d) ms\b", f"\\1{GLUE}ms", text)
    return re.sub(r"\[([\d.]+), ([\d.]+)\]", f"[\\1,{GLUE}\\2]", text)


class _Name:
    """A cell of the first column, which names the row: wrapped at its words like any other, its further lines
    indented by one space, so that a reader (and a test) tells them from the next row's."""

    def __init__(self, text: str):
        self.text = text

    def __rich_measure__(self, console, options) -> Measurement:
        words = self.text.split()
        if not words:
            return Measurement(0, 0)
        return Measurement(max([len(words[0])] + [len(w) + 1 for w in words[1:]]), len(self.text))

    def __rich_console__(self, console, options):
        yield Text("\n".join(textwrap.wrap(self.text, max(options.max_width, 2), subsequent_indent=" ")),
                   no_wrap=True)


def table(rows, headers, columns: int | None = None) -> str:
    """A plain table drawn by rich within `columns` columns (default: the terminal's), its widest columns
    wrapped at their words first; two spaces apart, or one where two leave no room; wider than `columns`
    only where not even so does every word fit whole."""
    headers = [str(h) for h in headers]
    rows = [[_unbroken("" if c is None else str(c)) for c in r] + [""] * (len(headers) - len(r)) for r in rows]
    columns = columns or width()
    console = Console(file=io.StringIO(), width=columns, color_system=None, force_terminal=False,
                      legacy_windows=False, emoji=False, highlight=False)
    cells = [[Text(h)] + [_Name(r[i]) if i == 0 else Text(r[i]) for r in rows] for i, h in enumerate(headers)]
    sizes = [[Measurement.get(console, console.options, c) for c in col] for col in cells]
    # rich narrows the widest columns itself, but below their longest word (an interval would break): the
    # widths are chosen here, with rich's measure of each cell, none below its longest word
    floor = [max(min(m.minimum, LONGEST_WORD) for m in col) for col in sizes]
    natural = [max(max(m.maximum for m in col), f) for col, f in zip(sizes, floor)]
    gap = 2 if sum(floor) + 2 * (len(headers) - 1) <= columns else 1
    widths = list(natural)
    while sum(widths) + gap * (len(widths) - 1) > columns:
        movable = [i for i, (w, f) in enumerate(zip(widths, floor)) if w > f]
        if not movable:
            break
        widths[max(movable, key=lambda i: widths[i])] -= 1
    fitted = Table(box=PLAIN, show_edge=False, pad_edge=False, padding=(0, gap - 1, 0, 0))
    for head, w in zip(headers, widths):
        fitted.add_column(Text(head), width=w, overflow="fold")
    for row in list(zip(*cells))[1:]:
        fitted.add_row(*row)
    with console.capture() as out:
        console.print(fitted, crop=False)   # a table that cannot fit is drawn whole, wider
    return "\n".join(line.rstrip().replace(GLUE, " ") for line in out.get().splitlines())


def wrap(text: str, columns: int | None = None, indent: str = "") -> str:
    """A paragraph wrapped at word boundaries (default: the terminal's width); its second and later lines
    indented by `indent`."""
    return "\n".join(textwrap.fill(line, columns or width(), subsequent_indent=indent, break_on_hyphens=False)
                     for line in text.splitlines()) if text else text
