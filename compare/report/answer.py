"""The study's question answered in words, per device and net, from a
results file.  First the question itself: the best hand-written backend
against CLBlast at its best (the ratio with its interval, and how deep
CLBlast's tuning went as a short label); then one line per alternative on
the same OpenCL device (the search compiler, the library engine), each with
the depth of its own search as a short label, and the fastest peer.  The
full depth is on the net's page (`depth_rows`), not in the sentence, so
each sentence stays under SENTENCE_MAX characters.

Only backends whose output passed the check against the float64 oracle
are in a ratio; those that failed or ran unchecked are named as such and
nowhere else.  `compare run` ends with these lines, the report opens with
them, and `compare answer` prints them (or, with --table, the README's
tables: one per device)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from backends.options import DATABASE

from .. import analysis as an
from .. import noise
from ..draws import drawn_line, screened_line
from . import kinds
from .naming import known_as
from ..modes import times
from ..results import BackendResult, RunResult
from ..speedup import SPANS_1X, Speedup

HAND_WRITTEN, CLBLAST, COMPILER, ENGINE, PEER = "hand-written", "clblast", "compiler", "engine", "peer"
# the alternatives that run on the same OpenCL device: a line of the answer and a column of the table each
SAME_DEVICE = {COMPILER: "compiler", ENGINE: "engine"}
# the sides whose depth of search is said beside their name: CLBlast's tuning, the compiler's and engine's search
SEARCHED = (CLBLAST, COMPILER, ENGINE)
SENTENCE_MAX = 160


def tuning_behind(b: BackendResult) -> str:
    """How CLBlast's parameters were set in `b`'s run, as its results say (in full: the net's page)."""
    depth = b.config.get("clblast_tuning_depth")
    at = b.config.get("clblast_tuned_at")   # this batch has no choice of its own: another batch's ran
    at = None if at in (None, "None") else at
    tuned = f"the sets chosen at {at}; this batch's own problems: {depth}" if at else f"tuned to {depth}"
    if str(b.config.get("clblast_parameters", "")).startswith("tuned") and depth:
        return f"CLBlast with {tuned}" if at else f"CLBlast {tuned}"
    if b.mode == DATABASE and depth:
        # a tuned mode that failed (a wrong output, a crash) was not slower: it was refused
        failed = [m.name for m in b.modes if m.name != DATABASE and m.status == "FAILED"]
        ran = any(m.name != DATABASE and m.status == "OK" for m in b.modes)
        why = (["faster here than its tuned ones"] if ran or not failed else []) + (
            [f"its {' and '.join(failed)} mode{'s' if len(failed) > 1 else ''} failed the run's checks"] if failed else [])
        return f"CLBlast's database parameters, {'; '.join(why)} ({tuned})"
    if depth:
        return f"CLBlast's database parameters; a tuning to {depth} was not used"
    return "CLBlast's database parameters (no verified tuning for this device)"


def search_behind(b: BackendResult) -> str | None:
    """How deep a search compiler's or engine's own search went, as its results say (in full)."""
    config = b.config or {}
    found = config.get("search_depth") or config.get("tinygrad_search")
    return found or next((str(v) for k, v in config.items() if k.endswith("_search") and v), None)


def depth_text(b: BackendResult) -> str | None:
    """The full depth of a contender's tuning or search (the net's page), None for a side that has none."""
    if b.family == CLBLAST:
        return tuning_behind(b)
    return search_behind(b) if b.family in SAME_DEVICE else None


_SHARE = re.compile(r"([\d.]+)% of CLBlast's default search")
_KERNELS = re.compile(r"(\d+) of (\d+) (?:distinct )?(?:kernels|convolutions|layers|problems)")
# what a depth line says its side cannot tune (OpenCV: depthwise convolutions are not ocl4dnn's): not left undone
_NOT_ITS = re.compile(r"the other (\d+) are not \S+ to tune")


def depth_label(b: BackendResult) -> str | None:
    """The depth in a few words: 'tuned 100%', 'database', 'searched 7/71', 'untuned'; None for a side
    without a search of its own (hand-written kernels, peers)."""
    if b.family == CLBLAST:
        if str(b.config.get("clblast_parameters", "")).startswith("tuned") and b.mode != DATABASE:
            share = _SHARE.search(str(b.config.get("clblast_tuning_depth") or ""))
            return f"tuned {share.group(1)}%" if share else "tuned"
        return "database"
    if b.family not in SAME_DEVICE:
        return None
    # the mode that ran is said first; what another mode ("; tuned mode: ...") would have had comes after
    parts = (search_behind(b) or "").split("; ")
    ran, counts = parts[0], _KERNELS.search(parts[0])
    if ran.startswith(("untuned", "not searched", "not tuned")) or b.mode == "untuned" or (
            "heuristic" in ran and not counts):
        return _no_gain(b, parts[1:]) or "untuned"
    if counts:
        return _counted("tuned" if "tuned" in ran and "searched" not in ran else "searched", ran, counts)
    if ran:
        return ran.split(":")[0].split(",")[0][:24]
    return b.mode


def _no_gain(b: BackendResult, rest: list[str]) -> str | None:
    """'tuned 13/13 no gain' where the untuned mode ran because its searched or tuned mode, which also passed,
    measured no faster: the depth the search reached is part of the answer, not only the mode kept."""
    other = next((p for p in rest if re.match(r"(tuned|searched) mode: ", p)), None)
    counts = _KERNELS.search(other or "")
    if not counts or not any(m.name != b.mode and m.status == "OK" for m in b.modes):
        return None
    return _counted("tuned" if other.startswith("tuned") else "searched", other, counts) + " no gain"


def _counted(verb: str, text: str, counts: re.Match) -> str:
    """'tuned 13/20', or 'tuned 35/35 tunable' where the rest is, the text says, not the side's to tune."""
    done, of = int(counts.group(1)), int(counts.group(2))
    not_its = _NOT_ITS.search(text)
    if not_its and done == of - int(not_its.group(1)):
        return f"{verb} {done}/{done} tunable"
    return f"{verb} {done}/{of}"


def _fastest(res: RunResult, family: str) -> BackendResult | None:
    return min((b for b in an.trusted(res) if b.family == family), key=an.compute_ms, default=None)


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:.1f} ms" if ms >= 100 else f"{ms:.2f} ms" if ms >= 10 else f"{ms:.3f} ms"


