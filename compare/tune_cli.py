"""`compare tune` on the command line: its arguments checked, the device
opened, the budget handed to compare/tune.py, what it found printed."""
from __future__ import annotations

import os

import backends
from nets.errors import UserError

from .cli_common import add_device_option, positive, unwritten
from .files import check_writable
from .models import load_net
from .progress import Progress


def cmd_tune(args) -> int:
    from backends import cache
    from backends.handwritten.tiles_tuned import KIND as TILES_KIND
    from backends.opencl.runtime import get_runtime

    from backends.peers import tinygrad_search

    from . import device_cache, tune
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
        tune.net_problems(loaded, batch, as_tuner)   # refused here, before the device is opened
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
    rt = get_runtime(args.device)
    width = positive("--beam-width", args.beam_width)
    if args.show:
        if scopes != ["tinygrad"]:
            print(tune.show(rt, loaded, batch, as_tuner))
        if "tinygrad" in scopes or tinygrad_search.store_for(rt).path.exists():
            print(tinygrad_search.show(rt, loaded, batch, width))
        return 0
    if "clblast" in scopes:   # before the budget is spent, not after
        folder = tune.store_for(rt).folder
        check_writable(str(folder / "device.json"), "the CLBlast tuning folder")
    if "tiles" in scopes:
        check_writable(cache.path(TILES_KIND), "the tiles' cache")
    if "tinygrad" in scopes:
        tinygrad_search.require()
        check_writable(str(tinygrad_search.store_for(rt).path), "tinygrad's choices file")
    jobs = positive("--jobs", args.jobs) if args.jobs is not None else _default_jobs(rt)
    # our tiles take little time: a tenth of the budget when both scopes are asked for
    tiles_s = args.budget_s * (0.1 if len(scopes) > 1 else 1.0) if "tiles" in scopes else 0.0
    # tinygrad's search takes half the budget beside the others
    tinygrad_s = args.budget_s * (0.5 if len(scopes) > 1 else 1.0) if "tinygrad" in scopes else 0.0
    progress = Progress()
    tiles = search = tinygrad = None
    rows, problems = [], []
    try:
        if "clblast" in scopes:
            search, verified = tune.tune_clblast(rt, loaded, batch, args.budget_s - tiles_s - tinygrad_s, jobs,
                                                 progress.update,
                                                 args.verify_only, as_tuner, routines)
        if "tiles" in scopes and tiled:
            tiles, rows = tune.tune_tiles(rt, tiled, [batch or n.default_batch for n in tiled], tiles_s,
                                     progress.update)
        if "tinygrad" in scopes:
            tinygrad = tinygrad_search.tune(rt, loaded, batch, tinygrad_s, width, progress.update)
    finally:
        progress.done()
    if tinygrad is not None:
        print("\n".join(tinygrad.lines()))
    if search is not None:
        print(f"CLBlast: {search.tried_now} configurations tried this run, {len(verified)} problems verified; "
              f"written to {search.store.folder}")
        if search.checked:
            print(tune.fresh_line(search.checked))
        print(tune.show(rt, loaded, batch, as_tuner))
    if tiles is not None:
        print(tune_tiles_table(rows))
        kept = device_cache.store(TILES_KIND, rt.info, tiles, "the tiles' cache")
        problems.append(kept.problem)
        print(f"vectorised-tiled: {len(tiles['layers'])} conv layers timed in {tiles['took_s']:.0f} s; "
              f"written to {kept.path or 'nowhere'}")
    print(f"on {rt.info['name']}, budget {args.budget_s:.0f} s; `compare run` uses these "
          f"(--clblast-params database ignores them); run it again to go deeper")
    unwritten(problems)
    return 0


def _routines(text: str | None, nets, batch, as_tuner) -> list[str] | None:
    """--routines checked: known names, and posed by the nets (None: every routine)."""
    from backends.clblast import problems

    from . import tune
    if text is None:
        return None
    known = (problems.GEMM, problems.GEMV, problems.CONVGEMM)
    asked = [r.strip() for r in text.split(",") if r.strip()]
    if not asked or any(r not in known for r in asked):
        raise UserError(f"--routines takes {', '.join(known)} (comma-separated), not {text!r}")
    if as_tuner is not None:
        raise UserError("--routines and --as-tuner exclude each other: --as-tuner searches the Xgemm kernel alone")
    if not any(p.routine in asked for p in tune.net_problems(nets, batch)):
        raise UserError(f"--routines {text}: no problem of {', '.join(n.name for n in nets)} calls "
                        f"{' or '.join(asked)}; name a routine the nets call")
    return asked


def _default_jobs(rt) -> int:
    """Side by side only on a GPU: a CPU device's compiles and runs take every core already."""
    if "GPU" not in rt.info["type"]:
        return 1
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def tune_tiles_table(rows) -> str:
    from tabulate import tabulate
    return tabulate(rows, headers=["scope", "tuner", "for", "sizes", "tried", "matched", "best", "s"],
                    disable_numparse=True)


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
                        "of the nets, the costliest first (half the budget beside others)")
    p.add_argument("--jobs", type=int, help="searches side by side (default: half the host's cores up to 8 on a "
                                            "GPU, 1 on a CPU device)")
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
