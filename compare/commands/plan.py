"""What `compare run`, `check` and `sweep` are asked (Asked, read from the command line in one place) and
the one Plan made of it (build_plan), in the order its parts are checked before any work: the counts, the
net and its backends, the host's memory for the batch (Room), the input, the weights."""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import backends
import nets
from backends.options import RunOptions
from nets import Net
from nets.errors import UserError
from nets.npy import check_holds, header_of, read_data
from nets.userfile import regular_file
from nets.weights import init_weights, load_weights, make_input, weights_digest

from .. import noise
from ..hostmem import HostNeed, check_fits, check_passes, host_need
from ..models import load_net
from ..modes import checks
from ..results import MAX_FILE_BYTES, MAX_SAMPLES, Source
from ..runner import Plan
from .common import positive


@dataclass(frozen=True)
class Asked:
    """The options of a run, check or sweep as given (none checked yet): what the commands lack is its default."""

    net: str
    backends: str
    seed: int
    weights: str | None
    device: str | None
    timeout_s: float
    clblast_params: str
    batch: int | None
    input: str | None
    data: str | None              # 'digits': the held-out digits as input (check only)
    repeats: int | None           # None: calibrated to min_time_s (compare/noise.py)
    warmup: int
    min_time_s: float
    peak_gflops: float | None
    interleave: bool
    draws: int                    # processes a side in child processes is prepared in (compare/draws.py)
    layerwise: bool
    command: str                  # the command line, kept in the results file
    debug: bool

    @classmethod
    def from_args(cls, args, **given) -> Asked:
        """`args` parsed by compare/cli.py; `given` in their place (a sweep's batch is one of its list)."""
        fields = dict(net=args.net, backends=args.backends, seed=args.seed, weights=args.weights,
                      device=args.device, timeout_s=args.timeout_s, clblast_params=args.clblast_params,
                      batch=args.batch, input=args.input, data=getattr(args, "data", None), repeats=args.repeats,
                      warmup=args.warmup, min_time_s=getattr(args, "min_time_s", noise.MIN_TIME_S),
                      peak_gflops=getattr(args, "peak_gflops", None), interleave=getattr(args, "interleave", False),
                      draws=getattr(args, "draws", 1),
                      layerwise=not args.end_to_end_only, command=shlex.join(["compare"] + args.argv),
                      debug=args.debug)
        return cls(**{**fields, **given})


@dataclass
class Room:
    """The host's memory for a batch of `net`, and the timings a results file keeps of it: checked before the
    batch's input is made or read, the largest single allocation."""

    net: Net
    backends: int
    repeats: int
    warmup: int
    need: HostNeed
    cap: int = field(init=False)   # the most calibrated repeats that fit, at the batch last checked

    def __post_init__(self):
        self.cap = self.repeats

    def holds(self, n: int, what: str | None = None, fits: str = "--batch {} fits") -> None:
        check_fits(self.net, n, self.need, what, fits)
        self._passes(n, self.repeats)

    def check(self, n: int, what: str | None = None, fits: str = "--batch {} fits") -> None:
        self.holds(n, what, fits)
        self.cap = noise.fitting_cap(lambda k: self._passes(n, k), self.repeats)

    def _passes(self, n: int, repeats: int) -> None:
        check_passes(self.net, self.backends, repeats, self.warmup, n, self.need, MAX_FILE_BYTES, MAX_SAMPLES)


def build_plan(asked: Asked, mode: str) -> Plan:
    if not asked.timeout_s > 0:
        raise UserError(f"--timeout-s must be a positive number of seconds, not {asked.timeout_s}")
    given = asked.repeats is not None   # a count given is honoured exactly; else calibrated (compare/noise.py)
    repeats = positive("--repeats", asked.repeats) if given else noise.DEFAULT_REPEATS
    warmup = positive("--warmup", asked.warmup)
    names = backends.parse_names(asked.backends)
    net, model_weights = load_net(asked.net)
    batch = positive("--batch", asked.batch) if asked.batch is not None else None
    fixed_batch(net, batch)   # before any work; an input file's batch is checked with its header
    room = Room(net, len(names), repeats, warmup, needed(net, names, mode, asked.interleave))
    x, input_source = _input(asked, net, batch, room)
    weights, weights_source = _weights(asked, net, model_weights)
    fixed_batch(net, x.shape[0])
    return Plan(net=net, batch=x.shape[0], weights=weights, x=x, backends=names,
                explicit=asked.backends.strip() != "all", device=asked.device,
                repeats=repeats, warmup=warmup, max_repeats=room.cap,
                min_time_s=None if given else _min_time(asked.min_time_s),
                mode=mode, layerwise=asked.layerwise,
                sources={"weights": weights_source, "input": input_source},
                peak_gflops=_peak(asked.peak_gflops), command=asked.command, debug=asked.debug,
                options=RunOptions(clblast_params=asked.clblast_params, timeout_s=asked.timeout_s),
                interleave=asked.interleave, draws=positive("--draws", asked.draws))


