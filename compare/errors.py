"""The two ways a command fails on purpose.

UserError: bad input or a missing prerequisite; the CLI prints its message
on one line and exits 2.  CheckFailed: outputs disagreed with the oracle;
exit 1.  Anything else is a bug and shows a traceback.
"""


class UserError(Exception):
    exit_code = 2


class Unsupported(Exception):
    """A backend cannot do a layer or a shape; shown as UNSUPPORTED, never faked."""


class CheckFailed(Exception):
    exit_code = 1
