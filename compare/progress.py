"""The one progress display of a long command, on stderr, with one estimate of the time left for the whole run.

On a terminal it is rich's live display (the time so far, a bar, the time left, what is being done), redrawn
in place and gone when the command ends.  Off one (a log file, a background job, the tests) it is a plain
line with the time of day, at most every 20 s, also while nothing new is said (a search that answers only
when done): a short command stays quiet and an hours-long `compare tune` still shows where it is.

The time left is told from the steps done so far and the time they took (`expect` and `advance`: a run's
backends), or, for a run that ends by a deadline (`until`: a tuning budget), as the time to that deadline."""
from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _Display
from rich.table import Column
from rich.text import Text

from .terminal import WIDTH   # a plain line stays within it, after the time of day

LOG_EVERY_S = 20.0


def left_text(seconds: float | None) -> str:
    """'about 40 s left', 'about 12 min left'; '' when nothing can be told yet."""
    if seconds is None:
        return ""
    return f"about {seconds:.0f} s left" if seconds < 120 else f"about {seconds / 60:.0f} min left"


class _Left(ProgressColumn):
    """The live display's time left: the owner's one estimate."""

    def __init__(self, owner: Progress):
        super().__init__()
        self._owner = owner

    def render(self, task) -> Text:
        return Text(left_text(self._owner.left()))


class Progress:
    """`update` says what is being done; `expect` and `advance` count the run's steps; `done` takes the display
    away (before a line that stays is printed).  Off a terminal, a line at most every `every_s` (never with
    inf), looked at every `beat_s` while nothing is said (None: only when something is, as the tests do)."""

    def __init__(self, stream=None, in_place: bool | None = None, every_s: float = LOG_EVERY_S,
                 clock=time.monotonic, beat_s: float | None = 1.0):
        self.stream = stream or sys.stderr
        self.in_place = self.stream.isatty() if in_place is None else in_place   # a terminal: rich draws it
        self._every_s, self._clock = every_s, clock
        self._text, self._end = "", None
        self._last = clock()   # off a terminal the first line waits a whole period too
        self._lock = threading.Lock()
        # rich keeps the steps in either case and draws only on a terminal; the description last, to have the
        # rest of the line
        self._display = _Display(
            TimeElapsedColumn(), BarColumn(bar_width=20), _Left(self),
            TextColumn("{task.description}", markup=False,   # a backend's mode in brackets is no markup
                       table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
            console=Console(file=self.stream), transient=True, expand=True, get_time=clock,
            refresh_per_second=2, disable=not self.in_place)
        self._task = self._display.add_task("", total=None)
        self._beat_s = beat_s if every_s != float("inf") else None
        self._shown = False   # drawing (on a terminal) or beating (off one) since the last `done`
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def update(self, text: str) -> None:
        """What is being done now."""
        with self._lock:   # said from several threads at once (tinygrad's searchers)
            self._text = text
            hidden, self._shown = not self._shown, True
        if self.in_place:
            self._display.update(self._task, description=text)
        if hidden:
            self._show()
        if not self.in_place:
            self.tick()

    def _show(self) -> None:
        if self.in_place:
            self._display.start()
        elif self._beat_s is not None:   # lines while nothing new is said
            self._stop.clear()
            beat = threading.Thread(target=self._beating, args=(self._beat_s,), daemon=True)
            beat.start()
            self._beat = beat   # kept once started: an interrupt inside start() leaves nothing to join

    def expect(self, steps: float) -> None:
        """`steps` more in the whole run (the basis of the time left)."""
        task = self._display.tasks[0]
        self._display.update(self._task, total=(task.total or 0) + steps)

    def advance(self, steps: float = 1) -> None:
        self._display.advance(self._task, steps)

    def now(self) -> float:
        return self._clock()

    def until(self, end: float) -> None:
        """The run ends by `end` (on `now`'s clock): the time left is the time to it."""
        self._end = end

    def left(self) -> float | None:
        """Seconds left of the whole run, as best told now (None before any step is done): the time so far per
        step done, for each step left.  (rich's own estimate is the rate of the last seconds' steps, made
        for many like steps; a run's steps are few and far apart.)"""
        if self._end is not None:
            return max(self._end - self._clock(), 0.0)
        task = self._display.tasks[0]
        if not task.total or not task.completed or task.elapsed is None:
            return None
        return max(task.elapsed * (task.total - task.completed) / task.completed, 0.0)

    def tick(self) -> None:
        """Off a terminal: the line said now, if a period has passed since the last."""
        with self._lock:
            now = self._clock()
            if not self._text or now - self._last < self._every_s:
                return
            self._last = now
            left = left_text(self.left())
            suffix = f" ({left})" if left else ""
            text = self._text[:WIDTH - 9 - len(suffix)] + suffix   # after the time of day
            self.stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self.stream.flush()

    def _beating(self, beat_s: float) -> None:
        while not self._stop.wait(beat_s):
            self.tick()

    def done(self) -> None:
        """Nothing drawn any more (a line that stays may be printed now); a later `update` shows it again, with
        the steps so far."""
        with self._lock:
            self._text = ""
            shown, self._shown = self._shown, False
        if not shown:
            return
        if self.in_place:
            self._display.stop()   # transient: the display is gone
        else:
            self._stop.set()
            if self._beat is not None:
                self._beat.join()
                self._beat = None


class Silent:
    """Progress no one watches: a run started from code."""

    def update(self, text: str) -> None:
        pass

    def expect(self, steps: float) -> None:
        pass

    def advance(self, steps: float = 1) -> None:
        pass


class Prefixed:
    """Another progress's texts, each after `prefix` (a sweep's 'batch 4: '); its steps are the other's."""

    def __init__(self, inner, prefix: str):
        self._inner, self._prefix = inner, prefix

    def update(self, text: str) -> None:
        self._inner.update(self._prefix + text)

    def expect(self, steps: float) -> None:
        self._inner.expect(steps)

    def advance(self, steps: float = 1) -> None:
        self._inner.advance(steps)
