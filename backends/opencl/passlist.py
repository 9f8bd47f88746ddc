"""A forward pass as a flat list of launches, made once at prepare: (kernel with its arguments
set, global size, local size) in the order the pass enqueues them.  A pass then only walks the
list and enqueues: no op objects, no argument setting, no look-ups (OpenCLNet.flatten).  Where
the device offers command buffers the same list can be recorded instead (replay.py); this is
the least host work per pass elsewhere (NVIDIA's OpenCL offers none)."""
from __future__ import annotations

import pyopencl as cl


class LaunchList:
    """Filled while a pass is recorded into it (launch.py's Launch.__call__ calls add)."""

    def __init__(self, rt):
        self.rt = rt
        self.launches: list[tuple] = []
        self.flushes: frozenset[int] = frozenset()   # the launches a flush of the queue follows (flushes.py)

    @property
    def kernels(self) -> int:
        return len(self.launches)

    def add(self, kernel, global_size: tuple, local_size: tuple | None) -> None:
        self.launches.append((kernel.function_name, kernel, global_size, local_size))

    def enqueue(self, rec) -> None:
        """Enqueue every launch on the runtime's in-order queue, in order, each event to `rec` (a Recorder:
        nothing is kept while it is disabled, as in run())."""
        queue, enqueue, kernel_done, flushes = self.rt.queue, cl.enqueue_nd_range_kernel, rec.kernel, self.flushes
        for i, (name, kernel, global_size, local_size) in enumerate(self.launches):
            kernel_done(name, enqueue(queue, kernel, global_size, local_size))
            if i in flushes:
                queue.flush()
        self.rt.kernel_launches += len(self.launches)
