"""Checks that look inside a prepared net, run in a child process
(backends/isolated.py: call_isolated) so that a backend which lives in a
child of its own (clblast-best) is looked into where it runs."""
import importlib
import os

import numpy as np
import pyopencl as cl

import backends
from backends.handwritten.baseline import BaselineNet
from backends.isolated import IsolatedBackend
from backends.opencl.backend import OpenCLBackend
from backends.opencl.net import Recorder
from backends.opencl.runtime import get_runtime
from nets.weights import init_weights


class NumpyInAChild(IsolatedBackend):
    """numpy's backend behind a child process: what every backend in a child goes through, cheaply."""
    name = "numpy-in-a-child"
    inner = "backends.reference.numpy_backend:NumpyBackend"


def in_process(name: str):
    """Backend `name` itself, not the proxy of a child process."""
    cls = backends.backend_class(name)
    if issubclass(cls, IsolatedBackend):
        module, attr = cls.inner.split(":")
        cls = getattr(importlib.import_module(module), attr)
    return backends.create(cls, get_runtime() if cls.uses_opencl else None)


def events_after_run(name: str, net, batch: int) -> tuple[int, int]:
    """(events enqueued by one run(), those not complete when it returned):
    every kernel event and the markers around every library routine."""
    recorders = []
    init = Recorder.__init__

    def recording(self, queue, enabled=True):
        init(self, queue, True)
        recorders.append(self)
    Recorder.__init__ = recording
    prepared = in_process(name).prepare(net, init_weights(net, 0), batch)
    try:
        prepared.load_input(np.ones((batch,) + net.input_shape, np.float32))
        recorders.clear()
        prepared.run()
        events = [ev for rec in recorders for _, _, a, b in rec._pending for ev in (a, b) if ev is not None]
        late = sum(ev.command_execution_status != cl.command_execution_status.COMPLETE for ev in events)
        return len(events), late
    finally:
        prepared.close()
        Recorder.__init__ = init


def best_prepared(net, batch: int, max_alloc: int | None = None, seed: int = 0, only: str | None = None):
    """clblast-best prepared in this (child) process, as (config, output,
    oracle output); `max_alloc` lowers the device's MAX_MEM_ALLOC_SIZE;
    `only` leaves it one composition per layer, the one of that name, so
    that each is checked and not only the fastest."""
    from compare import oracle
    from nets.weights import make_input
    if max_alloc is not None:
        get_runtime().info["max_alloc_bytes"] = max_alloc
    if only is not None:
        from backends.clblast.best import ClblastBestNet
        every = ClblastBestNet._candidates
        ClblastBestNet._candidates = lambda self, *a: {k: v for k, v in every(self, *a).items() if k == only}
    weights = init_weights(net, seed)
    x = make_input(net, batch, seed)
    prepared = in_process("clblast-best").prepare(net, weights, batch)
    try:
        return prepared.config, prepared.forward(x), oracle.forward(net, weights, x)[-1]
    finally:
        prepared.close()


class SleepyInProcess:
    """A backend whose forward pass never ends in time (it sleeps), for the
    per-pass timeout of a backend in a child process."""

    name = "sleepy"
    summary = "a test double"
    uses_opencl = False
    deterministic = True

    def __init__(self, options=None):
        pass

    def info(self):
        return {}

    def modes(self):
        return []

    def prepare(self, net, weights, batch, mode=None):
        import time

        from backends.reference.numpy_backend import NumpyNet

        class Sleepy(NumpyNet):
            def run(self):
                time.sleep(3600)
        return Sleepy(net, weights, batch)


class EchoInProcess:
    """A backend in a child that says what it was given: the run's options and
    its device, as the child sees them (for the child-process boundary's test)."""

    name = "echo"
    summary = "a test double"
    uses_opencl = True
    deterministic = True

    def __init__(self, runtime, options=None):
        self.runtime, self.options = runtime, options

    def info(self):
        from backends.opencl.runtime import device_index
        return {"options": self.options, "device": device_index(self.runtime.device)}



class NewcomerBackend(OpenCLBackend):
    """The README's example of a new backend, on the OpenCL base: baseline's net under another name."""

    name = "newcomer"
    summary = "a new backend: one class on the OpenCL base"

    def prepare(self, net, weights, batch, mode=None):
        return BaselineNet(self.runtime, net, weights, batch)


