"""The README's first screen: the verdict per device in two or three sentences, then a table narrow enough
for 100 columns, both made from the committed results (scripts/readme_answer.py writes them; the wide
tables are on the detail page).  Every figure comes from compare/speedup.py through compare/analysis.py;
a side is called faster only where the ratio's interval excludes 1x (docs/glossary.md)."""
from __future__ import annotations

import re
import textwrap

from tabulate import tabulate

from .. import analysis as an
from ..intervals import CONFIDENCE
from ..modes import times
from ..results import BackendResult, RunResult
from ..speedup import NO_CLEAR_WINNER, TOO_NOISY, Speedup, Verdict, figure
from . import answer
from .naming import known_as, short

WIDTH = 100   # the prose is wrapped here; the table is made to fit it


def groups(results: list[RunResult]) -> dict[str, list[RunResult]]:
    """The files with an answer, by device, in the order the devices first come."""
    out: dict[str, list[RunResult]] = {}
    for res in results:
        if times(res.mode) and not an.unchecked_note(res) and an.timed(res):
            out.setdefault(res.device.name, []).append(res)
    return out


def _span(values: list[float]) -> str:
    low, high = figure(min(values)), figure(max(values))
    return f"{low}x" if low == high else f"{low}x to {high}x"


def _which(nets: list[str], total: int) -> str:
    if len(nets) == total and total > 1:
        return f"all {total} nets" if total > 2 else f"both nets ({' and '.join(nets)})"
    return " and ".join(nets) if len(nets) <= 2 else f"{len(nets)} of {total} nets"


def clauses(pairs: list[tuple[str, Speedup]]) -> list[str]:
    """(net, this side's speedup over the other) as '3.48x to 6.71x faster on all 5 nets', 'no clear winner on
    vgg16', 'too noisy to call on resnet18': the nets grouped by what each interval allows."""
    sorts: dict[str, list[tuple[str, float]]] = {}
    for net, s in pairs:
        word = s.words() if not s.clear else str(s.verdict)
        ratio = s.value if s.verdict is Verdict.FASTER else 1 / s.value
        sorts.setdefault(word.split(" (")[0], []).append((net, ratio))
    out = []
    for word in ("faster", "slower", NO_CLEAR_WINNER, TOO_NOISY):
        found = sorts.get(word, [])
        if found:
            which = _which([n for n, _ in found], len(pairs))
            ratios = f"{_span([r for _, r in found])} " if word in ("faster", "slower") else ""
            out.append(f"{ratios}{word} on {which}")
    return out


_COUNTS = re.compile(r"^(searched|tuned) (\d+)/(\d+)")


def _depth_class(label: str | None) -> str | None:
    """A depth label as a class: 'searched 17/17' -> 'searched to the end', 'tuned 35/52' -> 'tuned in part'
    ('tuned 35/35 tunable': to the end, the rest not the side's to tune)."""
    found = _COUNTS.match(label or "")
    if not found:
        return label
    verb, done, of = found.groups()
    return f"{verb} to the end" if done == of else f"{verb} in part"


def depths(found: list[tuple[str, BackendResult]]) -> str:
    """How deep a side's tuning or search went over the nets: 'database', 'searched to the end on 4 nets,
    untuned on vit-tiny'."""
    by_class: dict[str, list[str]] = {}
    for net, b in found:
        cls = _depth_class(answer.depth_label(b))
        if cls:
            by_class.setdefault(cls, []).append(net)
    if len(by_class) <= 1:
        return next(iter(by_class), "")
    return ", ".join(f"{cls} on {_which(nets, len(found))}" for cls, nets in by_class.items())


def _names(found: list[tuple[str, BackendResult]]) -> str:
    return " or ".join(dict.fromkeys(f"`{b.name}`" for _, b in found))


