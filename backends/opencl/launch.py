"""The one way every OpenCL backend launches its own kernels.

A Launch is one kernel built for one layer's -D constants, with its
NDRange worked out once at prepare: `size` work-items per dimension,
rounded up to the work-group (kernels return early past `size`).  The
work-group is a shape, shrunk to what the device and the built kernel
accept; a function of the Limits that picks one; or None, which leaves it
to the OpenCL runtime (the study's baseline did so).
"""
from __future__ import annotations

from .workgroups import limits, rounded_global, shrink

# the -D ACT code of each activation (kernels/common.h)
ACT_CODES = {"none": 0, "relu": 1, "sigmoid": 2, "relu6": 3, "tanh": 4, "hardsigmoid": 5, "hardswish": 6, "silu": 7,
             "gelu": 8, "gelu_tanh": 9}


def step_name(what: str, activation: str) -> str:
    """A step's name with the activation fused into it, e.g. 'conv+relu'."""
    return what if activation == "none" else f"{what}+{activation}"


class Launch:
    def __init__(self, rt, filename: str, name: str, defines: dict | None, size: tuple, local=None,
                 *, exact: bool = False, kernel=None):
        """`exact`: `local` is used as given and `size` must be a multiple
        of it.  `kernel`: an already built kernel instead of building one."""
        self.rt = rt
        self.name = name
        self.kernel = kernel if kernel is not None else rt.kernel(filename, name, defines)
        size = tuple(int(n) for n in size)
        if local is None:
            self.local, self.global_ = None, size
            return
        if callable(local):
            local = local(limits(rt, self.kernel))
        self.local = tuple(int(v) for v in local) if exact else shrink(tuple(local), limits(rt, self.kernel))
        self.global_ = rounded_global(size, self.local)
        if exact and self.global_ != size:
            raise ValueError(f"{name}: NDRange {size} is not a multiple of the work-group {self.local}")

    def __call__(self, *args):
        """Enqueue on the runtime's in-order queue; returns the kernel's event."""
        return self.kernel(self.rt.queue, self.global_, self.local, *args)

    def describe(self) -> dict:
        return {"global": list(self.global_),
                "local": list(self.local) if self.local else "runtime's choice"}
