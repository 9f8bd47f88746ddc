"""Will a run fit in host memory?  Asked before anything of the batch is
allocated, so a batch too large is refused in one line, not by numpy's
traceback or the kernel's out-of-memory killer (exit 137, no word).

The estimate follows what a run holds at its peak (compare/runner.py):
the float32 input; with checking, the float64 oracle's output of every
layer (oracle.forward keeps them all) and the worst layer's temporaries
beside them, then the check's float64 copies of one layer; the backends'
float32 working sets (one at a time, or all at once with --interleave;
an OpenCL device on the CPU, like PoCL, keeps its buffers here too); and
each backend's final output.  It errs high, and only a part of what the
host has available is offered (HEADROOM): this process, its libraries
and the rest of the machine need some too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import psutil

from nets import Net

from nets.errors import UserError

F32, F64 = 4, 8
HEADROOM = 0.8   # the share of the available memory a run may plan to use
CGROUP = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")   # this process's cgroup, under CGROUP


def _size(shape: tuple) -> int:
    return math.prod(shape)


def _im2col(net: Net, i: int) -> int:
    """Elements of layer i's im2col matrix per image (0 for a layer without one)."""
    layer = net.layers[i]
    if layer.kind != "conv":
        return 0
    c = net.in_shape(i)[0]
    _, oh, ow = net.out_shape(i)
    return oh * ow * c * layer.kernel[0] * layer.kernel[1]


def _padded(net: Net, i: int) -> int:
    """Elements of layer i's input per image once padded."""
    shape = net.in_shape(i)
    top, left, bottom, right = getattr(net.layers[i], "padding", (0, 0, 0, 0))
    if len(shape) != 3:
        return _size(shape)
    c, h, w = shape
    return c * (h + top + bottom) * (w + left + right)


