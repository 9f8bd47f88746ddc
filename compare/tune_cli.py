"""`compare tune` on the command line: its arguments checked, the device
opened (or a Dask scheduler's workers asked for theirs), the budget handed
to compare/tune.py, what it found printed."""
from __future__ import annotations

import backends
from nets.errors import UserError

from .cli_common import add_device_option, positive, unwritten
from .files import check_writable
from .models import load_net
from .progress import Progress


def cmd_tune(args) -> int:
    from backends import cache
    from backends.handwritten.tiles_tuned import KIND as TILES_KIND
    from backends.peers import tinygrad_search
    from backends.tuner import Asked, Budget

    from . import tune, tune_show
    if not args.budget_s > 0:
        raise UserError(f"--budget-s must be a positive number of seconds, not {args.budget_s}")
    nets_ = [n.strip() for n in args.net.split(",") if n.strip()]
    scopes = [s.strip() for s in args.scope.split(",") if s.strip()]
    bad = [s for s in scopes if s not in tune.SCOPES]
    if bad or not scopes:
        raise UserError(f"--scope takes {', '.join(tune.SCOPES)} (comma-separated), not {args.scope!r}")
    batch = positive("--batch", args.batch) if args.batch is not None else None
    loaded = [load_net(n).net for n in nets_]
    as_tuner = [n.strip() for n in args.as_tuner.split(",") if n.strip()] if args.as_tuner else None
    if as_tuner is not None:
        if "tiles" in scopes and args.scope != "clblast,tiles":
            raise UserError("--as-tuner searches CLBlast's Xgemm kernel alone; it takes --scope clblast")
        scopes = ["clblast"]
        Asked.of(loaded, batch, as_tuner)   # refused here, before the device is opened
    if args.devices not in (None, "this", "all"):
        raise UserError(f"--devices takes 'all' (every device kind among the workers) or 'this', not {args.devices!r}")
    if args.devices == "all" and args.scheduler is None:
        raise UserError("--devices all tunes every device kind among a farm's workers: it needs --scheduler")
    if args.scheduler is not None:
        _farm_available(args.scheduler)
        if "tinygrad" in scopes:
            raise UserError("--scheduler spreads CLBlast's search over the workers; tinygrad's search runs here: "
                            "run --scope tinygrad without --scheduler")
        if "tiles" in scopes and args.scope != "clblast,tiles":
            raise UserError("--scheduler spreads CLBlast's search over the workers; our tiles are tuned here: "
                            "run --scope tiles without --scheduler")
        if "tiles" in scopes:
            print("tiles: not tuned with --scheduler (our tiles are tuned here: --scope tiles without it)")
        scopes = [s for s in scopes if s != "tiles"]
    # the CLBlast backends run every net; our tiles only the nets vectorised-tiled runs
    tiled = [n for n in loaded if backends.backend_class("vectorised-tiled").unsupported(n) is None]
    if "tiles" in scopes and len(tiled) < len(loaded):
        skipped = [n for n in loaded if n not in tiled]
        if scopes == ["tiles"] and not tiled:
            why = backends.backend_class("vectorised-tiled").unsupported(skipped[0])
            raise UserError(f"cannot tune tiles for {skipped[0].name}: {why}")
        print(f"tiles: {', '.join(n.name for n in skipped)} left out (vectorised-tiled cannot run "
              f"{'it' if len(skipped) == 1 else 'them'}); CLBlast's problems are tuned for every net")
    routines = _routines(args.routines, loaded, batch, as_tuner)
    jobs = positive("--jobs", args.jobs) if args.jobs is not None else None
    width = positive("--beam-width", args.beam_width)
    progress = Progress()
    run = tune.Run(loaded, batch, progress.update, args.device, jobs, as_tuner, routines, args.verify_only,
                   args.scheduler, args.devices == "all", tiled if "tiles" in scopes else [], beam_width=width)
    if args.show:
        if scopes != ["tinygrad"]:
            for target, pool, _ in tune.targets(run):
                print(tune_show.show(target, loaded, batch, as_tuner))
                if hasattr(pool, "close"):
                    pool.close()
        if "tinygrad" in scopes or tinygrad_search.store_for(run.runtime()).path.exists():
            print(tinygrad_search.show(run.runtime(), loaded, batch, width))
        return 0
    if "tiles" in scopes:
        check_writable(cache.path(TILES_KIND), "the tiles' cache")
    if "tinygrad" in scopes:   # before any budget is spent
        tinygrad_search.require()
        check_writable(str(tinygrad_search.store_for(run.runtime()).path), "tinygrad's choices file")
    try:
        tune.run_scopes(run, scopes, Budget(args.budget_s))
    finally:
        progress.done()
    where = run.runtime().info["name"] if args.scheduler is None else f"the workers of {args.scheduler}"
    print(f"on {where}, budget {args.budget_s:.0f} s; `compare run` uses these "
          f"(--clblast-params database ignores them); run it again to go deeper")
    unwritten(run.unwritten)
    return 0


