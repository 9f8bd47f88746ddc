"""Launches per pass, and what enqueueing them costs the host: first the floor, an empty kernel
(kernels/empty.cl) enqueued back to back three ways (pyopencl's Kernel.__call__ setting its
argument each call; its argument set once and clEnqueueNDRangeKernel alone; through our Launch,
what a pass makes), each launch's host time and, with the finish, its whole cost, so a pass of K
launches is held against K times the floor; then each hand-written backend's
pass enqueued op by op with its kernels' arguments set on every call (old: pyopencl's
Kernel.__call__), op by op with them set once per launch (bound), from the flat list of
launches made at prepare (new: what `plain` runs now), and, where the device offers
cl_khr_command_buffer, recorded once and replayed (`replay` mode); then the launches one pass
makes on every OpenCL backend.

    .venv/bin/python benchmarks/launches.py [--net lenet] [--batch 1] [--repeats 2000] [--backends ...]

Every form is checked against the float64 oracle first.  Then the forms are timed in turn,
`--rounds` rounds of repeats/rounds passes each, so drift hits all alike.  Per pass: the host
time from the first enqueue to the last one returning (host overhead: nothing waits on the
device), and the whole pass as `compare run` times it (enqueue + finish).  Printed: medians in
microseconds, and the ratios old/new and new/replay of the medians with their 95% bootstrap
intervals (compare/intervals.py): above 1, the second is cheaper.  On a CPU device (PoCL) the
kernels run on the cores the host enqueues from, so the whole-pass figures move with both.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import nullcontext

from tabulate import tabulate

import backends
from backends.handwritten.net import PLAIN, REPLAY
from backends.opencl.net import Recorder
from backends.opencl.replay import missing
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import compare_arrays
from compare.speedup import Speedup
from nets import get_net
from nets.errors import Unsupported
from nets.weights import init_weights, make_input

HAND_WRITTEN = ["baseline", "vectorised", "vectorised-tiled", "fused", "morton"]
NOT_SEEN = "not counted: its dispatch is not ours to see"


class Form:
    """One way of running a prepared net's pass, timed per pass."""

    def __init__(self, name: str, prepared, bind_once: bool = True, flat: bool = True, profiled: bool = True):
        self.name, self.prepared, self.bind_once, self.flat = name, prepared, bind_once, flat
        self.profiled = profiled   # False: on the runtime's queue without profiling, as run() enqueues
        self.enqueue_us: list[float] = []
        self.pass_us: list[float] = []

    def run(self, passes: int, timed: bool = True) -> None:
        net, rt = self.prepared, self.prepared.rt
        kept = net.flat
        rt.bind_once, net.flat = self.bind_once, kept if self.flat else None
        try:
            with nullcontext() if self.profiled else rt.unprofiled():
                quiet = Recorder(rt.queue, enabled=False)
                net._whole_pass(quiet)   # one untimed, so the switch from the form before is not this one's cost
                rt.finish()
                for _ in range(passes):
                    t0 = time.perf_counter()
                    net._whole_pass(quiet)
                    t1 = time.perf_counter()
                    rt.finish()
                    t2 = time.perf_counter()
                    if timed:
                        self.enqueue_us.append((t1 - t0) * 1e6)
                        self.pass_us.append((t2 - t0) * 1e6)
        finally:
            rt.bind_once, net.flat = True, kept

    def output(self, x):
        """The form's output on `x`, for the check."""
        self.prepared.load_input(x)
        self.run(1, timed=False)
        return self.prepared.fetch_output()


FLOOR_LAUNCHES = 200   # empty kernels a round, back to back


PRESET = "argument set once, clEnqueueNDRangeKernel"


