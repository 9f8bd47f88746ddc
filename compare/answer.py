"""The study's question answered in words, per device and net, from a
results file: which backend is fastest, by how much against CLBlast at its
best (with the interval, and a winner only where it excludes 1x), and how
deep the tuning behind CLBlast's figure went.  The report opens with it."""
from __future__ import annotations

from backends.options import DATABASE

from . import analysis as an
from .intervals import ratio_interval
from .modes import times
from .results import BackendResult, RunResult

CLBLAST_FAMILY = ("clblast", "clblast-convgemm", "clblast-best")


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


def _ratio(ref: BackendResult, b: BackendResult):
    r = an.ratio(an.compute_ms(ref), an.compute_ms(b))
    ci = ratio_interval(ref.timing.end_to_end.compute.values, b.timing.end_to_end.compute.values)
    return r, ci


def _words(r: float, ci) -> str:
    if ci is None:
        return f"{r:.2f}x (no interval: too few samples)"
    low, high = ci
    if low <= 1.0 <= high:
        return f"{r:.2f}x [{low:.2f}, {high:.2f}], no clear difference"
    return f"{r:.2f}x [{low:.2f}, {high:.2f}]"


def sentence(res: RunResult) -> str | None:
    """One sentence for one results file, or None where it holds no timed CLBlast backend."""
    ref = an.reference(res, an.BEST_CLBLAST)
    timed = [b for b in res.backends if an.compute_ms(b) is not None]
    if ref is None or not timed or not times(res.mode):
        return None
    where = f"On {res.device.name}, {res.net.name} batch {res.net.batch}"
    fastest = min(timed, key=an.compute_ms)
    behind = tuning_behind(ref)
    if fastest.name in CLBLAST_FAMILY:
        others = [b for b in timed if b.name not in CLBLAST_FAMILY]
        text = (f"{where}: CLBlast at its best (`{ref.label}`, {an.compute_ms(ref):.3f} ms, {behind}) is the "
                f"fastest backend")
        if others:
            rival = min(others, key=an.compute_ms)
            r, ci = _ratio(rival, ref)
            text += f"; the next, `{rival.label}`, takes {_words(r, ci)} its time"
        return text + "."
    r, ci = _ratio(ref, fastest)
    verdict = "faster than" if ci is not None and ci[0] > 1.0 else "against"
    return (f"{where}: `{fastest.label}` is the fastest backend ({an.compute_ms(fastest):.3f} ms), "
            f"{_words(r, ci)} {verdict} CLBlast at its best (`{ref.label}`, {an.compute_ms(ref):.3f} ms, {behind}).")


def sentences(results: list[RunResult]) -> list[str]:
    return [s for s in (sentence(r) for r in results) if s]
