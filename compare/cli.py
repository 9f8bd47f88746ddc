"""`compare`: the command line.  Its options are declared here, a subparser each; each subcommand is one
module of compare/commands/ (`compare run` is commands/run.py's cmd_run).

Exit codes: 0 success; 1 a check failed or a backend crashed; 2 bad input
or a missing prerequisite, or finished work whose file could not be written
where asked and was kept elsewhere (one line on stderr, naming where; a
traceback only with --debug).
"""
from __future__ import annotations

import argparse
import re
import signal
import sys
import warnings

from backends.options import CLBLAST_PARAMS, RunOptions
from nets.errors import CheckFailed, UserError

from . import __version__, bounds, noise
from .analysis import DEFAULT_BASELINES
from .commands.answer import cmd_answer
from .commands.backends import cmd_backends
from .commands.check import cmd_check
from .commands.devices import cmd_devices
from .commands.diff import cmd_diff
from .commands.nets import cmd_nets
from .commands.peak import cmd_peak
from .commands.report import cmd_report
from .commands.run import cmd_run
from .commands.sweep import cmd_sweep
from .commands.tune import cmd_tune
from .commands.weights import cmd_weights
from .modes import MODES
from .signals import install_handlers, restore_handlers


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line like ours."""

    last_error = ""   # for --json: the document that says the command line was refused

    def error(self, message):
        message = re.sub(r"^argument (--[\w-]+): must be", r"\1 must be", message)   # a bound's refusal (bounds.py)
        _Parser.last_error = f"{message} (see `{self.prog} --help`)"
        self.exit(2, f"error: {_Parser.last_error}\n")


# -- parser -----------------------------------------------------------------

def _seed(text: str) -> int:
    """--seed's type: a whole number, 0 or more, as numpy's seeded generators take (argparse says a refusal in
    one line)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, not {value}")
    return value


def _add_device_option(p, help="OpenCL device: index 'P:D' or a name fragment (default: first GPU, else PoCL)"):
    p.add_argument("--device", help=help)


def _add_net_options(p) -> None:
    """What every command that runs a net takes: the net, the backends, where they run and with what weights."""
    p.add_argument("--net", required=True, help="a built-in net (`compare nets` lists them), or a model file: "
                   "Keras (.keras, .h5) or ONNX (.onnx)")
    p.add_argument("--backends", default="all", help="'all' or a comma-separated list (see `compare backends`)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the generated weights and input (default 0)")
    p.add_argument("--weights", help="a .npz weights file (see `compare weights`) instead of seeded weights")
    _add_device_option(p)
    p.add_argument("--timeout-s", type=bounds.TIMEOUT_S, default=600.0,
                   help="a backend whose forward pass takes longer fails, and the others still run (default 600)")
    p.add_argument("--clblast-params", choices=CLBLAST_PARAMS, default=RunOptions.clblast_params,
                   help="CLBlast's parameters: tuned (the better of what `compare tune` verified for this device "
                        "and CLBlast's database, each a mode; the default), or database (CLBlast's own only)")


def _add_timing_options(p) -> None:
    """How the timed commands (run, sweep) time and compare."""
    p.add_argument("--repeats", type=bounds.REPEATS, help="timed repeats of each backend, exactly; medians are "
                   "reported (default: at least 10, more until they add up to --min-time-s)")
    p.add_argument("--min-time-s", type=bounds.MIN_TIME_S, default=noise.MIN_TIME_S,
                   help=f"without --repeats: each backend's timed passes add up to this at least, up to "
                        f"{noise.MAX_REPEATS} passes (default {noise.MIN_TIME_S:g})")
    p.add_argument("--warmup", type=bounds.WARMUP, default=2, help="untimed runs first; the first is reported apart (default 2)")
    p.add_argument("--peak-gflops", type=bounds.PEAK_GFLOPS,
                   help="the device's peak for utilisation (default: `compare peak`'s cached figure, "
                        "else measured at the start of the run)")
    p.add_argument("--baseline", default=",".join(DEFAULT_BASELINES),
                   help=f"the backends speedups are taken over (default {','.join(DEFAULT_BASELINES)}; "
                        f"best-clblast: the fastest CLBlast backend of the run)")
    p.add_argument("--draws", type=bounds.DRAWS, default=1,
                   help="prepare each side that runs in processes of its own (tinygrad, OpenCV, TensorFlow, "
                        "PyTorch, CLBlast's) in this many fresh processes and keep the one with the fastest passes: "
                        "on some machines a process draws its speed as it starts; the runner's own process is drawn as "
                        "many times at most (default 1; every child is screened as it starts anyway: one that drew "
                        "slow is started again)")
    p.add_argument("--interleave", action="store_true",
                   help="run the backends' timed passes round-robin, so clock and thermal drift hit all alike, "
                        "each after an untimed pass of its own so that switching from another backend is not timed "
                        "(every backend is prepared first: more device memory at once)")