def floor(rt, rounds: int) -> dict[str, tuple[float, float]]:
    """Per way: host us per enqueue of the empty kernel (median of the rounds), and us per launch with the finish.
    Besides our queue (profiling on: the per-layer times read its events), the same preset enqueue on a queue
    without profiling, in order and out of order: what a queue's properties cost a launch."""
    import pyopencl as cl
    from backends.opencl.launch import Launch
    buf = rt.alloc(4, "the empty kernel's argument", poison=False)
    called = rt.kernel("empty.cl", "empty")
    preset = cl.Kernel(called.program, "empty")
    preset.set_args(buf)
    ours = Launch(rt, "empty.cl", "empty", None, (1,), (1,), exact=True)
    plain = cl.CommandQueue(rt.context)
    unordered = cl.CommandQueue(rt.context, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    ways = {"pyopencl call (argument set each call)": (lambda: called(rt.queue, (1,), (1,), buf), rt.queue),
            PRESET: (lambda: cl.enqueue_nd_range_kernel(rt.queue, preset, (1,), (1,)), rt.queue),
            "our Launch (what a pass enqueues)": (lambda: ours(buf), rt.queue),
            f"{PRESET}, no profiling": (lambda: cl.enqueue_nd_range_kernel(plain, preset, (1,), (1,)), plain),
            f"{PRESET}, no profiling, out of order": (lambda: cl.enqueue_nd_range_kernel(unordered, preset, (1,), (1,)),
                                                      unordered)}
    times: dict[str, tuple[list, list]] = {w: ([], []) for w in ways}
    for _ in range(rounds):
        for way, (launch, queue) in ways.items():   # in turn, so drift hits every way alike
            launch()
            queue.finish()
            t0 = time.perf_counter()
            for _ in range(FLOOR_LAUNCHES):
                launch()
            t1 = time.perf_counter()
            queue.finish()
            t2 = time.perf_counter()
            times[way][0].append((t1 - t0) * 1e6 / FLOOR_LAUNCHES)
            times[way][1].append((t2 - t0) * 1e6 / FLOOR_LAUNCHES)
    buf.release()
    return {way: (statistics.median(e), statistics.median(w)) for way, (e, w) in times.items()}


def _ratio(num: list[float], den: list[float]) -> str:
    """median(num) / median(den) with its interval (compare.speedup)."""
    s = Speedup.of(num, den) if num and den else None
    return s.bounds() if s else "-"


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f}" if xs else "-"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", default="lenet")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=2000, help="timed passes of each form")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--backends", default=",".join(HAND_WRITTEN), help="hand-written backends to time")
    p.add_argument("--count", default="all", help="backends whose launches per pass are counted ('all': every "
                                                    "available one; '' none)")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    net = get_net(args.net)
    weights, x = init_weights(net, 0), make_input(net, args.batch, 0)
    ref = oracle.forward(net, weights, x)[-1]
    rt = get_runtime(args.device)
    print(f"{net.name} batch {args.batch} on {rt.info['name']} ({rt.info['platform']}); "
          f"{args.repeats} passes of each form in {args.rounds} rounds")
    replay_missing = missing(rt.device)
    if replay_missing:
        print(f"replay: {replay_missing}")
    print(f"\nThe floor: an empty kernel, {FLOOR_LAUNCHES} launches back to back, {args.rounds} rounds")
    floors = floor(rt, args.rounds)
    print(tabulate([[way, f"{e:.2f}", f"{w:.2f}"] for way, (e, w) in floors.items()],
                   headers=["way", "enqueue us/launch", "with the finish us/launch"]))

    forms: dict[str, list[Form]] = {}
    prepared = []
    try:
        for name in backends.parse_names(args.backends):
            backend = backends.get(name, args.device)
            try:
                plain = backend.prepare(net, weights, args.batch, mode=PLAIN if backend.modes() else None)
            except Unsupported as exc:   # fused on a net too large for local memory: the others still run
                print(f"{name}: UNSUPPORTED here ({str(exc).splitlines()[0]})")
                continue
            prepared.append(plain)
            forms[name] = [Form("old", plain, bind_once=False, flat=False), Form("bound", plain, flat=False),
                           Form("new", plain), Form("quiet", plain, profiled=False)]
            if REPLAY in backend.modes() and not replay_missing:
                replayed = backend.prepare(net, weights, args.batch, mode=REPLAY)
                prepared.append(replayed)
                forms[name].append(Form("replay", replayed))
            for form in forms[name]:
                if not compare_arrays(form.output(x), ref).passed:
                    print(f"{name} ({form.name}) fails the check against the float64 oracle", file=sys.stderr)
                    return 1
        per_round = max(args.repeats // args.rounds, 1)
        for _ in range(args.rounds):
            for group in forms.values():
                for form in group:
                    form.run(per_round)

        rows = []
        for name, group in forms.items():
            by = {f.name: f for f in group}
            launches = by["new"].prepared.launches(x)
            replay = by.get("replay")
            rows.append([name, launches.text(), f"{launches.enqueues * floors[PRESET][0]:.1f}",
                         _median(by["old"].enqueue_us), _median(by["bound"].enqueue_us), _median(by["new"].enqueue_us),
                         _ratio(by["old"].enqueue_us, by["new"].enqueue_us), _median(by["quiet"].enqueue_us),
                         _median(replay.enqueue_us) if replay else "-",
                         _ratio(by["new"].enqueue_us, replay.enqueue_us) if replay else "-",
                         _median(by["old"].pass_us), _median(by["new"].pass_us),
                         _ratio(by["old"].pass_us, by["new"].pass_us), _median(by["quiet"].pass_us),
                         _ratio(by["new"].pass_us, by["quiet"].pass_us),
                         _median(replay.pass_us) if replay else "-",
                         _ratio(by["new"].pass_us, replay.pass_us) if replay else "-"])
        print("\nHost time to enqueue one pass (us, median) and the whole pass, enqueue + finish (us, median).  "
              "old: op by op, arguments set on every call; bound: op by op, arguments set once; new: the flat list "
              "of launches made at prepare (plain mode now); quiet: new on a queue without profiling; replay: the "
              "pass recorded once as a command buffer; floor: the enqueues times the empty kernel's enqueue with its "
              "argument set once")
        print(tabulate(rows, headers=["backend", "launches", "floor", "enqueue old", "bound", "new", "old/new", "quiet",
                                      "replay", "new/replay", "pass old", "new", "old/new", "quiet", "new/quiet",
                                      "replay", "new/replay"]))
    finally:
        for net_ in prepared:
            net_.close()

    if args.count:
        print("\nLaunches per pass (backends/base.py Launches: kernels of ours; 'N + M calls': M CLBlast routine "
              "calls beside them; '1 replay of N': a recorded command buffer of N kernels)")
        rows = []
        for name in backends.parse_names(args.count if args.count != "all" else "all"):
            why = backends.unavailable_reason(name)
            if why:
                rows.append([name, "-", f"unavailable: {why.splitlines()[0][:80]}"])
                continue
            if not backends.backend_class(name).uses_opencl:
                rows.append([name, "-", NOT_SEEN + " (not OpenCL)"])
                continue
            backend = backends.get(name, args.device)
            modes = backend.modes() or [None]
            for mode in modes:
                label = f"{name} ({mode})" if mode else name
                try:
                    made = backend.prepare(net, weights, args.batch, mode=mode)
                except Exception as exc:  # noqa: BLE001 - a refusal is a row of the table
                    rows.append([label, "-", f"{type(exc).__name__}: {str(exc).splitlines()[0][:90]}"])
                    continue
                try:
                    counted = made.launches(x)
                finally:
                    made.close()
                rows.append([label, counted.text() if counted else "-", counted.how if counted else NOT_SEEN])
            close = getattr(backend, "close", None)
            if close:
                close()
        print(tabulate(rows, headers=["backend", "launches/pass", "what was counted"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
