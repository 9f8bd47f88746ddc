"""CLBlast's parameter overrides, tracked.

`pyclblast.override_parameters` replaces, for the whole process and one
device, the parameters a CLBlast kernel is compiled with (every parameter
of the kernel must be given; wrong ones compile into silently wrong
results, so outputs are always checked).  It cannot be undone: neither
CLBlastClearCache nor anything else brings back the database default.  And
it is not free: about 0.5 ms of host time per call on the 2-core PoCL
machine, against 0.08 ms for a small xGEMM.  So:

- `ensure` overrides only when the wanted parameters differ from the ones
  in force, and every call made is counted (backends report the switches a
  pass makes: they are part of its time);
- `in_force` tells what a backend that relies on the database defaults is
  really running with, so it can refuse instead of reporting a mix.

Kernel names are CLBlast's database names: Xgemm, XgemmDirect, Xgemv,
XgemvFast, XgemvFastRot, Xconvgemm, Copy, Pad, Transpose, Padtranspose,
Xaxpy, and GemmRoutine (XGEMM_MIN_INDIRECT_SIZE: a GEMM of m*n*k below its
cube runs the direct kernel, else the indirect one).
"""
from __future__ import annotations

import time

PRECISION = 32                 # CLBlastPrecisionSingle
ALWAYS_INDIRECT = {"XGEMM_MIN_INDIRECT_SIZE": 0}
ALWAYS_DIRECT = {"XGEMM_MIN_INDIRECT_SIZE": 1 << 20}   # (2^20)^3 exceeds any GEMM that fits a device

_ACTIVE: dict[tuple[int, str], dict] = {}   # (device pointer, kernel) -> parameters in force
_CALLS = [0]


def ensure(device, kernel: str, parameters: dict) -> bool:
    """Put `parameters` in force for `kernel` on `device`; True when that took an override call."""
    from .library import pyclblast
    key = (device.int_ptr, kernel)
    wanted = {k: int(v) for k, v in parameters.items()}
    if _ACTIVE.get(key) == wanted:
        return False
    pyclblast.override_parameters(device, kernel, PRECISION, wanted)
    _ACTIVE[key] = wanted
    _CALLS[0] += 1
    return True


def in_force(device) -> dict[str, dict]:
    """kernel -> parameters overridden on `device` so far in this process."""
    return {kernel: dict(p) for (ptr, kernel), p in _ACTIVE.items() if ptr == device.int_ptr}


def calls() -> int:
    """Override calls made so far in this process (a backend counts its own as a difference)."""
    return _CALLS[0]


def override_ms(device, kernel: str, one: dict, other: dict, calls: int = 10) -> float:
    """The least host time (ms) of one override call, switching `kernel` between two of its sets `calls`
    times: the part of a parameter switch that is certain (the program CLBlast then looks up again, or
    compiles, comes on top).  It changes what is in force: for a process that runs no routine after it."""

    from .library import pyclblast
    best = float("inf")
    for k in range(calls):
        wanted = {name: int(v) for name, v in (one if k % 2 else other).items()}
        t0 = time.perf_counter()
        pyclblast.override_parameters(device, kernel, PRECISION, wanted)
        best = min(best, (time.perf_counter() - t0) * 1e3)
        _ACTIVE[(device.int_ptr, kernel)] = wanted
    return best


def switch_ms(device, call, kernel: str, one: dict, other: dict, rounds: int = 4) -> float:
    """The least host time (ms) one switch of `kernel` between two of its sets adds to the call after it
    (`call`, a backends/clblast/call.py Call whose routine runs `kernel`): the override call, and what CLBlast
    then does again for the call (its program looked up, or compiled).  Each of `rounds` calls after a switch
    is held against the same call again with nothing switched; the least of the first less the least of the
    second, and never less than the override call's own least time."""
    switched, alone, override = [], [], []
    for k in range(rounds):
        t0 = time.perf_counter()
        ensure(device, kernel, one if k % 2 else other)   # the sets alternate: a real override call each time
        t1 = time.perf_counter()
        call.wall_ms()
        switched.append((time.perf_counter() - t0) * 1e3)
        override.append((t1 - t0) * 1e3)
        alone.append(call.wall_ms())
    return max(min(switched) - min(alone), min(override))