class ModalInProcess:
    """A backend with two modes whose passes write, to the file named by
    COMPARE_TEST_PASS_LOG, its mode and its process: which modes were timed
    in turn, each in a child of its own (and each prepare its mode to
    COMPARE_TEST_PREPARE_LOG, where set)."""

    name = "modal"
    summary = "a test double"
    uses_opencl = False
    deterministic = True

    def __init__(self, options=None):
        pass

    def info(self):
        return {}

    def modes(self):
        return ["first", "second"]

    def mode_floor(self, net, batch, mode):
        return None

    def prepare(self, net, weights, batch, mode=None):
        import os

        from nets.errors import Unsupported
        if mode == os.environ.get("COMPARE_TEST_REFUSED_MODE"):
            raise Unsupported(f"{mode}: refused for the test")
        if os.environ.get("COMPARE_TEST_PREPARE_LOG"):
            with open(os.environ["COMPARE_TEST_PREPARE_LOG"], "a") as log:
                log.write(f"{mode}\n")

        return _logged_net(net, weights, batch, os.environ["COMPARE_TEST_PASS_LOG"], f"{mode} {os.getpid()}")


class ModalBackend(IsolatedBackend):
    name = "modal"
    summary = "a test double"
    inner = "run_checks:ModalInProcess"
    child_per_mode = True


class DrawnInProcess:
    """A backend whose every process draws how slow its passes are: the n-th process started (claimed by
    a file in COMPARE_TEST_DRAW_DIR) sleeps the n-th of COMPARE_TEST_DRAW_DELAYS (seconds, comma-separated)
    each pass, and logs "n pid" to draws.txt there per pass: for the runner's draws of a process."""

    name = "drawn"
    summary = "a test double"
    uses_opencl = False
    deterministic = True

    def __init__(self, options=None):
        import os
        folder = os.environ["COMPARE_TEST_DRAW_DIR"]
        self.index = 0
        while True:
            try:
                os.close(os.open(os.path.join(folder, f"process{self.index}"), os.O_CREAT | os.O_EXCL))
                break
            except FileExistsError:
                self.index += 1
        delays = os.environ["COMPARE_TEST_DRAW_DELAYS"].split(",")
        self.delay_s = float(delays[min(self.index, len(delays) - 1)])   # only its own is read

    def info(self):
        return {}

    def modes(self):
        return []

    def mode_floor(self, net, batch, mode):
        return None

    def prepare(self, net, weights, batch, mode=None):
        import os
        return _logged_net(net, weights, batch, os.path.join(os.environ["COMPARE_TEST_DRAW_DIR"], "draws.txt"),
                           f"{self.index} {os.getpid()}", self.delay_s)


def _logged_net(net, weights, batch, path: str, line: str, delay_s: float = 0.0):
    """A numpy net whose every pass sleeps `delay_s`, then appends `line` to the file `path`."""
    import time

    from backends.reference.numpy_backend import NumpyNet

    class Logged(NumpyNet):
        def run(self):
            time.sleep(delay_s)
            with open(path, "a") as log:
                log.write(line + "\n")
            super().run()

        def run_layer(self, index, x):   # the layer-wise check's calls, beside the passes: "<line> <layer>"
            with open(path + ".layers", "a") as log:
                log.write(f"{line} {index}\n")
            return super().run_layer(index, x)
    return Logged(net, weights, batch)


class DrawnBackend(IsolatedBackend):
    name = "drawn"
    summary = "a test double"
    inner = "run_checks:DrawnInProcess"


class _Skewed:
    """A numpy net whose output (end to end, or one layer alone) is off by `skew` (relative L2 = skew), and whose
    pass takes `delay_s` more: a fast wrong mode and a slow right one, for the runner's choice of modes."""

    @staticmethod
    def make(net, weights, batch, skew: float, delay_s: float, layer_only: bool = False):
        import time

        from backends.reference.numpy_backend import NumpyNet

        class Skewed(NumpyNet):
            def run(self):
                time.sleep(delay_s)
                super().run()

            def fetch_output(self):
                y = super().fetch_output()
                return y if layer_only else y * np.float32(1 + skew)

            def run_layer(self, index, x):
                y = super().run_layer(index, x)
                return y * np.float32(1 + skew) if index == 0 else y
        return Skewed(net, weights, batch)


