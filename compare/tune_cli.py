"""`compare tune` on the command line: its arguments parsed into a
tuning Request (backends/tuning: the one entry of every search), what the
harness lends the searches (the oracle's check, the cache writer), the
Summary printed."""
from __future__ import annotations

from nets.errors import UserError

from . import bounds, device_cache, oracle, terminal
from .checking import compare_arrays
from .cli_common import add_device_option, positive, unwritten
from .files import check_writable
from .models import load_net
from .progress import Progress


def cmd_tune(args) -> int:
    from backends import tuning
    scopes = None if args.scope is None else tuning.parse_scopes(args.scope)
    if args.devices not in (None, "this", "all"):
        raise UserError(f"--devices takes 'all' (every device kind among the workers) or 'this', not {args.devices!r}")
    scheduler = None
    if args.scheduler is not None:
        scheduler = tuning.parse_address(args.scheduler)
        _farm_available()
    nets_ = [n.strip() for n in args.net.split(",") if n.strip()]
    request = tuning.Request(
        [load_net(n).net for n in nets_], scopes, args.budget_s,
        batch=positive("--batch", args.batch) if args.batch is not None else None,
        device=args.device, jobs=positive("--jobs", args.jobs) if args.jobs is not None else None,
        scheduler=scheduler, every_kind=args.devices == "all", width=positive("--beam-width", args.beam_width),
        as_tuner=_names(args.as_tuner), routines=_names(args.routines), verify_only=args.verify_only,
        harness=tuning.Harness(_oracle_checker, device_cache.store, check_writable))
    if args.show:
        if args.json:
            from .machine import emit
            emit("tune-show", {"device": args.device, "nets": nets_, "scopes": _shown(request)})
        else:
            print(tuning.show(request))
        return 0
    progress = Progress()
    request.progress = progress.update
    try:
        summary = tuning.tune(request)
    finally:
        progress.done()
    if args.json:   # the files not written are said in the document and, last, as the error
        from .machine import emit
        emit("tune", {"nets": nets_, "lines": summary.lines, "unwritten": [u for u in summary.unwritten if u]})
        unwritten(summary.unwritten)
        return 0
    # a line of words wraps within the terminal's width; a table (several lines) is made to fit already
    print("\n".join(line if "\n" in line else terminal.wrap(line, indent="  ") for line in summary.lines))
    unwritten(summary.unwritten)
    return 0


def _shown(request) -> list[dict]:
    """`tune --show --json`: per scope asked (default: every one), how deep its tuning went, in its lines."""
    from backends import tuning
    return [{"scope": name, "lines": text.splitlines()} for name, text in tuning.shown(request)]


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def _oracle_checker(one, weights, x):
    """A test of a tile candidate's output against the float64 oracle, as every backend's is checked."""
    ref = oracle.forward(one, weights, x)[-1]
    return lambda out: compare_arrays(out, ref).passed


def _farm_available() -> None:
    """--scheduler needs Dask's distributed (the `farm` extra)."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise UserError(f"--scheduler needs Dask's distributed, UNAVAILABLE here ({exc}): "
                        f"pip install '.[farm]' (make setup installs it)") from None


def add_tune_parser(sub) -> None:
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
    add_device_option(p)
    p.set_defaults(func=cmd_tune)