def _caveat(b: BackendResult) -> str | None:
    """What a backend's own label adds to its mode ('partly on the CPU'), kept where the mode gives way to the
    depth."""
    label, mode = str((b.config or {}).get("mode_label") or ""), b.mode or ""
    return label[len(mode) + 2:] if mode and label.startswith(mode + ", ") else None


def who(b: BackendResult) -> str:
    """A contender in a few words: its name (with its mode, where the mode is not its depth), and its depth."""
    depth = depth_label(b)
    name = f"`{b.name}`" if depth else f"`{b.label}`"
    said = [fmt_ms(an.compute_ms(b))] + [w for w in (depth, _caveat(b) if depth else None) if w]
    return f"{name} ({', '.join(said)})"


@dataclass
class Contender:
    """The fastest backend of one side (hand-written, the compiler, the engine, the peers) of a results file,
    and its speedup over CLBlast at its best there: a bar of the report's summary figure."""

    family: str
    backend: BackendResult
    speedup: Speedup


def contenders(res: RunResult) -> list[Contender]:
    clb = an.reference(res, an.BEST_CLBLAST)
    if clb is None or not times(res.mode):
        return []
    found = [(family, _fastest(res, family)) for family in (HAND_WRITTEN, *SAME_DEVICE, PEER)]
    return [Contender(family, b, an.speedup(clb, b)) for family, b in found if b is not None]


def _missing(res: RunResult, family: str, what: str) -> str:
    """Why no backend of `family` is in the comparison."""
    timed = [b for b in an.timed(res) if b.family == family]
    failed = [b for b in res.backends if b.family == family and b.status == "FAILED"]
    if timed or failed:
        whys = [f"`{b.name}` {an.untrusted_why(res, b)}" for b in timed] + [f"`{b.name}` FAILED" for b in failed]
        return f"no {what} backend passed the oracle (" + ", ".join(whys[:3]) + (", ..." if len(whys) > 3 else "") + ")"
    return f"no {what} backend was timed"


def heading(res: RunResult) -> str:
    """The line above a file's answer: where, what."""
    return f"{known_as(res.device)}, {res.net.name} batch {res.net.batch}:"


