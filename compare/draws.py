"""A side's process drawn more than once (`compare run --draws N`): on some
machines a fresh process draws its speed as it starts (on the H200's guest
about one in four ran a pass 1.4x slower, whatever it ran:
reports/nvidia-h200/NOTES.md), so a backend that runs in child processes
(tinygrad, OpenCV, TensorFlow, PyTorch, CLBlast's) is prepared in N fresh processes
and the one whose passes are fastest is kept, every baseline at its best.
The runner's own process (our kernels, numpy) is drawn by the
fixed piece of plain Python before the run starts (compare/runner_draw.py).
What each draw gave is kept in the backend's config, and the answer says it
in one line."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from backends import screen

DRAW_PASSES = 10  # untimed samples (compare/timing.py) whose median tells one process's draw from another's, in turn
KEY = "process_draws"


@dataclass(frozen=True)
class ProcessDraws:
    draws: int                 # processes asked for
    pass_ms: list[float]       # each that stood: the median compute of its DRAW_PASSES samples, taken in turn
    kept: int                  # which of them (1-based, in pass_ms' order) ran the timed passes
    passes: int = DRAW_PASSES
    failed: list[str] = field(default_factory=list)   # a draw that failed to get ready, and why

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_config(cls, config: dict | None) -> "ProcessDraws | None":
        found = (config or {}).get(KEY)
        if not isinstance(found, dict):
            return None
        try:
            return cls(int(found["draws"]), [float(v) for v in found["pass_ms"]], int(found["kept"]),
                       int(found.get("passes", DRAW_PASSES)), [str(v) for v in found.get("failed", [])])
        except (KeyError, TypeError, ValueError):
            return None   # a file written otherwise: nothing to say

    def words(self) -> str:
        ms = ", ".join(f"{v:.3f}" for v in self.pass_ms)
        lost = f"; {len(self.failed)} failed to start" if self.failed else ""
        return f"fastest of {len(self.pass_ms)} processes ({ms} ms a pass{lost})"


def runner_words(host) -> str:
    """How the runner's own process was drawn, in a few words (compare/runner_draw.py)."""
    figures = getattr(host, "runner_draws", None) or []
    if len(figures) < 2:
        return "the runner's own process was drawn once"
    ms = " then ".join(f"{v:.1f}" for v in figures)
    return f"the runner's own process drawn {len(figures)} times (plain Python {ms} ms)"


def drawn_line(res, limit: int = 160) -> str | None:
    """The one line a run says where it drew a side's process more than once (under `limit` characters: the
    sides named where they fit, else counted; each draw's time stays in the side's config), or None."""
    drawn = [(b.name, d) for b in res.backends if b.status == "OK"
             for d in [ProcessDraws.from_config(b.config)] if d is not None and len(d.pass_ms) > 1]
    if not drawn:
        runner_drawn = len(getattr(res.host, "runner_draws", None) or []) > 1
        return f"Processes drawn: {runner_words(res.host)}." if runner_drawn else None
    counts = {len(d.pass_ms) for _, d in drawn}
    of = f"{max(counts)}" if len(counts) == 1 else f"up to {max(counts)}"
    lost = sum(len(d.failed) for _, d in drawn)
    tail = (f" the fastest of {of} processes" + (f" ({lost} failed to start)" if lost else "")
            + f"; {runner_words(res.host)}.")
    named = "Processes drawn: " + ", ".join(f"`{name}`" for name, _ in drawn) + tail
    if len(named) < limit:
        return named
    n = len(drawn)
    return f"Processes drawn: {n} side{'s' if n != 1 else ''} in child processes, each" + tail


def screened_line(res, limit: int = 160) -> str | None:
    """The one line a run says where a side's child drew slow as it started and was started again
    (backends/screen.py), under `limit` characters; None where none was."""
    stopped = [(b.name, ms) for b in res.backends if b.status == "OK"
               for ms in [(b.config or {}).get(screen.KEY)] if isinstance(ms, list) and ms]
    if not stopped:
        return None
    n = sum(len(ms) for _, ms in stopped)
    figures = sorted(v for _, ms in stopped for v in ms)
    span = f"{figures[0]:.1f}" if len(figures) == 1 else f"{figures[0]:.1f}-{figures[-1]:.1f}"
    tail = (f" drew slow as {'it' if n == 1 else 'they'} started (plain Python {span} ms) and "
            f"{'was' if n == 1 else 'were'} started again.")
    named = f"Processes screened: {n} child{'ren' if n > 1 else ''} of " + ", ".join(f"`{b}`" for b, _ in stopped)
    counted = f"Processes screened: {n} child{'ren' if n > 1 else ''} of {len(stopped)} sides"
    return (named if len(named + tail) < limit else counted) + tail