def needed(net: Net, names: list[str], mode: str, interleave: bool) -> HostNeed:
    """What the run needs on the host: every backend's output is kept to the end, and --interleave
    prepares them all at once."""
    return host_need(net, checking=checks(mode), backends_at_once=len(names) if interleave else 1,
                     outputs_kept=len(names))


def fixed_batch(net, batch: int | None) -> None:
    """A UserError where `net` runs at one batch only (an imported graph fixes it) and `batch` is another."""
    if batch is not None and net.fixed_batch is not None and batch != net.fixed_batch:
        raise UserError(f"{net.name} runs at batch {net.fixed_batch} only ({net.description.split('; ', 1)[-1]}), "
                        f"not {batch}: run it with --batch {net.fixed_batch}, or export it with a dynamic batch "
                        f"(torch.onnx.export's dynamic_axes) so that it reshapes to (-1, ...)")


def _input(asked: Asked, net: Net, batch: int | None, room: Room) -> tuple[np.ndarray, Source]:
    """The input: the user's .npy file, the held-out digits or seeded, its batch's room checked before it is made."""
    if asked.input and asked.data:
        raise UserError("--input and --data are alternatives: give one")
    if asked.input:
        x = load_input(asked.input, net, batch,
                       lambda n: room.check(n, f"the {n} images of {asked.input}", "an input of {} images fits"))
        return x, Source("file", path=asked.input)
    if asked.data:   # the held-out digits (compare/digits.py)
        from ..digits import held_out_input
        x, source = held_out_input(net, batch)
        room.check(x.shape[0])
        return x, Source(**source)
    batch = batch or net.default_batch
    room.check(batch)
    return make_input(net, batch, asked.seed), Source("seed", seed=asked.seed)


def _weights(asked: Asked, net: Net, model_weights: dict | None) -> tuple[dict, Source]:
    """The weights: a file given, lenet's trained on the digits, a model file's own, or seeded."""
    path = asked.weights
    if asked.data and not path and net is nets.NETS["lenet"]:
        from ..digits import TRAINED_WEIGHTS
        path = str(TRAINED_WEIGHTS)   # the weights trained on the digits, unless others are given
    if path:
        weights, source = load_weights(path, net), Source("file", path=path)
    elif model_weights is not None:   # a model file brings its own
        weights, source = model_weights, Source("file", path=asked.net)
    else:
        weights, source = init_weights(net, asked.seed), Source("seed", seed=asked.seed)
    source.sha256_16 = weights_digest(weights)
    return weights, source


def load_input(path: str, net, batch: int | None, room_for: Callable[[int], None]) -> np.ndarray:
    """The user's .npy input, its header checked against the net, the batch, the bytes that follow it and
    (`room_for` the batch it claims) the host's memory before its data is read: a header may claim any shape."""
    p = regular_file(path, "input file", fix="give a .npy file of shape (N, C, H, W)")
    source = f"input file {p}"
    want = tuple(net.input_shape)
    with open(p, "rb") as f:
        if f.read(6) != b"\x93NUMPY":   # an image, a .npz, a pickle: say what it should be, not what numpy objects to
            raise UserError(f"{source} is not a .npy array (it does not start with numpy's .npy header); "
                            f"save the input with numpy.save as float32 of shape (N, C, H, W)")
        f.seek(0)
        header = header_of(f, source)
        shape = header.shape
        if len(shape) != 4 or tuple(shape[1:]) != want:
            raise UserError(f"{source} has shape {shape}; {net.name} takes (N, {', '.join(map(str, want))})")
        if header.dtype != np.float32:
            raise UserError(f"{source} has dtype {header.dtype}; save it as float32 (x.astype(np.float32))")
        if batch is not None and shape[0] != batch:
            raise UserError(f"{source} holds {shape[0]} images but --batch is {batch}")
        if shape[0] < 1:
            raise UserError(f"{source} holds no image")
        check_holds(header, p.stat().st_size - header.offset, source)
        fixed_batch(net, shape[0])
        room_for(shape[0])
        x = read_data(f, header, source)
    if not np.all(np.isfinite(x)):
        raise UserError(f"{source} holds NaN or Inf values")
    return x


def _min_time(value: float) -> float:
    if not 0 < value <= 3600:
        raise UserError(f"--min-time-s must be a number of seconds above 0 and at most 3600, not {value}")
    return value


def _peak(value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise UserError(f"--peak-gflops must be a positive number, not {value}")
    return value
