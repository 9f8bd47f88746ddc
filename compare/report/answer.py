"""The study's question answered in words, per device and net, from a
results file.  First the question itself: the best hand-written backend
against CLBlast at its best (the ratio with its interval, CLBlast's mode
and how deep its tuning went); then the search compiler on the same device,
and the fastest peer, each against both.  Only backends whose output passed
the check against the float64 oracle are in a ratio; those that failed or
ran unchecked are named as such and nowhere else.  `compare run` ends with
these lines, and the report opens with them."""
from __future__ import annotations

from dataclasses import dataclass

from backends.options import DATABASE

from .. import analysis as an
from ..modes import times
from ..results import BackendResult, RunResult
from ..speedup import Speedup

HAND_WRITTEN, CLBLAST, COMPILER, PEER = "hand-written", "clblast", "compiler", "peer"


def tuning_behind(b: BackendResult) -> str:
    """How CLBlast's parameters were set in `b`'s run, as its results say."""
    depth = b.config.get("clblast_tuning_depth")
    at = b.config.get("clblast_tuned_at")   # this batch has no choice of its own: another batch's ran
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
    """How deep a search compiler's schedule search went, as its results say."""
    return b.config.get("search_depth") or b.config.get("tinygrad_search")


def _fastest(res: RunResult, family: str) -> BackendResult | None:
    return min((b for b in an.trusted(res) if b.family == family), key=an.compute_ms, default=None)


@dataclass
class Contender:
    """The fastest backend of one side (hand-written, the compiler, the peers) of a results file, and its
    speedup over CLBlast at its best there: a bar of the report's summary figure."""

    family: str
    backend: BackendResult
    speedup: Speedup


def contenders(res: RunResult) -> list[Contender]:
    clb = an.reference(res, an.BEST_CLBLAST)
    if clb is None or not times(res.mode):
        return []
    found = [(family, _fastest(res, family)) for family in (HAND_WRITTEN, COMPILER, PEER)]
    return [Contender(family, b, an.speedup(clb, b)) for family, b in found if b is not None]


def _named(b: BackendResult, extra: str | None = None) -> str:
    return f"(`{b.label}`, {an.compute_ms(b):.3f} ms" + (f", {extra}" if extra else "") + ")"


def _missing(res: RunResult, family: str, what: str) -> str:
    """Why no backend of `family` is in the comparison."""
    timed = [b for b in an.timed(res) if b.family == family]
    failed = [b for b in res.backends if b.family == family and b.status == "FAILED"]
    if timed or failed:
        whys = [f"`{b.label}` ({an.untrusted_why(res, b)})" for b in timed] + [f"`{b.name}` (FAILED)" for b in failed]
        return f"no {what} backend passed the check against the oracle: " + ", ".join(whys)
    return f"no {what} backend was timed"


def lines(res: RunResult) -> list[str]:
    """The answer for one results file, in sentences; [] for a file that timed nothing."""
    if not times(res.mode) or not an.timed(res):
        return []
    where = f"On {res.device.name}, {res.net.name} batch {res.net.batch}"
    if an.unchecked_note(res):
        return [f"{where}: no ratio, as this run did not check outputs against the float64 oracle "
                f"(--mode performance); run with `--mode both` for an answer."]
    hand, clb = _fastest(res, HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
    hand_text = f"the best hand-written backend {_named(hand)}" if hand else None
    clb_text = f"CLBlast at its best {_named(clb, tuning_behind(clb))}" if clb else None
    if hand and clb:
        out = [f"{where}: {an.speedup(clb, hand).sentence(hand_text, clb_text)}."]
    else:
        out = [f"{where}: no answer to the study's question: "
               + "; ".join(_missing(res, fam, what) for fam, what, b in
                           ((HAND_WRITTEN, "hand-written", hand), (CLBLAST, "CLBlast", clb)) if b is None) + "."]
    for family, title in ((COMPILER, "The search compiler on the same device"), (PEER, "The fastest peer")):
        rival = _fastest(res, family)
        if rival is None:
            continue
        extra = search_behind(rival) if family == COMPILER else None
        parts = [an.speedup(ref, rival).sentence("it", f"{what} (`{ref.label}`)")
                 for ref, what in ((hand, "the best hand-written backend"), (clb, "CLBlast at its best")) if ref]
        out.append(f"{title} {_named(rival, extra)}: " + ("; ".join(parts) if parts else "nothing to hold it against")
                   + ".")
    left = [f"`{b.label}` ({an.untrusted_why(res, b)})" for b in an.timed(res) if an.untrusted_why(res, b)]
    left += [f"`{b.name}` (FAILED: {(b.reason or '').splitlines()[0][:120]})" for b in res.backends
             if b.status == "FAILED"]
    if left:
        out.append("In no ratio: " + ", ".join(left) + ".")
    return out


def sentence(res: RunResult) -> str | None:
    """The first line of the answer (the study's question), or None for a file that timed nothing."""
    said = lines(res)
    return said[0] if said else None


def sentences(results: list[RunResult]) -> list[str]:
    return [line for r in results for line in lines(r)]


def _depth(b: BackendResult) -> str:
    """CLBlast's tuning in a few words: the share of its default search behind the mode that ran."""
    depth = str(b.config.get("clblast_tuning_depth") or "")
    share = depth.split(" of CLBlast's default search")[0] if "of CLBlast's default search" in depth else None
    if b.mode == DATABASE or not str(b.config.get("clblast_parameters", "")).startswith("tuned"):
        return "database" + (f"; its tuning ({share}) not faster" if share else "")
    return f"tuned, {share} of the default search" + (f", sets of {b.config['clblast_tuned_at']}"
                                                         if b.config.get("clblast_tuned_at") else "")


def answer_table(results: list[RunResult]):
    """The answer per device and net as one table (the README's): the best hand-written backend against
    CLBlast at its best, then the search compiler and the fastest peer against the best hand-written one."""
    headers = ["device", "net", "best hand-written", "CLBlast at its best", "hand-written's speedup over CLBlast",
               "search compiler", "hand-written's speedup over it", "fastest peer", "hand-written's speedup over it"]
    rows = []
    for res in results:
        if not times(res.mode) or an.unchecked_note(res) or not an.timed(res):
            continue
        hand, clb = _fastest(res, HAND_WRITTEN), an.reference(res, an.BEST_CLBLAST)
        row = [res.device.name, f"{res.net.name} (batch {res.net.batch})",
               f"`{hand.label}` {an.compute_ms(hand):.3f} ms" if hand else "none passed",
               f"`{clb.label}` {an.compute_ms(clb):.3f} ms ({_depth(clb)})" if clb else "none passed",
               an.speedup(clb, hand).text() if hand and clb else "—"]
        for family in (COMPILER, PEER):
            rival = _fastest(res, family)
            row += ([f"`{rival.label}` {an.compute_ms(rival):.3f} ms", an.speedup(rival, hand).text() if hand else "—"]
                    if rival else ["—", "—"])
        rows.append(row)
    return headers, rows