@dataclass(frozen=True)
class HostNeed:
    """Bytes a run needs on the host: `per_image` times the batch, plus `fixed`."""

    per_image: int
    fixed: int
    parts: str = "input, backends' buffers and outputs"   # what it counts, for the message

    def at(self, batch: int) -> int:
        return self.per_image * batch + self.fixed

    def largest_batch(self, budget: float) -> int:
        """The largest batch whose need is within `budget` bytes (0: not even one image)."""
        return max(int((budget - self.fixed) // self.per_image), 0)


def host_need(net: Net, checking: bool, backends_at_once: int = 1, outputs_kept: int = 1) -> HostNeed:
    """What a run of `net` needs on the host: `checking` when the float64
    oracle runs; `backends_at_once` prepared together (--interleave opens
    them all); `outputs_kept` final outputs held to the end (one a backend)."""
    n = len(net.layers)
    outs = [_size(net.out_shape(i)) for i in range(n)]
    ins = [_size(net.in_shape(i)) for i in range(n)]
    per_image = _size(net.input_shape) * F32 + outs[-1] * F32 * outputs_kept
    # a backend's working set: every activation (an OpenCL net keeps them all), and the
    # worst layer's temporaries: its input padded, its im2col matrix, its output twice
    backend = (sum(outs) + max(_padded(net, i) + _im2col(net, i) + 2 * outs[i] for i in range(n))) * F32
    per_image += backend * backends_at_once
    if checking:
        kept = sum(outs) * F64
        # a layer of the oracle: its input cast to float64, padded, and a tap of it copied; its sum twice
        layer = max(3 * _padded(net, i) * F64 + 2 * outs[i] * F64 for i in range(n))
        # the check of a layer: the oracle's input as float32, the output, its float64 copy and differences
        check = max(ins[i] * F32 + outs[i] * F32 + 3 * outs[i] * F64 for i in range(n))
        per_image += kept + max(layer, check)
    # the weights, a float32 copy a backend, and the oracle's float64 copy of one layer's
    largest = max(layer.params(net.in_shape(i)) for i, layer in enumerate(net.layers))
    fixed = net.params() * F32 * (1 + backends_at_once) + (largest * F64 if checking else 0)
    oracle = "the float64 oracle's activations, " if checking else ""
    return HostNeed(per_image, fixed, f"input, {oracle}the backends' buffers and outputs")


def _system_available() -> int | None:
    """What the system says is available (psutil: MemAvailable on Linux); None where it cannot say."""
    try:
        return int(psutil.virtual_memory().available)
    except (OSError, RuntimeError, ValueError):
        return None


def _cgroup_room() -> int | None:
    """What this process's cgroup (v2) still allows, when it has a limit: a container's limit is what
    the out-of-memory killer enforces.  Read here because psutil does not: its figures are the host's
    (/proc/meminfo), which a container's limit leaves unchanged."""
    try:
        own = SELF_CGROUP.read_text().strip().splitlines()[0].split(":", 2)[2]
        folder = CGROUP / own.lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(int(limit) - int((folder / "memory.current").read_text().strip()), 0)
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> int | None:
    """The host memory a run may still take: what the system has available, or the cgroup's room when
    that is less; None where neither can be read."""
    figures = [f for f in (_system_available(), _cgroup_room()) if f is not None]
    return min(figures) if figures else None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n < 2**40 else f"{n / 2**40:,.0f} TiB"


def check_fits(net: Net, batch: int, need: HostNeed, what: str | None = None, fits: str = "--batch {} fits") -> None:
    """UserError when `batch` images of `net` would not fit the host's memory,
    naming the figure and (by `fits`, a format) the largest batch that does.
    `what` names the batch in the message (default: --batch N)."""
    have = available_bytes()
    if have is None:
        return
    budget = have * HEADROOM
    want = need.at(batch)
    if want <= budget:
        return
    largest = need.largest_batch(budget)
    hint = fits.format(largest) if largest else "not even batch 1 fits: free some memory"
    raise UserError(f"{net.name} at {what or f'--batch {batch}'} needs about {_gib(want)} of host memory "
                    f"({need.parts}), more than "
                    f"{HEADROOM:.0%} of the {_gib(have)} available; {hint}")


# -- repeats and warm-ups ---------------------------------------------------------

MAX_WARMUP = 1000        # untimed passes: the first pays the first-call costs; past a few, more measure nothing
SAMPLES_PER_LAYER = 8    # a backend's kept timings of one layer in one repeat: wall, kernel, overhead, its steps
SAMPLE_FILE_BYTES = 32   # one kept timing in the results file (indented JSON: a line of its own)
SAMPLE_HOST_BYTES = 256  # ... in memory until the file is written: the float, its records, its JSON text


def samples_per_repeat(net: Net, backends: int) -> int:
    """Timings a run keeps per timed repeat: per backend, the pass's four phases and each layer's."""
    return backends * (4 + SAMPLES_PER_LAYER * len(net.layers))


def check_passes(net: Net, backends: int, repeats: int, warmup: int, batch: int, need: HostNeed,
                 file_bytes: int, file_samples: int | None = None) -> None:
    """UserError, before any work, when `repeats` would keep more timings than a results file of at most
    `file_bytes` holds or than the host's memory leaves beside the run's batch, naming the largest that
    fits; or when `warmup` is beyond MAX_WARMUP (warm-ups keep nothing, and past a few change nothing)."""
    if warmup > MAX_WARMUP:
        raise UserError(f"--warmup {warmup} is more untimed passes than a warm-up needs (the first pays the "
                        f"first-call costs); give at most {MAX_WARMUP}")
    per = samples_per_repeat(net, backends)
    limits = [(file_bytes // (per * SAMPLE_FILE_BYTES),
               f"a results file of at most {file_bytes / 2**20:.0f} MiB (what `compare report` reads)")]
    if file_samples is not None:
        limits.append((file_samples // per, f"a results file of at most {file_samples:,} timings (what "
                                            f"`compare report` reads)"))
    have = available_bytes()
    if have is not None:
        room = max(have * HEADROOM - need.at(batch), 0)
        limits.append((int(room // (per * SAMPLE_HOST_BYTES)),
                       f"the {_gib(room)} of host memory left beside {net.name} at batch {batch}"))
    largest, where = min(limits)
    if repeats > largest:
        hint = f"--repeats {largest} fits" if largest >= 1 else "not even one repeat fits: free some memory"
        raise UserError(f"--repeats {repeats} keeps {per:,} timings a repeat ({len(net.layers)} layers, {backends} "
                        f"backend(s)), more than {where} holds; {hint}")