def lines(res: RunResult) -> list[str]:
    """The answer for one results file, a sentence a line; [] for a file that timed nothing."""
    if not times(res.mode) or not an.timed(res):
        return []
    if an.unchecked_note(res):
        return ["No ratio: this run did not check outputs against the float64 oracle (--mode performance); "
                "run it with --mode both."]
    hand, clb = _fastest(res, HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
    if hand and clb:
        out = [an.speedup(clb, hand).sentence(f"Hand-written {who(hand)}", f"CLBlast at its best, {who(clb)}",
                                              f"hand-written {who(hand)}") + "."]
    else:
        out = ["No answer: " + "; ".join(_missing(res, fam, what) for fam, what, b in
                                          ((HAND_WRITTEN, "hand-written", hand), (CLBLAST, "CLBlast", clb))
                                          if b is None) + "."]
    out += work_lines(res)
    for family, title in (*SAME_DEVICE.items(), (PEER, "fastest peer")):
        rival = _fastest(res, family)
        if rival is None:
            continue
        parts = [an.speedup(ref, rival).versus(what) for ref, what in ((hand, "hand-written"), (clb, "CLBlast"))
                 if ref]
        line = f"{title.capitalize()} {who(rival)}: " + (", ".join(parts) if parts else "nothing to hold it against") + "."
        if len(line) >= SENTENCE_MAX and len(parts) > 1:   # too long for one sentence: one a side it is held against
            line = f"{title.capitalize()} {who(rival)}: {parts[0]}.\n" + "\n".join(f"`{rival.name}` {p}." for p in parts[1:])
        out += line.split("\n")
    left = [f"`{b.name}` ({an.untrusted_why(res, b)})" for b in an.timed(res) if an.untrusted_why(res, b)]
    left += [f"`{b.name}` (FAILED)" for b in res.backends if b.status == "FAILED"]
    if left:   # the reasons are in the run's tables; here the names, a few at most
        out.append("In no ratio: " + ", ".join(left[:4]) + (f" and {len(left) - 4} more" if len(left) > 4 else "")
                   + ".")
    said = [line for line in (noise.busy_line(res.host), noise.slow_processes_line(res, SENTENCE_MAX),
                              drawn_line(res, SENTENCE_MAX), screened_line(res, SENTENCE_MAX)) if line]
    return said + out


# A transformer's answer says who wins its two kinds of work besides the whole pass: attention, and the matrix
# products of the projections and the MLP (1x1 convolutions on the tokens: nets/spec.py layer_category)
TRANSFORMER_WORK = (("attention", "attention"), ("conv 1x1", "the projections and MLP"))


def work_lines(res: RunResult) -> list[str]:
    """For a net with attention: the fastest hand-written backend against CLBlast at its best on each of
    TRANSFORMER_WORK (the per-kind table's ratio and interval: kinds.kind_table); [] for any other net."""
    table = kinds.kind_table(res)
    if table is None or "attention" not in table.categories:
        return []
    out = []
    for category, what in TRANSFORMER_WORK:
        if category not in table.categories:
            continue
        k = table.categories.index(category)
        ref = table.references[k]
        hand = [i for i, name in enumerate(table.names) if res.backend(name).family == HAND_WRITTEN
                and table.cells[i][k].ms is not None and table.cells[i][k].speedup is not None
                and table.cells[i][k].timed is None]
        if ref is None or not hand:
            continue
        i = min(hand, key=lambda i: table.cells[i][k].ms)
        count = table.layer_counts[k]
        said = table.cells[i][k].speedup.sentence(f"hand-written `{table.names[i]}`", f"CLBlast at its best (`{ref}`)")
        out.append(f"On {what} ({count} layer{'s' if count > 1 else ''}): {said}.")
    return out


def sentence(res: RunResult) -> str | None:
    """The first line of the answer (the study's question), or None for a file that timed nothing."""
    said = lines(res)
    return said[0] if said else None


def sentences(results: list[RunResult]) -> list[str]:
    """Every file's answer: its heading, then its sentences."""
    out = []
    for r in results:
        said = lines(r)
        out += [heading(r)] + ["- " + s for s in said] if said else []
    return out


def depth_rows(res: RunResult):
    """The net's page: how far each contender's tuning or search went, the short label and in full."""
    rows = [[b.label, b.family, depth_label(b), depth_text(b)] for b in an.timed(res)
            if b.family in SEARCHED and depth_text(b)]
    return (["backend", "side", "in short", "in full"], rows) if rows else None


# -- the README's tables: one per device ----------------------------------------------------------------------

TABLE_NOTE = ("A row per net, every output checked against a float64 oracle; times: end-to-end compute, median. "
              "speedup: the best hand-written backend's over CLBlast at its best (its fastest backend, and how "
              "deep its tuning went); compiler, engine, fastest peer: the fastest of that side, and the "
              "hand-written one's speedup over it.  In brackets the 95% interval of the ratio; " + SPANS_1X + ".")


def _cell(b: BackendResult | None) -> str:
    if b is None:
        return "none passed"
    depth = depth_label(b)
    if not depth:
        return f"`{b.label}` {fmt_ms(an.compute_ms(b))}"
    return f"`{b.name}` {fmt_ms(an.compute_ms(b))}, " + ", ".join(w for w in (depth, _caveat(b)) if w)


def _ratio(s: Speedup | None) -> str:
    return "—" if s is None else s.short()


def answer_tables(results: list[RunResult]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per device: (its name, headers, a row per net).  The compiler's and the engine's columns are there
    only where some file of that device has one of theirs that passed."""
    by_device: dict[str, list[RunResult]] = {}
    for res in results:
        if times(res.mode) and not an.unchecked_note(res) and an.timed(res):
            by_device.setdefault(res.device.name, []).append(res)
    out = []
    for device, group in by_device.items():
        families = [f for f in (*SAME_DEVICE, PEER) if any(_fastest(r, f) for r in group)]
        headers = ["net", "hand-written", "CLBlast at its best", "speedup"] + [
            SAME_DEVICE.get(f, "fastest peer") for f in families]
        rows = []
        for res in group:
            hand, clb = _fastest(res, HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
            row = [f"{res.net.name} b{res.net.batch}", _cell(hand), _cell(clb),
                   _ratio(an.speedup(clb, hand)) if hand and clb else "—"]
            for family in families:
                rival = _fastest(res, family)
                row.append(f"{_cell(rival)}: {_ratio(an.speedup(rival, hand))}" if rival and hand
                           else _cell(rival) if rival else "—")
            rows.append(row)
        out.append((device, headers, rows))
    return out


# -- the answer as data: `compare answer --json` (docs/files.md: "JSON on stdout") -----------------------------

@dataclass
class Ratio:
    """A speedup as data: the ratio, its 95% interval (null: fewer than 5 repeats a side) and what the interval allows."""

    value: float
    low: float | None
    high: float | None
    verdict: str          # faster, slower, no clear winner, too noisy to call (docs/glossary.md)


@dataclass
class Side:
    backend: str
    mode: str | None
    ms: float | None      # end-to-end compute, median
    depth: str | None     # the short label ("tuned 100%", "searched 7/71"); null for a side without a search
    depth_full: str | None


@dataclass
class Alternative:
    side: str                          # compiler, engine or peer
    fastest: Side
    hand_written_over_it: Ratio | None  # the best hand-written backend's speedup over it
    it_over_clblast: Ratio | None       # its speedup over CLBlast at its best


@dataclass
class FileAnswer:
    device: str
    net: str
    batch: int
    sentences: list[str]
    hand_written: Side | None
    clblast: Side | None               # CLBlast at its best
    hand_written_over_clblast: Ratio | None
    alternatives: list[Alternative]
    in_no_ratio: list[str]             # backends timed or failed whose output is in no ratio


def _ratio_data(s: Speedup | None) -> Ratio | None:
    if s is None:
        return None
    low, high = s.interval if s.interval else (None, None)
    return Ratio(s.value, low, high, s.words().split(" (")[0])


def _side(b: BackendResult | None) -> Side | None:
    return None if b is None else Side(b.name, b.mode, an.compute_ms(b), depth_label(b), depth_text(b))


def as_data(res: RunResult) -> FileAnswer:
    hand, clb = _fastest(res, HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
    checked = times(res.mode) and not an.unchecked_note(res)
    alternatives = []
    for family in (*SAME_DEVICE, PEER):
        rival = _fastest(res, family) if checked else None
        if rival is not None:
            alternatives.append(Alternative(family, _side(rival), _ratio_data(an.speedup(rival, hand)),
                                            _ratio_data(an.speedup(clb, rival))))
    left = [b.name for b in an.timed(res) if an.untrusted_why(res, b)] + [
        b.name for b in res.backends if b.status == "FAILED"]
    return FileAnswer(res.device.name, res.net.name, res.net.batch, lines(res), _side(hand) if checked else None,
                      _side(clb) if checked else None, _ratio_data(an.speedup(clb, hand)) if checked else None,
                      alternatives, left)