def _add_run_options(p, with_timing: bool) -> None:
    _add_net_options(p)
    p.add_argument("--batch", type=bounds.BATCH, help="images per forward pass (default: the net's, 100 for lenet, 1 for vgg16)")
    p.add_argument("--input", help="a float32 .npy input of shape (N, C, H, W) instead of a seeded one")
    p.add_argument("--save-outputs", metavar="DIR", help="save the input, the reference and every backend's output as .npy")
    p.add_argument("--end-to-end-only", action="store_true", help="check only the final output, not each layer")
    if with_timing:
        _add_timing_options(p)
        _add_json_option(p, "where the results file went and the answer, as `compare answer --json`")
        p.add_argument("--mode", choices=MODES, default="both", help="check outputs, time them, or both (default)")
        p.add_argument("--out", help="results file (default results/<net>-<date>.json); '-': its JSON on stdout, "
                                     "the text for people on stderr")
    else:
        p.set_defaults(repeats=1, warmup=1, mode="correctness")
        p.add_argument("--out", help="also write a results file ('-': its JSON on stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress line and no tables: only the answer "
                                                        "(run) or the verdict (check), and errors")


def _add_json_option(p, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"one JSON document on stdout: {what} (docs/files.md)")


def _add_tune_parser(sub) -> None:
    from backends.tuning.scopes import SCOPES
    p = sub.add_parser("tune", help="every search the comparison depends on, for this device "
                                    "(CLBlast's default search, our tiles, tinygrad's, OpenCV's), resumable")
    p.add_argument("--net", default="lenet,vgg16", help="the nets whose problems are tuned (default lenet,vgg16)")
    p.add_argument("--batch", type=bounds.BATCH, help="tune at this batch instead of each net's own")
    p.add_argument("--budget-s", type=bounds.BUDGET_S, default=900.0,
                   help="time for this run, in seconds (default 900); the next run continues where it stopped")
    p.add_argument("--scope", default=None,
                   help="what to search, comma-separated, or all (default clblast,tiles): "
                        + "; ".join(f"{s.name}: {s.help}" for s in SCOPES.values()))
    p.add_argument("--jobs", type=bounds.JOBS, help="searches side by side, on each worker with --scheduler (default: "
                                            "half the host's cores up to 8 on a GPU, 1 on a CPU device)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="spread the search (clblast, tinygrad) over the workers of this Dask scheduler whose OpenCL "
                        "device is this machine's (started with `dask worker tcp://HOST:PORT`, one per GPU pinned "
                        "by PYOPENCL_CTX=P:D); the results come back here")
    p.add_argument("--devices", metavar="all",
                   help="with --scheduler: 'all' tunes every device kind among the workers, each into its own "
                        "store (default: this machine's device, or the only kind there is)")
    p.add_argument("--beam-width", type=bounds.BEAM_WIDTH, default=2,
                   help="tinygrad's search width (BEAM) for --scope tinygrad (default 2: the backend's searched mode)")
    p.add_argument("--show", action="store_true", help="print how deep the tuning of this device went, and stop")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout: with --show, each scope's "
                                                       "depth; else what the tune did (docs/files.md)")
    p.add_argument("--as-tuner", metavar="LAYERS",
                   help="instead of the nets' problems, search these layers' im2col GEMMs (comma-separated names, or "
                        "'all') as CLBlast's xgemm tuner runs them: the Xgemm kernel alone, column major, sizes "
                        "rounded up to its tiles; to hold our search against the tuner's own figures")
    p.add_argument("--routines", metavar="NAMES",
                   help="search only the problems of these CLBlast routines (gemm, gemv, convgemm; comma-separated): "
                        "a kind of call is tuned for a net only once all its problems are verified, so finishing "
                        "one kind first puts it in force sooner")
    p.add_argument("--verify-only", action="store_true",
                   help="search nothing: spend the budget re-timing what was found against CLBlast's database")
    _add_device_option(p)
    p.set_defaults(func=cmd_tune)


