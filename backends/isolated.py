"""Work that must not share a process with the others runs in a child.

- TensorFlow and PoCL both carry LLVM.  Once TensorFlow is loaded, PoCL's
  kernel compiler fails ("unknown target CPU") or the process crashes,
  whichever was loaded first.  So TensorFlow (the `tensorflow` backend, the
  Keras model importer) lives in a child process.
- CLBlast's parameter overrides hold for the whole process and cannot be
  undone (backends/clblast/overrides.py).  `clblast-best` switches them per
  layer, so it runs in a child of its own and leaves the other CLBlast
  backends CLBlast's defaults (or their tuned sets).

A child is a fresh interpreter, not a fork, so it starts clean, and not
multiprocessing's spawn, which re-runs the caller's main script.  The parent
holds proxies that send each call over a socket.

Where each mode has a child of its own, the runner can start the modes'
prepares ahead (`IsolatedBackend.prepare_ahead`): the children compile side
by side, and `prepare` later takes each answer instead of starting anew.

Timing is measured inside the child (`run_timed`, `timed_pass`), so the
socket is never part of a timed interval.
"""
from __future__ import annotations

import importlib
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection

import numpy as np
import psutil

from nets.errors import PassTimeout, UserError, raise_if_interrupted
from nets.ready import reached

from .profiled import profiled
from .shipped import shipped
from . import screen
from .base import Backend, PreparedNet, create
from .options import RunOptions


def _portable(exc: BaseException) -> BaseException:
    """`exc` itself where it is the standard library's or ours and survives pickling (UserError,
    Unsupported...), else a RuntimeError that keeps its type name and message: unpickling a library's
    exception in the parent would import that library there (TensorFlow's, and PoCL then crashes)."""
    home = type(exc).__module__.split(".")[0]
    if home not in ("builtins", "nets", "backends", "compare") and home not in sys.stdlib_module_names:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure means: send text instead
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def serve(fd: int) -> None:
    """The child's loop on socket `fd`: objects live here, the parent refers
    to them by handle."""
    with profiled("child"):
        _serve(fd)