class ModedDouble:
    """A hand-written-family test double with the modes MODES names: mode -> (skew, delay_s, layer_only)."""

    name = "double"
    summary = "a test double"
    family = "hand-written"
    uses_opencl = False
    deterministic = True
    MODES: dict = {}

    def __init__(self, options=None):
        pass

    def info(self):
        return {}

    @classmethod
    def unsupported(cls, net):
        return None

    @classmethod
    def unavailable_reason(cls):
        return None

    def modes(self):
        return list(self.MODES)

    def mode_floor(self, net, batch, mode):
        return None

    def prepare(self, net, weights, batch, mode=None):
        skew, delay_s, layer_only = self.MODES[mode or next(iter(self.MODES))]
        return _Skewed.make(net, weights, batch, skew, delay_s, layer_only)


class FastWrongMode(ModedDouble):
    """Its fastest mode is 1e-2 off the oracle; its slower one is right."""

    name = "two-faced"
    MODES = {"fast-wrong": (1e-2, 0.0, False), "slow-right": (0.0, 0.02, False)}


class EveryModeWrong(ModedDouble):
    """Fast, and wrong in every mode."""

    name = "all-wrong"
    MODES = {"wrong": (1e-2, 0.0, False), "wronger": (5e-2, 0.0, False)}


class LayerLiar(ModedDouble):
    """Its fastest mode is right end to end but wrong on its first layer alone: the full check catches it."""

    name = "layer-liar"
    MODES = {"liar": (1e-2, 0.0, True), "honest": (0.0, 0.02, False)}


class SlowClblastDouble(ModedDouble):
    """A CLBlast-family double (numpy inside): the reference the answer holds the others against."""

    name = "clblast-double"
    family = "clblast"
    MODES = {"only": (0.0, 0.05, False)}

    def modes(self):
        return []


class FlooredMode(ModedDouble):
    """A mode whose floor, told before it is prepared, exceeds a pass of the other: never prepared."""

    name = "floored"
    MODES = {"hopeless": (0.0, 0.0, False), "quick": (0.0, 0.0, False)}

    def mode_floor(self, net, batch, mode):
        from backends import ModeFloor
        return ModeFloor(1000.0, "a thousand switches of a millisecond") if mode == "hopeless" else None

    def prepare(self, net, weights, batch, mode=None):
        assert mode != "hopeless", "a mode that cannot win was prepared"
        return super().prepare(net, weights, batch, mode)


class LowFloor(ModedDouble):
    """A mode whose floor is under every pass: prepared after the others, and the result says why."""

    name = "low-floor"
    MODES = {"switching": (0.0, 0.0, False), "quick": (0.0, 0.0, False)}

    def mode_floor(self, net, batch, mode):
        from backends import ModeFloor
        return ModeFloor(1e-6, "one switch of a nanosecond") if mode == "switching" else None


class JoltedWarmUp(FlooredMode):
    """Its `quick` mode's last warm-up pass is slowed (as by a compile beside it) past the other mode's floor;
    its earlier ones are not: the floor is held against the fastest, so `hopeless` is still never prepared."""

    name = "jolted"

    def prepare(self, net, weights, batch, mode=None):
        import time
        prepared = super().prepare(net, weights, batch, mode)
        inner, passes = prepared.run, [0]

        def run():
            passes[0] += 1
            if passes[0] == 3:   # the first run, then warm-up 2, then warm-up 3 (the last): 1.5 s
                time.sleep(1.5)
            inner()
        prepared.run = run
        return prepared


def ahead_log(line: str) -> None:
    """`line` and the time (time.monotonic(): one clock for every process of the host) appended to the file
    COMPARE_TEST_AHEAD_LOG names, as '<word> <name> <time> <pid>'."""
    import os
    import time
    with open(os.environ["COMPARE_TEST_AHEAD_LOG"], "a") as log:
        log.write(f"{line} {time.monotonic()!r} {os.getpid()}\n")


def ahead_events() -> list[tuple[str, str, float, int]]:
    """The lines `ahead_log` wrote: (word, name, time, pid)."""
    import os
    path = os.environ["COMPARE_TEST_AHEAD_LOG"]
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [(w, n, float(t), int(p)) for w, n, t, p in (line.split() for line in log if line.strip())]