def verdict(group: list[RunResult]) -> list[str]:
    """The device's answer: ours against CLBlast at its best, against the other sides on the same device,
    and the fastest peer against ours; a sentence each."""
    device = known_as(group[0].device)
    pairs, clbs = [], []
    for res in group:
        hand, clb = answer._fastest(res, answer.HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
        if hand and clb:
            pairs.append((res.net.name, an.speedup(clb, hand)))
            clbs.append((res.net.name, clb))
    said = [f"**{device}.** Against CLBlast at its best ({depths(clbs)}), the hand-written kernels are "
            + ", ".join(clauses(pairs)) + "." if pairs else
            f"**{device}.** No file has both a hand-written and a CLBlast backend that passed."]
    rivals = []
    for family in answer.SAME_DEVICE:
        found = [(res.net.name, answer._fastest(res, family), answer._fastest(res, answer.HAND_WRITTEN))
                 for res in group]
        found = [(net, b, hand) for net, b, hand in found if b and hand]
        if found:
            depth = depths([(net, b) for net, b, _ in found])
            rivals.append(f"{_names([(n, b) for n, b, _ in found])} ({depth}) is "
                          + ", ".join(clauses([(net, an.speedup(hand, b)) for net, b, hand in found])))
    said.append("Against ours on the same device, " + "; ".join(rivals) + "." if rivals else
                "No search compiler or library engine was run on this device yet.")
    peers = [(res.net.name, answer._fastest(res, answer.PEER), answer._fastest(res, answer.HAND_WRITTEN))
             for res in group]
    peers = [(net, b, hand) for net, b, hand in peers if b and hand]
    if peers:
        said.append(f"Against ours, the fastest peer {_names([(n, b) for n, b, _ in peers])} is "
                    + ", ".join(clauses([(net, an.speedup(hand, b)) for net, b, hand in peers])) + ".")
    return said


def _other(res: RunResult, hand: BackendResult | None) -> str:
    """The fastest of the other sides (compiler, engine, peer) against ours, in a few words."""
    rivals = [answer._fastest(res, f) for f in (*answer.SAME_DEVICE, answer.PEER)]
    rival = min((b for b in rivals if b), key=an.compute_ms, default=None)
    if rival is None or hand is None:
        return "—"
    s = an.speedup(hand, rival)
    return f"{rival.name} {s.plain()}" if s.clear else f"{rival.name}, {s.words()}"


def _ms(b: BackendResult | None) -> str:
    return answer.fmt_ms(an.compute_ms(b)).removesuffix(" ms")


def table(results: list[RunResult]) -> tuple[list[str], list[list[str]]]:
    # times in ms (said in the line above the table); 'speedup': ours over CLBlast at its best
    headers = ["device", "net", "ours", "CLBlast", "speedup", "best other, vs ours"]
    rows = []
    for group in groups(results).values():
        for res in group:
            hand, clb = answer._fastest(res, answer.HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
            s = an.speedup(clb, hand)
            rows.append([short(res.device), res.net.name, _ms(hand), _ms(clb),
                         s.text() if s else "—", _other(res, hand)])
    return headers, rows


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub table padded to its widest cell only (tabulate pads headers by two more)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def block(results: list[RunResult]) -> str:
    """The README's generated answer: the verdict per device, then the compact table."""
    paragraphs = []
    for group in groups(results).values():
        text = " ".join(verdict(group))
        paragraphs.append(textwrap.fill(text, WIDTH, break_on_hyphens=False, break_long_words=False))
    headers, rows = table(results)
    note = ("Per net: the best hand-written backend (ours) and CLBlast at its best, median end-to-end compute in "
            f"ms; speedup: ours over CLBlast with its {CONFIDENCE:.0%} interval; best other: the fastest of the "
            "other sides.")
    return "\n\n".join(paragraphs + [textwrap.fill(note, WIDTH), markdown(headers, rows)])


def detail(results: list[RunResult]) -> str:
    """The detail page: per device the wide table (every side, its depth, each ratio's interval) and the
    answer in full, file by file."""
    out = ["# The answer in detail", "",
           "Generated from the committed results by `scripts/readme_answer.py`; the words are "
           "[the glossary's](../docs/glossary.md).", "", textwrap.fill(answer.TABLE_NOTE, WIDTH), ""]
    for device, headers, rows in answer.answer_tables(results):
        group = groups(results)[device]
        out += [f"## {known_as(group[0].device)}", "",
                tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
        for res in group:
            out += [f"**{res.net.name} batch {res.net.batch}:**", ""] + [f"- {line}" for line in answer.lines(res)] + [""]
    return "\n".join(out).rstrip("\n") + "\n"