def _serve(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    objects: dict[int, object] = {}
    handles = itertools.count(1)
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        try:
            if op == "new":          # module, class name, constructor args
                module, name, cargs = args
                result = next(handles)
                objects[result] = getattr(importlib.import_module(module), name)(*cargs)
            elif op == "call":       # handle, method, args, keep the result here?
                handle, method, margs, keep = args
                result = getattr(objects[handle], method)(*margs)
                if keep:
                    handle = next(handles)
                    objects[handle] = result
                    result = handle
            elif op == "get":        # handle, attribute names
                handle, names = args
                result = {n: getattr(objects[handle], n) for n in names}
            elif op == "drop":
                objects.pop(args[0], None)
                result = None
            elif op == "func":       # module, function name, args
                module, name, fargs = args
                result = getattr(importlib.import_module(module), name)(*fargs)
            else:
                raise ValueError(f"unknown operation {op!r}")
            reply = ("ok", result)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent
            exc = _portable(exc)
            exc.child_traceback = traceback.format_exc()
            reply = ("error", exc)
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:   # a result that cannot travel
            conn.send(("error", RuntimeError(f"{op} returned what cannot be sent back: {exc}")))


def _stop(conn, proc, log) -> None:
    try:
        conn.close()    # the child's recv sees EOF and returns
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reached("grace")   # an interrupt's stop must never wait this out (tests/test_interrupts.py)
            proc.kill()
            proc.wait()
        log.close()


class Stopped(RuntimeError):
    """A request whose child was stopped on purpose while it waited (Worker.kill)."""


def _descendants(pid: int) -> list:
    """The processes `pid` started, and theirs (a search's pool of compilers): stopped with it."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


class Worker:
    """One child process that serves `new`, `call`, `get`, `drop` and `func`."""

    def __init__(self, label: str, env: dict[str, str | None] | None = None, screen: bool = False):
        """`env`: changes to the child's environment (None unsets a variable).  `screen`: a process that drew
        slow as it started is started again (backends/screen.py); the first request waits for that."""
        self.label = label
        # the child sees the modules this process sees, tests' helpers included
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **(env or {})}
        self._env = {k: v for k, v in env.items() if v is not None}
        self.screened_out: list[float] = []   # the figures of processes started for this child and stopped as slow
        self._screening = screen
        self._start()

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        # its chatter (TensorFlow logs at import whatever the log level) goes to a file, shown if it dies
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([sys.executable, "-c", f"from backends.isolated import serve; serve({fd})"],
                                      pass_fds=(fd,), env=self._env, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._killed = False
        self._stop = weakref.finalize(self, _stop, self._conn, self._proc, self._log)
        self._python_ms: float | None = None
        if self._screening:   # timed at once, while the caller starts its other children
            self._send("func", "backends.host", "plain_python_ms", ())

    def _settle(self) -> None:
        """A screened child's figure taken; a slow one stopped and started again, screen.TRIES processes at most."""
        while self._screening:
            ms = round(self._receive(what="its plain Python"), 2)
            screen.note(ms)
            if not screen.slow(ms) or len(self.screened_out) + 1 >= screen.TRIES:
                self._screening, self._python_ms = False, ms
                return
            self.screened_out.append(ms)
            self.kill()
            self._start()

    def request(self, op: str, *args, timeout_s: float | None = None):
        """Send one request and wait for its answer; past `timeout_s` the
        child is killed (it cannot be interrupted otherwise) and PassTimeout raised."""
        self.send(op, *args)
        return self.receive(timeout_s, f"{op} {args[1] if op == 'call' else ''}")

    def send(self, op: str, *args) -> None:
        """Send one request without waiting for its answer: `receive` takes the answers, in the order sent
        (a prepare started ahead, IsolatedBackend.prepare_ahead).  A large request (weights) still waits
        until the child has read it."""
        self._settle()
        self._send(op, *args)

    def _send(self, op: str, *args) -> None:
        self._alive()
        try:
            self._conn.send((op, args))
        except (EOFError, OSError):
            self._lost()
        except BaseException:
            self.kill()   # cut short mid-message (Ctrl-C): see receive
            raise

    def receive(self, timeout_s: float | None = None, what: str = ""):
        """The answer to the oldest request not yet answered (its error raised); past `timeout_s` the child is
        killed (it cannot be interrupted otherwise) and PassTimeout raised."""
        self._settle()
        return self._receive(timeout_s, what)

    def _receive(self, timeout_s: float | None = None, what: str = ""):
        self._alive()
        try:
            if timeout_s is not None and not self._conn.poll(timeout_s):
                self._proc.kill()
                self._stop()
                raise PassTimeout(f"the {self.label} process gave no answer in --timeout-s {timeout_s:g} s "
                                  f"({what}); it was stopped")
            status, value = self._conn.recv()
        except (EOFError, OSError):
            self._lost()
        except BaseException:
            # stopped mid-exchange (Ctrl-C, a timeout): the socket may hold half a message, and the next
            # request would wait on the child forever, so this child (and what it started) serves no more
            self.kill()
            raise
        if status == "error":
            raise value
        return value

    def _alive(self) -> None:
        if not self._stop.alive:
            raise RuntimeError(f"the {self.label} process was already stopped")

    def _lost(self):
        """The socket closed under a request: stopped on purpose, or the child died (said with its last words)."""
        if self._killed:   # stopped on purpose from another thread (an interrupt): no death to report
            raise Stopped(f"the {self.label} process was stopped") from None
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = "none yet"
        raise RuntimeError(f"the {self.label} process died (exit code {code}); it said: "
                           f"{self._last_words()}") from None

    def _last_words(self, limit: int = 2000) -> str:
        try:
            self._log.seek(0)
            text = self._log.read().decode(errors="replace").strip()
        except (ValueError, OSError):   # closed by a stop from another thread meanwhile
            return "nothing (its log is closed)"
        return text[-limit:] or "nothing"

    def kill(self) -> None:
        """Stop the child and every process it started at once, abandoning its work (an interrupt): a request
        another thread waits on returns with Stopped, and nothing waits the grace a child gets to end."""
        if not self._stop.alive:
            return
        self._killed = True
        for proc in _descendants(self._proc.pid) + [self._proc]:
            try:
                proc.kill()
            except (OSError, psutil.Error):
                pass   # gone already
        self._stop()

    def plain_python_ms(self) -> float:
        """How fast this child's process runs a fixed piece of plain Python (backends/host.py), timed once: a
        process draws its speed when it starts (reports/nvidia-h200/NOTES.md), so every net it prepares shares it."""
        self._settle()
        if self._python_ms is None:
            self._python_ms = round(self.call("backends.host", "plain_python_ms"), 2)
        return self._python_ms

    def call(self, module: str, function: str, *args):
        """`module.function(*args)` in the child; its result comes back."""
        return self.request("func", module, function, args)

    def close(self) -> None:
        self._stop()


def call_isolated(label: str, module: str, function: str, *args):
    """`module.function(*args)` in a child process of its own, started and stopped here."""
    worker = Worker(label)
    try:
        return worker.call(module, function, *args)
    finally:
        worker.close()


class IsolatedNet(PreparedNet):
    """A PreparedNet that lives in the child; every method is one round trip."""

    def __init__(self, worker: Worker, handle: int, net, batch: int, timeout_s: float | None = None,
                 owns_worker: bool = False):
        super().__init__(net, batch)
        self._worker = worker
        self._owns_worker = owns_worker   # a child of its own (one mode of several): stopped on close
        self._handle = handle
        self._timeout_s = timeout_s
        attrs = worker.request("get", handle, ("config", "memory_bytes"))
        # beside the runner's (compare/noise.py): a process can draw slow at everything
        self.config = {**(attrs["config"] or {}), "plain_python_ms": worker.plain_python_ms()}
        if worker.screened_out:   # processes started for this child and stopped as slow (backends/screen.py)
            self.config[screen.KEY] = list(worker.screened_out)
        self.memory_bytes = attrs["memory_bytes"]

    def _call(self, method: str, *args, passes: int = 1):
        """One request; `passes`: the passes it makes, each allowed the timeout."""
        if self._handle is None:
            raise UserError("this prepared net was closed")
        timeout_s = None if self._timeout_s is None else self._timeout_s * passes
        return self._worker.request("call", self._handle, method, args, False, timeout_s=timeout_s)

    def load_input(self, x):
        self._call("load_input", self.check_input(x))

    def run(self):
        self._call("run")

    def fetch_output(self):
        return self._call("fetch_output")

    def run_timed(self):
        return self._call("run_timed")

    def timed_pass(self, x: np.ndarray):
        return self._call("timed_pass", self.check_input(x))

    def timed_passes(self, x: np.ndarray, n: int):
        return self._call("timed_passes", self.check_input(x), n, passes=n)

    def run_layer(self, index, x):
        if isinstance(x, (list, tuple)):   # a layer reading several inputs (an add): one array each
            return self._call("run_layer", index, self.check_inputs(x, index))
        return self._call("run_layer", index, self.check_input(x, index))

    def layer_outputs(self, x):
        return self._call("layer_outputs", self.check_input(x))

    def forward(self, x):
        return self._call("forward", self.check_input(x))

    def launches(self, x):
        return self._call("launches", self.check_input(x))

    def close(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                self._worker.request("drop", handle)
            except RuntimeError:
                pass   # the child is gone already: nothing left to release
            if self._owns_worker:
                self._worker.close()


def inner_backend(inner: str, device: str | None, options: RunOptions) -> Backend:
    """In the child: the in-process backend `inner` ('module:Class'), on the
    OpenCL device the parent named by its 'P:D' index (None: it uses none)."""
    module, name = inner.split(":")
    cls = getattr(importlib.import_module(module), name)
    runtime = None
    if device is not None:
        from .opencl.runtime import get_runtime
        runtime = get_runtime(device)
    return create(cls, runtime, options)


# weights pickled at once for the children started ahead, at most: each send holds its own copy until its child
# has read it (VGG-16's: half a gigabyte; three draws of six modes would hold nine at once)
_SENDS = threading.BoundedSemaphore(4)


class _Ahead:
    """One mode's prepare sent to a child of its own (IsolatedBackend.prepare_ahead), until `prepare` takes it."""

    def __init__(self, worker: Worker, mode: str, net: str, batch: int, sent: float):
        self.worker, self.mode, self.net, self.batch = worker, mode, net, batch
        self.sent = sent      # time.monotonic() as the child was started: its prepare's time begins there
        self.handle: int | None = None
        self.error: Exception | None = None
        self.done: float | None = None   # the child's time.monotonic() once it had prepared
        self._sending: threading.Thread | None = None
        self._send_error: Exception | None = None

    def send_prepare(self, inner: tuple, net, weights, batch: int) -> None:
        """`new` (making the inner backend from `inner`) and the prepare sent from a thread of its own: the first
        request waits until the child's start is screened (a slow one started again, seconds each), a request
        waits until its child has read it, and the weights of VGG-16 are half a gigabyte; the runner goes on
        (on the H200 the first answer waited 16 s for the runner to get past these sends in turn: its notes' step 40)."""
        def send():
            try:
                self.worker.send("new", *inner)
                # a fresh child keeps its objects under 1, 2, ...: the backend `new` made is 1
                with _SENDS:
                    self.worker.send("call", 1, "prepare", (net, shipped(weights), batch, self.mode), True)
                self.worker.send("func", "time", "monotonic", ())   # its clock once prepared (wait)
            except Exception as exc:  # noqa: BLE001 - the mode's failure, raised where the runner takes it
                self._send_error = exc
        self._sending = threading.Thread(target=send, name=f"send {self.worker.label}", daemon=True)
        self._sending.start()

    @property
    def answered(self) -> bool:
        return self.handle is not None or self.error is not None

    def wait(self) -> None:
        """Its answers received and kept, a failure included (raised as the mode's when `prepare` takes it)."""
        if self.answered:
            return
        try:
            if self._sending is not None:
                self._sending.join()
            if self._send_error is not None:
                raise self._send_error
            if self.worker.receive() != 1:   # `new`: the inner backend, the object prepare_ahead named
                raise RuntimeError(f"the {self.worker.label} process kept its backend under another handle")
            handle = self.worker.receive()   # `prepare`
            # the child's clock as it finished: CLOCK_MONOTONIC is one clock for every process of the host, so
            # the time is the prepare's own however late the runner comes to read it
            self.done = self.worker.receive()
            self.handle = handle
        except Exception as exc:  # noqa: BLE001 - the mode's failure, as a prepare in turn would have raised it
            raise_if_interrupted()
            self.worker.close()
            self.error = exc

    def take(self, net, batch: int, timeout_s: float | None) -> IsolatedNet:
        """The prepared net, its prepare's own time in `ahead_prepare_ms` (sent -> prepared, + its proxy made
        now, as a prepare in turn counts it); the mode's failure raised."""
        self.wait()
        if self.error is not None:
            raise self.error
        t0 = time.monotonic()
        try:
            prepared = IsolatedNet(self.worker, self.handle, net, batch, timeout_s, owns_worker=True)
        except BaseException:
            self.worker.close()
            raise
        prepared.ahead_prepare_ms = ((self.done - self.sent) + (time.monotonic() - t0)) * 1e3
        return prepared


class IsolatedBackend(Backend):
    """A backend whose work runs in a child process.  Subclasses set `inner`,
    'module:Class' of the in-process backend that the child runs.  One that
    uses OpenCL is given the parent's runtime like any other; the child gets
    the device by its index, the only place a device travels by name."""

    inner: str = ""
    redrawable = True
    # where preparing changes the child for good (CLBlast's parameter
    # overrides), each mode is prepared in a child of its own
    child_per_mode: bool = False

    def __init__(self, runtime=None, options: RunOptions | None = None):
        super().__init__(options)
        self.runtime = runtime
        self._worker: Worker | None = None
        self._handle: int | None = None
        self._ahead: list[_Ahead] = []   # prepares started ahead, not yet taken by `prepare`
        self._floors: dict[tuple, tuple] = {}   # (net, batch, mode) -> ("floor", ModeFloor) or ("error", exc)
        self._floors_asking: threading.Thread | None = None

    @property
    def prepares_ahead(self) -> bool:   # a mode prepared in a child of its own can be, side by side with others
        return self.child_per_mode

    def _inner(self) -> tuple:
        """The `new` request's arguments that make the inner backend in a child."""
        from .opencl.runtime import device_index
        device = device_index(self.runtime.device) if self.runtime is not None else None
        return "backends.isolated", "inner_backend", (self.inner, device, self.options)

    def _spawn(self, what: str) -> tuple[Worker, int]:
        worker = Worker(what, screen=True)
        return worker, worker.request("new", *self._inner())

    def _floors_answered(self) -> None:
        """The floors asked ahead have their answers (one request at a time goes over the child's socket)."""
        if self._floors_asking is not None and self._floors_asking is not threading.current_thread():
            self._floors_asking.join()
            self._floors_asking = None

    def _remote(self) -> tuple[Worker, int]:
        """The child that answers for the backend, once the floors asked ahead have their answers."""
        self._floors_answered()
        if self._worker is None:
            self._worker, self._handle = self._spawn(f"{self.name} backend")
        return self._worker, self._handle

    def floors_ahead(self, net, batch, modes) -> None:
        """Each of `modes`' floors asked of the child from a thread, `mode_floor` taking the answers: a floor
        may be measured for seconds (CLBlast's kernels compiled on a bare machine) while the runner goes on."""
        def ask():
            for mode in modes:
                try:
                    self._floors[(net.name, batch, mode)] = ("floor", self._ask_floor(net, batch, mode))
                except Exception as exc:  # noqa: BLE001 - raised where the runner asks for that floor
                    self._floors[(net.name, batch, mode)] = ("error", exc)
        self._remote()   # the child made here, not in the thread
        self._floors_asking = threading.Thread(target=ask, name=f"floors of {self.name}", daemon=True)
        self._floors_asking.start()

    def info(self):
        worker, handle = self._remote()
        return worker.request("call", handle, "info", (), False)

    def modes(self):
        worker, handle = self._remote()
        return worker.request("call", handle, "modes", (), False)

    def mode_floor(self, net, batch, mode):
        self._floors_answered()
        kind, got = self._floors.pop((net.name, batch, mode), (None, None))
        if kind == "error":
            raise got
        return got if kind == "floor" else self._ask_floor(net, batch, mode)

    def _ask_floor(self, net, batch, mode):
        worker, handle = self._remote()
        return worker.request("call", handle, "mode_floor", (net, batch, mode), False)

    def has_floor(self, net, batch, mode):
        worker, handle = self._remote()
        return worker.request("call", handle, "has_floor", (net, batch, mode), False)

    def prepare(self, net, weights, batch, mode=None):
        ahead = self._take_ahead(net, batch, mode)
        if ahead is not None:
            return ahead
        return self._prepare(net, weights, batch, mode, own=self.child_per_mode and mode is not None)

    def _take_ahead(self, net, batch, mode):
        """A prepare of `mode` started ahead, its answer (or its failure raised), not a second prepare; or None."""
        ahead = next((a for a in self._ahead if (a.mode, a.net, a.batch) == (mode, net.name, batch)), None)
        if ahead is None:
            return None
        self._ahead.remove(ahead)
        return ahead.take(net, batch, self.options.timeout_s)

    def prepare_ahead(self, net, weights, batch, modes):
        """Each mode's child started and its prepare sent, no answer awaited: the children compile side by side
        and while the runner does its other work (a mode named twice: two children, a draw each).  Where a mode
        shares its child with others, none."""
        if not self.child_per_mode or not modes or self.unsupported(net):
            return []   # an unsupported net: prepare refuses it before any child starts
        mine = []
        try:
            # every child started, then each sent its requests from a thread: they start up, are screened and
            # read the net together
            for mode in modes:
                sent = time.monotonic()   # a prepare in turn is timed from its child's start too
                mine.append(_Ahead(Worker(f"{self.name} backend ({mode})", screen=True), mode, net.name, batch, sent))
            inner = self._inner()
            for ahead in mine:
                ahead.send_prepare(inner, net, weights, batch)
        except BaseException:
            for ahead in mine:
                ahead.worker.kill()
            raise
        self._ahead += mine
        return [ahead.mode for ahead in mine]

    def settle_ahead(self):
        for ahead in self._ahead:
            ahead.wait()

    def drop_ahead(self):
        # killed, not closed: a child still compiling would read its socket's end only when done
        while self._ahead:
            self._ahead.pop().worker.kill()

    def prepare_fresh(self, net, weights, batch, mode=None):
        # a prepare started ahead is a fresh process of its own too (a draw started with the first)
        ahead = self._take_ahead(net, batch, mode) if self.child_per_mode else None
        return ahead if ahead is not None else self._prepare(net, weights, batch, mode, own=True)

    def _prepare(self, net, weights, batch, mode, own: bool):
        # a mode that changes its process for good gets a child of its own, which lives as long as
        # the prepared net, so several modes can be ready at once and timed in turn (and a fresh draw too)
        worker, handle = self._spawn(f"{self.name} backend ({mode})") if own else self._remote()
        try:
            # the child is stopped when a pass outlasts the timeout: it cannot be interrupted otherwise
            sent = (net, shipped(weights), batch, mode)
            return IsolatedNet(worker, worker.request("call", handle, "prepare", sent, True),
                               net, batch, self.options.timeout_s, owns_worker=own)
        except BaseException:
            if own:
                worker.close()
            raise

    def close(self) -> None:
        self.drop_ahead()
        if self._worker is not None:
            self._worker.close()
            self._worker = None