def _farm_available(address: str) -> None:
    """--scheduler needs Dask's distributed (the `farm` extra); a plain address is asked for."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise UserError(f"--scheduler needs Dask's distributed, UNAVAILABLE here ({exc}): "
                        f"pip install '.[farm]' (make setup installs it)") from None
    if "://" not in address and ":" not in address:
        raise UserError(f"--scheduler takes a Dask scheduler's address, tcp://HOST:PORT, not {address!r}")


def _routines(text: str | None, nets, batch, as_tuner) -> list[str] | None:
    """--routines checked: known names, and posed by the nets (None: every routine)."""
    from backends.clblast import problems
    from backends.tuner import net_problems
    if text is None:
        return None
    known = (problems.GEMM, problems.GEMV, problems.CONVGEMM)
    asked = [r.strip() for r in text.split(",") if r.strip()]
    if not asked or any(r not in known for r in asked):
        raise UserError(f"--routines takes {', '.join(known)} (comma-separated), not {text!r}")
    if as_tuner is not None:
        raise UserError("--routines and --as-tuner exclude each other: --as-tuner searches the Xgemm kernel alone")
    if not any(p.routine in asked for p in net_problems(nets, batch)):
        raise UserError(f"--routines {text}: no problem of {', '.join(n.name for n in nets)} calls "
                        f"{' or '.join(asked)}; name a routine the nets call")
    return asked


def add_tune_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune CLBlast for the device: its own tuners' default search on every "
                                    "problem of the nets, resumable; and our tiles")
    p.add_argument("--net", default="lenet,vgg16", help="the nets whose problems are tuned (default lenet,vgg16)")
    p.add_argument("--batch", type=int, help="tune at this batch instead of each net's own")
    p.add_argument("--budget-s", type=float, default=900.0,
                   help="time for this run, in seconds (default 900); the next run continues where it stopped")
    p.add_argument("--scope", default="clblast,tiles",
                   help="clblast: CLBlast's default search on each problem of the nets, then the best verified "
                        "against CLBlast's database; tiles: vectorised-tiled's tiles per conv layer (a tenth of "
                        "the budget); both by default; tinygrad: tinygrad's schedule search (BEAM) of each kernel "
                        "of the nets, the costliest first (half the budget beside the others)")
    p.add_argument("--jobs", type=int, help="searches side by side, on each worker with --scheduler (default: "
                                            "half the host's cores up to 8 on a GPU, 1 on a CPU device)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="spread CLBlast's search over the workers of this Dask scheduler whose OpenCL device is "
                        "this machine's (started with `dask worker tcp://HOST:PORT`); the results come back here")
    p.add_argument("--devices", metavar="all",
                   help="with --scheduler: 'all' tunes every device kind among the workers, each into its own "
                        "store (default: this machine's device, or the only kind there is)")
    p.add_argument("--beam-width", type=int, default=2,
                   help="tinygrad's search width (BEAM) for --scope tinygrad (default 2: the backend's searched mode)")
    p.add_argument("--show", action="store_true", help="print how deep the tuning of this device went, and stop")
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
