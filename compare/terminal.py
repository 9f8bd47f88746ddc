"""Text for a terminal of WIDTH columns: tables whose widest columns wrap
(tabulate's maxcolwidths) and paragraphs wrapped at word boundaries, so
every command's output reads in a 100-column terminal."""
from __future__ import annotations

import re
import textwrap

import tabulate as _tabulate
from tabulate import DataRow, Line, TableFormat, tabulate

WIDTH = 100
NARROWEST = 8   # a column is never wrapped narrower than this
GAP = 2         # the space tabulate's plain formats put between columns
# tabulate's "simple" with one space between columns: for a table that cannot fit with two
COMPACT = TableFormat(lineabove=None, linebelowheader=Line("", "-", " ", ""), linebetweenrows=None, linebelow=None,
                      headerrow=DataRow("", " ", ""), datarow=DataRow("", " ", ""), padding=0,
                      with_header_hide=["lineabove", "linebelow"])
# registered by name, as tabulate wraps cells over several lines only in the formats it knows by name
_tabulate._table_formats.setdefault("compare-compact", COMPACT)
_tabulate.multiline_formats.setdefault("compare-compact", "compare-compact")
HEADER_PAD = 2  # and what they add to a header's width
LONGEST_WORD = 24   # a longer word (a path) is broken


def _width(text) -> int:
    return max((len(line) for line in str(text).splitlines()), default=0)


def _unbroken(text: str) -> str:
    """An interval ('[2.24, 3.37]') and a time with its unit ('0.546 ms') as one word, so that no line break
    splits them (one may come between a ratio and its interval)."""
    text = re.sub(r"(\d) ms\b", "\\1\u00a0ms", text)
    return re.sub(r"\[([\d.]+), ([\d.]+)\]", "[\\1,\u00a0\\2]", text)


def caps(headers, rows, width: int = WIDTH, gap: int = GAP) -> list[int | None]:
    """The widest each column may be for the table to fit `width`: the widest columns are narrowed first,
    none below its longest word (at most LONGEST_WORD) nor below NARROWEST."""
    n = len(headers)
    cells = [[str(headers[i])] + [str(r[i]) for r in rows if i < len(r)] for i in range(n)]
    natural = [max(_width(c) + (HEADER_PAD if k == 0 else 0) for k, c in enumerate(col)) for col in cells]
    def longest_word(i: int) -> int:
        # a line may break at a space or after a hyphen (textwrap's rule), nowhere else
        words = [len(w) + (HEADER_PAD if k == 0 else 0) for k, c in enumerate(cells[i])
                 for w in re.split(r"[ \t\n]+|(?<=\w-)(?=\w)", c)]
        return max(NARROWEST, min(LONGEST_WORD, max(words)))
    floor = [min(natural[i], longest_word(i)) for i in range(n)]
    if n:   # the first column names the row: its first word stays whole, its next lines are indented by one
        floor[0] = min(natural[0], max(max(len(c.split()[0]) if c.split() else 0,
                                           max(len(w) + 1 for w in re.split(r"[ \t\n]+|(?<=\w-)(?=\w)", c)))
                                       for c in cells[0][1:] or [""]))
        floor[0] = max(floor[0], min(natural[0], len(cells[0][0]) + HEADER_PAD))
    cap = list(natural)
    while sum(cap) + gap * (n - 1) > width:
        movable = [i for i in range(n) if cap[i] > floor[i]]
        if not movable:
            break   # every column as narrow as it goes: the table stays wider than the terminal
        widest = max(movable, key=lambda i: cap[i])
        excess = sum(cap) + gap * (n - 1) - width
        second = max((cap[i] for i in movable if i != widest), default=0)
        # down to the next widest at most, so that the widest columns share the narrowing
        cap[widest] = max(floor[widest], second, cap[widest] - excess)
        if cap[widest] == second and second > floor[widest]:
            cap[widest] -= 1
    return [None if c == w else c for c, w in zip(cap, natural)]


def table(rows, headers, width: int = WIDTH) -> str:
    """tabulate's plain table, its widest columns wrapped so that it fits `width` columns (with one space
    between columns where two leave no room)."""
    rows = [[_unbroken("" if c is None else str(c)) for c in r] for r in rows]
    headers = [str(h) for h in headers]
    gap, fmt = GAP, "simple"
    limits = caps(headers, rows, width, gap)
    if _fitted(headers, rows, limits) + gap * (len(headers) - 1) > width:
        gap, fmt = 1, "compare-compact"
        limits = caps(headers, rows, width, gap)
    if limits and limits[0] is not None:   # wrapped here, so that a row's next lines start with a space
        rows = [[_indented(r[0], limits[0])] + r[1:] if r else r for r in rows]
        limits[0] = None
    if not any(limits):
        made = tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)
    else:
        made = tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True, maxcolwidths=limits,
                        maxheadercolwidths=[None if c is None else c - HEADER_PAD for c in limits])
    return made.replace("\u00a0", " ")


def _indented(text: str, width: int) -> str:
    return textwrap.fill(text, width, subsequent_indent=" ", break_long_words=False)


def _fitted(headers, rows, limits) -> int:
    """The columns' widths together, each at its limit or, without one, as wide as its cells."""
    return sum(c if c is not None else max([_width(h) + HEADER_PAD] + [_width(r[i]) for r in rows if i < len(r)])
               for i, (h, c) in enumerate(zip(headers, limits)))


def wrap(text: str, width: int = WIDTH, indent: str = "") -> str:
    """A paragraph wrapped at word boundaries; its second and later lines indented by `indent`."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False)
                     for line in text.splitlines()) if text else text
