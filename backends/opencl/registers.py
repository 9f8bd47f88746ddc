"""Build options that cap a kernel's registers, so it may run larger work-groups.

A GPU's compute unit shares one register file among the work-items it holds: a kernel
that uses many registers a work-item is allowed fewer work-items a group (its
WORK_GROUP_SIZE).  NVIDIA's OpenCL takes a cap from the program's build options
(extension cl_nv_compiler_options, `-cl-nv-maxrregcount`, passed on to ptxas); other
platforms have no such option, and get none.  A cap may make the compiler spill to
memory, so a capped kernel is only ever one form among others, timed before it is kept.
"""
from __future__ import annotations

EXTENSION = "cl_nv_compiler_options"
REGISTER_FILE = 65536   # 32-bit registers a compute unit holds on every NVIDIA GPU since Kepler
MAX_REGISTERS = 255     # a work-item's most on those GPUs


def register_cap(device, work_items: int) -> tuple[str, ...]:
    """The build options that let a kernel run `work_items` a group on `device`: the register cap that
    fits them in the register file (a multiple of 8, as the hardware allocates them), or () where the
    device takes no cap."""
    if EXTENSION not in str(getattr(device, "extensions", "")).split():
        return ()
    cap = min(MAX_REGISTERS, REGISTER_FILE // max(int(work_items), 1)) // 8 * 8
    return (f"-cl-nv-maxrregcount={cap}",) if cap >= 8 else ()
