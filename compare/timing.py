"""The timed repeats of one prepared backend, one round at a time, so the
runner can run backends one after the other or round-robin (--interleave:
clock and thermal drift then hit every backend alike).

An end-to-end sample is the mean of a few passes back to back (as many as
add up to BLOCK_MS, BLOCK_MAX at most), the same rule for every side: a
backend in a child process makes them in one request, so a pass of a
millisecond is not timed just after its process woke from waiting on the
socket (on the H200 that cost tinygrad's ResNet-18 0.1-0.5 ms a pass:
reports/nvidia-h200/NOTES.md).

Every timed output is checked: against the output that was checked against
the oracle, bit for bit for a deterministic backend, else within the
float32 tolerance.  A backend that answers right once and otherwise in its
timed passes fails, naming the pass.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from nets.errors import PassTimeout
from nets.ready import reached

from .checking import TOLERANCE, compare_arrays
from .results import LayerTimes, PassTimes, Samples, StepTimes, Timing

PHASES = ("upload", "compute", "download", "total")
BLOCK_MS = 5.0   # an end-to-end sample's passes add up to this at least...
BLOCK_MAX = 8    # ...and are this many at most


def passes_per_sample(pass_ms: float) -> int:
    """The passes back to back an end-to-end sample takes the mean of, for a backend whose warm-up pass took
    `pass_ms`."""
    if not pass_ms > 0:
        return 1
    return max(1, min(BLOCK_MAX, math.ceil(BLOCK_MS / pass_ms)))


def sample(prepared, x: np.ndarray, n: int) -> tuple[dict[str, float], list[np.ndarray]]:
    """One end-to-end sample: `n` timed passes back to back (one request for a backend in a child), each
    phase the mean of theirs, and every pass's output."""
    passes = prepared.timed_passes(x, n)
    return {key: statistics.fmean(phases[key] for phases, _ in passes) for key in PHASES}, [y for _, y in passes]


class TimedOutputDiffers(RuntimeError):
    """A timed pass gave another output than the checked one."""


def within(seconds: float, timeout_s: float | None, what: str) -> None:
    """PassTimeout when `what` took longer than `timeout_s` (it is measured
    after it returns: a pass the driver never returns from cannot be cut
    short inside this process; a backend in a child process is killed)."""
    if timeout_s is not None and seconds > timeout_s:
        raise PassTimeout(f"{what} took {seconds:.1f} s, more than --timeout-s {timeout_s:g}")


class Trial:
    def __init__(self, label: str, prepared, x: np.ndarray, checked: np.ndarray, deterministic: bool,
                 timeout_s: float | None = None, per_sample: int = 1):
        self.label = label
        self.per_sample = per_sample   # passes back to back in one end-to-end sample (passes_per_sample)
        self.prepared = prepared
        self.x = x
        self.checked = checked
        self.deterministic = deterministic
        self.timeout_s = timeout_s
        self.phases: dict[str, list[float]] = {p: [] for p in PHASES}
        self.layer_runs: list = []

    def _check(self, y: np.ndarray, what: str, exact: bool | None = None) -> None:
        """`y` against the checked output: bit for bit where the backend is deterministic (and `exact` is
        not False), else within the float32 tolerance."""
        if self.deterministic if exact is None else exact:
            if np.array_equal(y, self.checked):
                return
            differ = int(np.count_nonzero(y != self.checked)) if y.shape == self.checked.shape else "all"
            raise TimedOutputDiffers(f"{what} gave another output than the checked one ({differ} elements "
                                     f"differ; {self.label} is deterministic, so they must be bit-identical)")
        result = compare_arrays(y, self.checked, TOLERANCE["float32"])
        if not result.passed:
            raise TimedOutputDiffers(f"{what} gave another output than the checked one (rel L2 "
                                     f"{result.rel_l2}, {result.note or 'tolerance 1e-4'})")

    def end_to_end(self, r: int) -> None:
        """Timed sample r: the whole forward pass, its phases apart, the mean of `per_sample` passes back to
        back, each output checked."""
        reached("timing")
        n = self.per_sample
        t0 = time.perf_counter()
        phases, outputs = sample(self.prepared, self.x, n)
        within((time.perf_counter() - t0) / n, self.timeout_s, f"timed pass {r + 1} (end to end)")
        for k, y in enumerate(outputs):
            self._check(np.asarray(y), f"timed pass {r + 1} (end to end{f', pass {k + 1} of {n}' if n > 1 else ''})")
        for key in PHASES:
            self.phases[key].append(phases[key])

    def settle(self) -> None:
        """An untimed end-to-end pass.  Interleaved, one precedes each timed
        pass: on a GPU, the first work after another backend's (another
        process, another runtime) pays for the switch of contexts, a cost
        of running several backends at once that no user of one pays."""
        self.prepared.timed_pass(self.x)

    def layers_first(self) -> None:
        """An untimed per-layer pass: that path can have first-call costs of its own."""
        self.prepared.load_input(self.x)
        self.prepared.run_timed()

    def layers(self, r: int) -> None:
        """Timed pass r, layer by layer (a sync after each)."""
        reached("timing")
        t0 = time.perf_counter()
        self.prepared.load_input(self.x)
        self.layer_runs.append(self.prepared.run_timed())
        within(time.perf_counter() - t0, self.timeout_s, f"timed pass {r + 1} (layer by layer)")
        # a backend that compiles each layer apart for this pass (XLA) computes the same sums in another order
        apart = bool((self.prepared.config or {}).get("layers_compiled_apart"))
        self._check(np.asarray(self.prepared.fetch_output()), f"timed pass {r + 1} (layer by layer)",
                    exact=self.deterministic and not apart)

    def result(self) -> Timing:
        reached("timed")
        end = PassTimes(**{k: Samples.of(v) for k, v in self.phases.items()})
        layers = []
        for i, layer in enumerate(self.prepared.net.layers):
            runs = [rep[i] for rep in self.layer_runs]
            kernel = [t.kernel_ms for t in runs]
            has_kernel = all(k is not None for k in kernel)
            steps = [StepTimes(step.name, step.how, Samples.of([t.steps[s].ms for t in runs]))
                     for s, step in enumerate(runs[0].steps)]
            layers.append(LayerTimes(
                name=layer.name, wall=Samples.of([t.wall_ms for t in runs]),
                kernel=Samples.of(kernel) if has_kernel else None,
                overhead=Samples.of([t.wall_ms - t.kernel_ms for t in runs]) if has_kernel else None,
                steps=steps))
        return Timing(end, layers, self.per_sample)
