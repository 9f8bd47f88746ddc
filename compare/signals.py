"""The CLI's signal handlers: SIGINT and SIGTERM note the signal where every
layer can ask for it (nets/errors.py) and raise Interrupted."""
import signal

from nets.errors import Interrupted, forget_signals, note_signal


def _handler(signum, frame):
    note_signal(signum)
    raise Interrupted(signum)


def install_handlers() -> dict:
    """SIGINT and SIGTERM raise Interrupted; the handlers they had, for restore_handlers()."""
    forget_signals()
    return {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore_handlers(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    forget_signals()
