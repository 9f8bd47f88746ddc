"""A side's process drawn more than once (`compare run --draws N`): on some
machines a fresh process draws its speed as it starts (on the H200's guest
about one in four ran a pass 1.4x slower, whatever it ran:
reports/nvidia-h200/NOTES.md), so a backend that runs in child processes
(tinygrad, OpenCV, TensorFlow, CLBlast's) is prepared in N fresh processes
and the one whose passes are fastest is kept, every baseline at its best.
The runner's own process (our kernels, PyTorch, numpy) is drawn once: a
side drawn more often is only ever favoured by it.  What each draw gave is
kept in the backend's config, and the answer says it in one line."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

DRAW_PASSES = 5   # untimed passes whose median tells one process's draw from another's
KEY = "process_draws"


@dataclass(frozen=True)
class ProcessDraws:
    draws: int                 # processes asked for
    pass_ms: list[float]       # each that stood: the median of its DRAW_PASSES passes (upload, compute, download)
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


def drawn_line(res) -> str | None:
    """The one line a run says where it drew a side's process more than once, or None."""
    said = []
    for b in res.backends:
        drawn = ProcessDraws.from_config(b.config) if b.status == "OK" else None
        if drawn is not None and len(drawn.pass_ms) > 1:
            said.append(f"`{b.name}` the {drawn.words()}")
    if not said:
        return None
    return (f"Processes drawn: {'; '.join(said)}; the runner's own process (the sides in it) was drawn once.")
