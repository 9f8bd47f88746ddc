"""A forward pass as a flat list of launches, made once at prepare: (kernel with its arguments
set, global size, local size) in the order the pass enqueues them.  A pass then only walks the
list and enqueues: no op objects, no argument setting, no look-ups (OpenCLNet.flatten).  Where
the device offers command buffers the same list can be recorded instead (replay.py); this is
the least host work per pass elsewhere (NVIDIA's OpenCL offers none).

A branch (handwritten/branches.py chooses them) is a run of launches that may go to a second
in-order queue: it waits for the launch before it, and the launch that first reads what it wrote
waits for its last, so the launches between run beside it where the device overlaps two queues."""
from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl


@dataclass(frozen=True)
class Branch:
    first: int   # the branch's launches, first to last, on the second queue
    last: int
    join: int    # the launch on the first queue that waits for the branch's last


class LaunchList:
    """Filled while a pass is recorded into it (launch.py's Launch.__call__ calls add)."""

    def __init__(self, rt):
        self.rt = rt
        self.launches: list[tuple] = []
        self.args: list[tuple] = []   # each launch's arguments (branches.py reads which buffers it touches)
        self.flushes: frozenset[int] = frozenset()   # the launches a flush of the queue follows (flushes.py)
        self.branches = ()   # runs of launches on a second queue (none: one queue)

    @property
    def branches(self) -> tuple[Branch, ...]:
        return self._branches

    @branches.setter
    def branches(self, branches) -> None:
        """Set once at prepare; what a pass looks up per launch is worked out here, not per pass."""
        self._branches = tuple(branches)
        self._starts = {b.first: b for b in self._branches}
        self._joins = frozenset(b.join for b in self._branches)

    @property
    def kernels(self) -> int:
        return len(self.launches)

    def add(self, kernel, global_size: tuple, local_size: tuple | None, args: tuple = ()) -> None:
        self.launches.append((kernel.function_name, kernel, global_size, local_size))
        self.args.append(tuple(args))

    def enqueue(self, rec) -> None:
        """Enqueue every launch on the runtime's in-order queue, in order, each event to `rec` (a Recorder:
        nothing is kept while it is disabled, as in run())."""
        if self.branches:
            self._enqueue_branched(rec)
            return
        queue, enqueue, kernel_done, flushes = self.rt.queue, cl.enqueue_nd_range_kernel, rec.kernel, self.flushes
        for i, (name, kernel, global_size, local_size) in enumerate(self.launches):
            kernel_done(name, enqueue(queue, kernel, global_size, local_size))
            if i in flushes:
                queue.flush()
        self.rt.kernel_launches += len(self.launches)

    def _enqueue_branched(self, rec) -> None:
        """As enqueue, each branch's launches on the runtime's second queue.  The first queue is flushed before
        the second waits on one of its events (OpenCL asks it of an event waited on from another queue), and the
        second after its branch's last launch."""
        main, side, enqueue, kernel_done = self.rt.queue, self.rt.side_queue(), cl.enqueue_nd_range_kernel, rec.kernel
        starts, joins = self._starts, self._joins
        last_main = last_side = None
        branch = None
        for i, (name, kernel, global_size, local_size) in enumerate(self.launches):
            if i in starts:
                branch = starts[i]
                main.flush()
                event = enqueue(side, kernel, global_size, local_size, wait_for=[last_main] if last_main else None)
            elif branch is not None and i <= branch.last:
                event = enqueue(side, kernel, global_size, local_size)
            else:
                wait = [last_side] if i in joins else None
                event = last_main = enqueue(main, kernel, global_size, local_size, wait_for=wait)
            if branch is not None and i <= branch.last:
                last_side = event
                if i == branch.last:
                    side.flush()
                    branch = None
            kernel_done(name, event)
            if i in self.flushes:
                main.flush()
        self.rt.kernel_launches += len(self.launches)
