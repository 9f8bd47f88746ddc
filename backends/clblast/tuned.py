"""Which parameters the CLBlast backends run with: the tuning file `compare
tune` made for this device (backends/cache.py, kind 'clblast-tuning'), or
CLBlast's built-in database.

The file holds, per device, one parameter set per kernel tuned at the
tuners' own sizes (`device_sets`: what the study did, used by `clblast` and
`clblast-convgemm`), and sets tuned at the nets' own sizes (`shape_sets`,
one per problem: used by `clblast-best` where they win).
"""
from __future__ import annotations

from compare.errors import UserError

from .. import cache
from . import overrides

KIND = "clblast-tuning"
DEFAULT = "CLBlast database default"

# the database kernels each routine compiles (and so the overrides it needs)
GEMM_KERNELS = ("Xgemm", "XgemmDirect", "Copy", "Pad", "Transpose", "Padtranspose")
GEMV_KERNELS = ("Xgemv", "XgemvFast", "XgemvFastRot")
COPY_KERNELS = ("Xaxpy",)
CONVGEMM_KERNELS = ("Xconvgemm",)


class Tuning(cache.DeviceEntry):
    KIND = KIND

    @property
    def source(self) -> str:
        if not self.entry:
            return DEFAULT
        e = self.entry
        return (f"tuned on {str(e.get('tuned', '?'))[:10]} by `compare tune` (budget {e.get('budget_s', '?')} s, "
                f"took {e.get('took_s', '?')} s)")

    def device_set(self, kernel: str) -> dict | None:
        found = (self.entry or {}).get("device_sets", {}).get(kernel)
        return found["parameters"] if found else None

    def shape_set(self, tuner: str, args: dict, kernel: str) -> dict | None:
        """The set tuned for exactly this problem, else None."""
        for job in (self.entry or {}).get("shape_sets", []):
            if job.get("tuner") == tuner and job.get("args") == args and kernel in job.get("kernels", {}):
                return job["kernels"][kernel]["parameters"]
        return None

    def device_overrides(self, kernels) -> list[tuple[str, dict]]:
        """(kernel, parameters) for the `kernels` that have a device set."""
        return [(k, self.device_set(k)) for k in kernels if self.device_set(k)]


class Applied:
    """The overrides one layer's routines run with, put in force before each
    call (a switch costs an override call only when another layer or backend
    changed them), or, where it relies on the database defaults, a check that
    nothing overrode them since prepare."""

    def __init__(self, device, sets: list[tuple[str, dict]], relies_on_defaults=()):
        self.device = device
        self.sets = sets
        self.relies = tuple(k for k in relies_on_defaults if k not in {name for name, _ in sets})
        self._seen = self._defaults_state()
        if self._seen:
            raise UserError(self._conflict(self._seen))

    def _defaults_state(self) -> dict:
        forced = overrides.in_force(self.device)
        return {k: forced[k] for k in self.relies if k in forced}

    def _conflict(self, forced: dict) -> str:
        return (f"CLBlast's {', '.join(sorted(forced))} parameters were overridden earlier in this process "
                f"(by another CLBlast backend) and CLBlast cannot restore its defaults: run this backend first, "
                f"or tune the device (`compare tune`) so that every CLBlast backend sets its own")

    def __call__(self) -> None:
        for kernel, params in self.sets:
            overrides.ensure(self.device, kernel, params)
        if self.relies and overrides.in_force(self.device).keys() & set(self.relies):
            raise RuntimeError(self._conflict(self._defaults_state()))
