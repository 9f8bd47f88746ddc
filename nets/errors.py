"""The ways a command stops on purpose, importable from every layer: this
module sits at the bottom of the import order (nets < backends < compare)
and imports nothing of the project.

UserError: bad input or a missing prerequisite; the CLI prints its message
on one line and exits 2.  CheckFailed: outputs disagreed with the oracle;
exit 1.  Interrupted: Ctrl-C (exit 130) or SIGTERM (exit 143): nothing more
is written.  Anything else is a bug and shows a traceback.

A signal can also surface as another error first: an OpenCL compiler whose
temporary files were removed by its own signal handler reports a failed
build, a child process killed with the group dies.  So code that turns
errors into recorded failures asks `raise_if_interrupted()` first: once a
signal has come, every error is the interrupt.  The CLI installs the
handlers that note the signal (compare/signals.py); the flag lives here so
that every layer can ask it.
"""
import signal

_received: list[int] = []


class UserError(Exception):
    exit_code = 2


class Unsupported(Exception):
    """A backend cannot do a layer or a shape; shown as UNSUPPORTED, never faked."""


class CheckFailed(Exception):
    exit_code = 1


class PassTimeout(RuntimeError):
    """A forward pass took longer than --timeout-s: the backend fails, the others run."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: stop, write nothing more."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def note_signal(signum: int) -> None:
    """Remember the first signal of this command (the handlers call this)."""
    if not _received:
        _received.append(signum)


def forget_signals() -> None:
    """A new command starts with no signal noted."""
    _received.clear()


def raise_if_interrupted() -> None:
    if _received:
        raise Interrupted(_received[0])
