"""Points a running command has reached, told to a test that waits for one
before it signals the command (tests/test_interrupts.py): the signal then
lands where the test means at any speed of the machine, not after a guessed
sleep.  Where COMPARE_READY_FILE names a file, `reached(point)` appends the
point's name to it as a line, once a process; unset (every ordinary run),
it does nothing.  It sits at the bottom of the import order, like
nets/errors.py, so that every layer can tell its points.

The points: `timing` (a backend's first timed pass begins), `timed` (a
backend's timed passes all ended), `building` (an OpenCL program's first
build begins, its signals held), `grace` (a child process had to be killed
after its grace to end, backends/isolated.py)."""
import os

VARIABLE = "COMPARE_READY_FILE"
_told: set[str] = set()


def reached(point: str) -> None:
    """`point` appended to the file COMPARE_READY_FILE names, the first time this process reaches it."""
    path = os.environ.get(VARIABLE)
    if not path or point in _told:
        return
    _told.add(point)
    with open(path, "a", encoding="utf-8") as f:   # one short line: appends from several processes stay whole
        f.write(point + "\n")