def ahead_wait_for_starts(names, limit_s: float = 30.0) -> None:
    """Until each of `names` logged its 'start' (at most `limit_s`: a test of side-by-side prepares then fails)."""
    import time
    deadline = time.monotonic() + limit_s
    while not set(names) <= {n for w, n, _, _ in ahead_events() if w == "start"} and time.monotonic() < deadline:
        time.sleep(0.02)


def _ahead_net(net, weights, batch, name: str):
    """A numpy net whose every pass logs 'pass <name>' as it begins."""
    from backends.reference.numpy_backend import NumpyNet

    class Logged(NumpyNet):
        def run(self):
            ahead_log(f"pass {name}")
            super().run()
    return Logged(net, weights, batch)


class AheadInProcess:
    """In a child per mode: the modes COMPARE_TEST_AHEAD_MODES names (comma-separated; 'hopeless' has a floor
    no pass can beat), each prepare a compile that takes a while: it logs 'start', waits until every mode of
    COMPARE_TEST_AHEAD_MEET has started (so prepares one after the other would each wait it out), sleeps
    COMPARE_TEST_AHEAD_S, logs 'end'.  A mode named by COMPARE_TEST_AHEAD_FAIL fails once started."""

    name = "ahead"
    summary = "a test double"
    uses_opencl = False
    deterministic = True

    def __init__(self, options=None):
        import os
        import time
        hold = os.environ.get("COMPARE_TEST_AHEAD_HOLD")   # a child slow to start: made once this file exists
        deadline = time.monotonic() + 20
        while hold and not os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.02)
        ahead_log("made backend")

    def info(self):
        return {}

    def modes(self):
        import os
        return os.environ.get("COMPARE_TEST_AHEAD_MODES", "first,second").split(",")

    def mode_floor(self, net, batch, mode):
        from backends import ModeFloor
        if mode != "hopeless":
            return None
        ahead_log("floor hopeless")   # a floor measured: once a run, while the other modes compile
        return ModeFloor(1000.0, "a thousand switches of a millisecond")

    def has_floor(self, net, batch, mode):
        return mode == "hopeless"

    def prepare(self, net, weights, batch, mode=None):
        import os
        import time
        ahead_log(f"start {mode}")
        if mode == os.environ.get("COMPARE_TEST_AHEAD_FAIL"):
            raise RuntimeError(f"{mode}: failed for the test")
        ahead_wait_for_starts(os.environ.get("COMPARE_TEST_AHEAD_MEET", "first,second").split(","))
        time.sleep(float(os.environ.get("COMPARE_TEST_AHEAD_S", "0.5")))
        ahead_log(f"end {mode}")
        return _ahead_net(net, weights, batch, mode)


class AheadBackend(IsolatedBackend):
    name = "ahead"
    summary = "a test double"
    inner = "run_checks:AheadInProcess"
    child_per_mode = True


class AheadCompanion(backends.Backend):
    """In the runner's process, no modes: its prepare logs 'start companion', waits until the modes named in
    COMPARE_TEST_COMPANION_WAITS (default 'first') of AheadInProcess have started their prepares, sleeps a little,
    logs 'end companion'."""

    name = "companion"
    summary = "a test double"

    def info(self):
        return {}

    def modes(self):
        """With COMPARE_TEST_COMPANION_MEETS set: waits until AheadInProcess was made in its child (30 s at
        most), and logs whether it met it: a backend in children is made beside this one, not after it."""
        import os
        import time
        if os.environ.get("COMPARE_TEST_COMPANION_MEETS"):
            deadline = time.monotonic() + 30
            while not any(w == "made" for w, *_ in ahead_events()) and time.monotonic() < deadline:
                time.sleep(0.02)
            ahead_log("companion met" if any(w == "made" for w, *_ in ahead_events()) else "companion alone")
        return []

    def prepare(self, net, weights, batch, mode=None):
        import time
        ahead_log("start companion")
        # the modes whose prepares it waits to see started (COMPARE_TEST_COMPANION_WAITS, default first): their
        # children start from threads of their own, the runner not waiting for them
        ahead_wait_for_starts(os.environ.get("COMPARE_TEST_COMPANION_WAITS", "first").split(","))
        time.sleep(0.2)
        ahead_log("end companion")
        return _ahead_net(net, weights, batch, "companion")