def _add_diff_parser(sub) -> None:
    p = sub.add_parser("diff", help="each backend's change between two runs of one net, and whether it is real")
    p.add_argument("a", metavar="A.json", help="the earlier results file")
    p.add_argument("b", metavar="B.json", help="the later results file")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout: each backend's ratio, its "
                                                       "interval and the change (docs/files.md)")
    p.set_defaults(func=cmd_diff)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="compare", description="Is CLBlast a good neural-network engine on this OpenCL device?")
    parser.add_argument("--version", action="version", version=f"clblast-compare {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("run", help="time every layer on each backend, check outputs, write a results file")
    _add_run_options(p, with_timing=True)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="check each backend's outputs against the float64 oracle (exit 1 on failure)")
    _add_run_options(p, with_timing=False)
    _add_json_option(p, "each backend's verdict against the oracle and the count passed")
    p.add_argument("--data", choices=["digits"],
                   help="digits: run on scikit-learn's held-out handwritten digits and print each backend's "
                        "top-1 accuracy (lenet defaults to the weights trained on them, nets/data/lenet-digits.npz)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("sweep", help="run a net at several batches (a results file each) and write a sweep file")
    _add_net_options(p)
    p.add_argument("--batch", help="comma-separated batches (default: powers of two up to 64 for lenet, "
                                   "16 for vgg16, else 1,2,4,8)")
    _add_timing_options(p)
    p.add_argument("--out", help="folder for the results files and sweep.json (default results/sweep-<net>-<date>/)")
    _add_json_option(p, "the sweep file, the crossover in words and each batch's answer")
    p.set_defaults(func=cmd_sweep, input=None, end_to_end_only=False)

    p = sub.add_parser("report", help="render tables and plots from results files and sweeps")
    p.add_argument("files", nargs="+", help="results JSON files, and sweeps: a sweep.json of `compare sweep` "
                                            "or the folder holding it")
    p.add_argument("--out", default="report", help="output folder (default ./report)")
    p.add_argument("--baseline", default=",".join(DEFAULT_BASELINES),
                   help=f"the backends speedups are taken over, in order (default {','.join(DEFAULT_BASELINES)})")
    p.add_argument("--quiet", action="store_true", help="not the list of files written: only the page check's line")
    p.add_argument("--published", action="store_true",
                   help="add the study's published Mali-T628 figures (tables 6.2, 7.4) as labelled columns")
    _add_json_option(p, "the files written, the page check and each file's answer")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("answer", help="the study's question answered from results files: in sentences, or as "
                                      "the README's table (--table)")
    p.add_argument("files", nargs="+", help="results JSON files")
    p.add_argument("--table", action="store_true", help="a table per device, a row per net")
    p.add_argument("--markdown", action="store_true", help="the tables in Markdown (the README's)")
    _add_json_option(p, "each file's answer: its sentences, sides, ratios and intervals")
    p.set_defaults(func=cmd_answer)

    p = sub.add_parser("peak", help="measure the device's multiply-add throughput and memory bandwidth")
    _add_device_option(p)
    p.add_argument("--cap-s", type=bounds.CAP_S, default=30.0, help="time for the whole measurement, in seconds (default 30)")
    _add_json_option(p, "the device, its peak and bandwidth, and where they were cached")
    p.set_defaults(func=cmd_peak)

    _add_tune_parser(sub)
    _add_diff_parser(sub)

    p = sub.add_parser("weights", help="write a net's seeded weights as a .npz file")
    p.add_argument("--net", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=_seed, default=0)
    _add_json_option(p, "the file written, its arrays and parameters")
    p.set_defaults(func=cmd_weights)

    p = sub.add_parser("devices", help="list the OpenCL platforms and devices")
    _add_device_option(p, help="show which device this selection picks")
    _add_json_option(p, "every device's properties and which is the default")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("backends", help="list the backends and whether they can run here")
    _add_json_option(p, "each backend's name, status, side, summary and why it cannot run")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("nets", help="list the nets")
    _add_json_option(p, "each net's batch, input shape, layers, parameters and GFLOP per image")
    p.set_defaults(func=cmd_nets)
    return parser


def _json_failure(args, message: str, code: int) -> None:
    if getattr(args, "json", False):
        from .machine import fail
        fail(message, code)


def main(argv=None) -> int:
    from . import machine
    parser = build_parser()
    own_process = argv is None   # not called from Python (a test): the process may be drawn again
    argv = sys.argv[1:] if argv is None else list(argv)
    machine.begin()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # argparse said why on stderr; --json still gets its one document
        if "--json" in argv and exc.code:
            from .machine import fail
            fail(_Parser.last_error or "the command line was refused", exc.code)
        raise
    args.argv = argv
    if not args.debug:
        # kernel compilers' warnings are for the developers of the kernels
        warnings.filterwarnings("ignore", category=UserWarning, module="pyopencl")
    previous = install_handlers()
    try:
        if own_process and getattr(args, "draws", 1) > 1:
            from . import runner_draw
            code = runner_draw.redraw(argv, args.draws)
            if code is not None:
                return code   # a fresh process ran it
        return args.func(args)
    except (UserError, CheckFailed) as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        _json_failure(args, f"{exc}", exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        said = (f"interrupted ({signal.Signals(signum).name}): stopped; no partial file was written and "
                f"earlier files are as they were")
        print(said, file=sys.stderr)
        _json_failure(args, said, 128 + signum)
        return 128 + signum
    finally:
        restore_handlers(previous)
