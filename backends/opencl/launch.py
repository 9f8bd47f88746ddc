"""The one way every OpenCL backend launches its own kernels.

A Launch is one kernel built for one layer's -D constants, with its
NDRange worked out once at prepare: `size` work-items per dimension,
rounded up to the work-group (kernels return early past `size`).  The
work-group is a shape, shrunk to what the device and the built kernel
accept; a function of the Limits that picks one; or None, which leaves it
to the OpenCL runtime (the study's baseline did so).

A launch sets its kernel's arguments once per set of arguments it is called
with (on a kernel object of its own: the runtime's is shared by every launch
of the same program), so a forward pass only enqueues; pyopencl's
Kernel.__call__ would set every argument again on every call
(`Runtime.bind_once` False does that still: benchmarks/launches.py holds the
two against each other).  While the runtime records a command buffer
(replay.py), a launch is recorded there instead of enqueued.
"""
from __future__ import annotations

import pyopencl as cl

from .workgroups import limits, rounded_global, shrink

MAX_BOUND = 8   # argument sets a launch keeps bound kernels for; past that it sets them per call (no op needs more)

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
        self._bound: dict[tuple, object] = {}   # arguments -> a kernel object of this launch's with them set
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
        """Enqueue on the runtime's in-order queue (or record into the command buffer it is recording);
        returns the kernel's event (None when recorded)."""
        rt = self.rt
        rt.kernel_launches += 1
        if not rt.bind_once and rt.recording is None:
            return self.kernel(rt.queue, self.global_, self.local, *args)
        kernel = self.bound(args)
        if rt.recording is not None:
            rt.recording.add(kernel, self.global_, self.local, args)
            return None
        return cl.enqueue_nd_range_kernel(rt.queue, kernel, self.global_, self.local)

    def bound(self, args: tuple):
        """A kernel object with `args` set: made and set the first time these arguments come."""
        try:
            return self._bound[args]
        except KeyError:
            pass
        except TypeError:   # an argument that cannot be a key: set per call on a kernel of its own
            return self._fresh(args)
        kernel = self._fresh(args)
        if len(self._bound) < MAX_BOUND:
            self._bound[args] = kernel
        return kernel

    def _fresh(self, args: tuple):
        kernel = cl.Kernel(self.kernel.program, self.kernel.function_name)
        kernel.set_args(*args)
        return kernel

    def describe(self) -> dict:
        return {"global": list(self.global_),
                "local": list(self.local) if self.local else "runtime's choice"}
