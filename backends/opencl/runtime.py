"""The OpenCL plumbing every OpenCL backend shares.

One Runtime per device in a process: one context, one in-order queue with
profiling on (and one without, for a whole pass: Runtime.unprofiled), a
cache of built programs keyed by source + defines + device, and allocations
checked against the device's limits before they are made.
"""
from __future__ import annotations

import hashlib
import os
import sys
from contextlib import contextmanager

import numpy as np

from kernels import kernel_source
from nets.errors import UserError, raise_if_interrupted
from nets.ready import reached

from ..atomic import signals_held

try:  # pyopencl is a hard dependency of the package, but keep `compare --help` alive without it
    import pyopencl as cl
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    cl = None
    _IMPORT_ERROR = str(exc)


class KernelBuildError(UserError):
    """A kernel did not compile; the message carries the device's build log."""


def _require_cl():
    if cl is None:
        raise UserError(f"pyopencl is not installed ({_IMPORT_ERROR}); `make setup` installs it")


def platforms() -> list:
    """Every OpenCL platform, or a clear error when there is none."""
    _require_cl()
    if "tensorflow" in sys.modules:
        # PoCL's LLVM and TensorFlow's collide: a crash here, or kernels that no longer build
        raise RuntimeError("TensorFlow is loaded in this process, where PoCL crashes; run TensorFlow "
                           "in a child process (backends/isolated.py)")
    try:
        found = cl.get_platforms()
    except cl.Error:
        found = []
    if not found:
        raise UserError("no OpenCL platform found: install a driver (e.g. apt-get install pocl-opencl-icd "
                        "for the CPU) or check OCL_ICD_VENDORS")
    return found


def all_devices() -> list[tuple[str, object, object]]:
    """(index 'P:D', platform, device) for every device of every platform."""
    out = []
    for p_i, plat in enumerate(platforms()):
        try:
            devices = plat.get_devices()
        except cl.Error:
            devices = []
        for d_i, dev in enumerate(devices):
            out.append((f"{p_i}:{d_i}", plat, dev))
    return out


def _matches(spec: str, index: str, plat, dev) -> bool:
    spec = spec.strip()
    if spec.replace(":", "").isdigit():
        # pyopencl's PYOPENCL_CTX convention: 'P' or 'P:D'
        return index == spec if ":" in spec else index.split(":")[0] == spec
    text = f"{plat.name} {plat.vendor} {dev.name}".lower()
    return spec.lower() in text


def select_device(spec: str | None = None):
    """The device named by `spec` (or PYOPENCL_CTX): 'P:D' indices or a name
    fragment.  Default: the first GPU, else the first PoCL device, else the
    first device of any kind."""
    spec = spec or os.environ.get("PYOPENCL_CTX") or None
    devices = all_devices()
    if not devices:
        raise UserError("OpenCL platforms were found but they list no device; `compare devices` shows them")
    if spec:
        for index, plat, dev in devices:
            if _matches(spec, index, plat, dev):
                return dev
        names = "; ".join(f"{i} {d.name.strip()} ({p.name.strip()})" for i, p, d in devices)
        raise UserError(f"no OpenCL device matches {spec!r}; devices here: {names}")
    for _, _, dev in devices:
        if dev.type & cl.device_type.GPU:
            return dev
    for _, plat, dev in devices:
        if "portable computing language" in plat.name.lower() or "pocl" in plat.name.lower():
            return dev
    return devices[0][2]


def device_index(dev) -> str:
    """The 'P:D' index of `dev`, which names it to a child process on this machine."""
    for index, _, other in all_devices():
        if other.int_ptr == dev.int_ptr:
            return index
    raise LookupError(f"device {dev.name!r} is not among this machine's OpenCL devices")


def device_info(dev) -> dict:
    plat = dev.platform
    return {
        "name": dev.name.strip(),
        "vendor": dev.vendor.strip(),
        "platform": plat.name.strip(),
        "platform_version": plat.version.strip(),
        "driver": dev.driver_version.strip(),
        "opencl": dev.version.strip(),
        "type": cl.device_type.to_string(dev.type),
        "compute_units": dev.max_compute_units,
        "clock_mhz": dev.max_clock_frequency,
        "global_mem_bytes": dev.global_mem_size,
        "max_alloc_bytes": dev.max_mem_alloc_size,
        "local_mem_bytes": dev.local_mem_size,
        "max_work_group_size": dev.max_work_group_size,
        "max_work_item_sizes": list(dev.max_work_item_sizes),
        "preferred_vector_width_float": dev.preferred_vector_width_float,
        "profiling_timer_ns": dev.profiling_timer_resolution,
    }


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def build_options(defines: dict | None, options: tuple = ()) -> tuple:
    """A program's build options: its -D defines in a fixed order, then the rest."""
    return tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items())) + tuple(options)


