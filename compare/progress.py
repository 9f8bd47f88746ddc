"""One status line on stderr during long runs.  On a terminal it is redrawn in place; off one (a log
file, a background job) it is written as a plain line at most every 20 s, so that a short command
stays quiet and an hours-long `compare tune` still shows where it is."""
from __future__ import annotations

import shutil
import sys
import time

LOG_EVERY_S = 20.0
WIDTH = 100


class Progress:
    def __init__(self, stream=None, in_place: bool | None = None, every_s: float = LOG_EVERY_S,
                 clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.in_place = self.stream.isatty() if in_place is None else in_place   # a terminal: redraw one line
        self._width = 0
        self._every_s, self._clock = every_s, clock
        self._last = clock()   # off a terminal the first line waits a whole period too

    def update(self, text: str) -> None:
        if not self.in_place:
            text = text[:WIDTH - 9]   # after the time: within a 100-column terminal
            now = self._clock()
            if now - self._last >= self._every_s:
                self._last = now
                self.stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
                self.stream.flush()
            return
        text = text[:shutil.get_terminal_size((WIDTH, 24)).columns - 1]   # a longer line would wrap, and \r not reach it
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def done(self) -> None:
        if self.in_place and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
