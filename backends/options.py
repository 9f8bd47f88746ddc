"""What the harness tells every backend about a run: one frozen, typed
object, built once by the CLI and passed once to each backend.  It pickles
as it is, so it crosses into a backend's child process (backends/isolated.py)
unchanged.

`clblast_params` names CLBlast's parameters in the same words as the CLBlast
backends' modes (backends/clblast/tuned.py): TUNED, the better of what
`compare tune` verified for the device and CLBlast's database, each a mode;
DATABASE, CLBlast's own only."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TUNED, DATABASE = "tuned", "database"
CLBLAST_PARAMS = (TUNED, DATABASE)
ClblastParams = Literal["tuned", "database"]


@dataclass(frozen=True)
class RunOptions:
    clblast_params: ClblastParams = TUNED
    # a forward pass that takes longer fails its backend (the others run); None: no limit
    timeout_s: float | None = None

    def __post_init__(self):
        if self.clblast_params not in CLBLAST_PARAMS:
            raise ValueError(f"clblast_params is one of {', '.join(CLBLAST_PARAMS)}, not {self.clblast_params!r}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s is a positive number of seconds or None, not {self.timeout_s!r}")