class Runtime:
    def __init__(self, device):
        self.device = device
        self.context = cl.Context([device])
        # what everything enqueues on: profiling on (per-layer times read its events), except for a whole
        # pass, which `unprofiled` moves to a queue without it, where a launch costs the host less
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self._quiet = None
        self._side = None
        self.info = device_info(device)
        # a driver whose timer has no resolution (Mesa's rusticl) stamps its
        # events 0, 1, 2, 3 ns: its device times mean nothing, the host clock is all there is
        self.profiling_ok = self.info["profiling_timer_ns"] > 0
        self._programs: dict[tuple, object] = {}
        self._kernels: dict[tuple, object] = {}
        # launch.py: arguments set once per launch (False: on every call, as pyopencl's Kernel.__call__ does);
        # the command buffer being recorded, if any (replay.py); kernels launched so far (net.py counts a pass)
        self.bind_once = True
        self.recording = None
        self.kernel_launches = 0
        # options every build adds after its own (a benchmark's: ptxas's report, a register cap on every kernel)
        self.extra_options: tuple = ()

    # -- programs
    def program(self, source: str, defines: dict | None = None, options: tuple = (), label: str = "kernel"):
        """Build (once) `source` with -D defines, `options` and the runtime's extra_options; `label` names it in
        errors."""
        opts = build_options(defines, tuple(options) + self.extra_options)
        key = (hashlib.sha256(source.encode()).hexdigest(), opts)
        prog = self._programs.get(key)
        if prog is None:
            try:
                # held: PoCL links with a linker process of its own, which a Ctrl-C to the process
                # group would kill, and PoCL then aborts the whole process
                with signals_held():
                    reached("building")   # a test's Ctrl-C sent now is held by this build
                    prog = cl.Program(self.context, source).build(options=list(opts))
            except cl.RuntimeError as exc:
                raise_if_interrupted()   # a compiler cut short by Ctrl-C reports a failed build
                log = _build_log(exc)
                raise KernelBuildError(f"building {label} failed on {self.info['name']} "
                                       f"(options: {' '.join(opts) or 'none'}):\n{log}") from None
            self._programs[key] = prog
        return prog

    def kernel(self, filename: str, name: str, defines: dict | None = None, options: tuple = ()):
        """Kernel `name` from kernels/`filename`, built with `defines`."""
        return self.kernel_of(kernel_source(filename), name, defines, options, label=f"kernels/{filename}")

    def kernel_of(self, source: str, name: str, defines: dict | None = None, options: tuple = (),
                  label: str = "kernel"):
        """Kernel `name` of `source` (a generated one, say): one kernel object
        per program and name (arguments are set at each call)."""
        prog = self.program(source, defines, options, label=label)
        key = (id(prog), name)
        if key not in self._kernels:
            self._kernels[key] = cl.Kernel(prog, name)
        return self._kernels[key]

    # -- memory
    def check_alloc(self, nbytes: int, what: str) -> None:
        limit = self.info["max_alloc_bytes"]
        if nbytes > limit:
            raise UserError(f"{what} needs {_mib(nbytes)} in one buffer, more than {self.info['name']} allows "
                            f"(MAX_MEM_ALLOC_SIZE {_mib(limit)}); try a smaller --batch or another device")

    def alloc(self, nbytes: int, what: str, poison: bool = True):
        """A device buffer of `nbytes`, filled with NaN so unwritten elements show."""
        nbytes = max(int(nbytes), 4)
        self.check_alloc(nbytes, what)
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, nbytes)
        if poison:
            cl.enqueue_fill_buffer(self.queue, buf, np.float32(np.nan), 0, nbytes - nbytes % 4)
        return buf

    def upload(self, array: np.ndarray, what: str):
        array = np.ascontiguousarray(array)
        self.check_alloc(array.nbytes, what)
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(array.nbytes, 4))
        cl.enqueue_copy(self.queue, buf, array)
        return buf

    def write(self, buf, array: np.ndarray) -> None:
        cl.enqueue_copy(self.queue, buf, np.ascontiguousarray(array), is_blocking=True)   # returns when copied

    def read(self, buf, shape, dtype=np.float32) -> np.ndarray:
        out = np.empty(shape, dtype)
        cl.enqueue_copy(self.queue, out, buf)
        return out

    def finish(self) -> None:
        self.queue.finish()

    @contextmanager
    def recording_into(self, target):
        """Within: every Launch is added to `target` (a passlist.LaunchList or a replay.CommandBuffer) instead
        of enqueued."""
        self.recording = target
        try:
            yield target
        finally:
            self.recording = None

    def side_queue(self):
        """A second in-order queue of the same context, without profiling, for a pass's branches (passlist.py):
        what it runs may overlap what the other queue runs."""
        if self._side is None:
            self._side = cl.CommandQueue(self.context)
        return self._side

    @contextmanager
    def unprofiled(self):
        """Within: `queue` is an in-order queue of the same context without profiling, for work whose events
        nobody reads (a timed pass).  On NVIDIA's OpenCL a launch costs the host 6.5-8.9 us there against 12-15
        with profiling (benchmarks/launches.py's floor).  Each queue is finished before the other takes over,
        so what one enqueued is done before the other's work starts."""
        if self._quiet is None:
            self._quiet = cl.CommandQueue(self.context)
        profiled = self.queue
        profiled.finish()
        self.queue = self._quiet
        try:
            yield
        finally:
            self._quiet.finish()
            self.queue = profiled


def _build_log(exc) -> str:
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-40:])


_RUNTIMES: dict[int, Runtime] = {}


def get_runtime(spec: str | None = None) -> Runtime:
    """The shared Runtime of the device `spec` selects (see select_device)."""
    dev = select_device(spec)
    if dev.int_ptr not in _RUNTIMES:
        _RUNTIMES[dev.int_ptr] = Runtime(dev)
    return _RUNTIMES[dev.int_ptr]

