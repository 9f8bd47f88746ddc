"""`compare tune`: its options made into a tuning Request (backends/tuning:
the one entry of every search), what the harness lends the searches (the
oracle's check, the cache writer), the Summary printed."""
from __future__ import annotations

from nets.errors import UserError

from .. import device_cache, oracle, terminal
from ..checking import compare_arrays
from ..files import check_writable
from ..models import load_net
from ..progress import Progress
from .common import positive, unwritten


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
            from ..machine import emit
            emit("tune-show", {"device": args.device, "nets": nets_, "scopes": _shown(request)})
        else:
            print(tuning.show(request))
        return 0
    progress = Progress()
    progress.until(progress.now() + request.budget_s)   # the run's time left: its budget's, at most
    request.progress = progress.update
    try:
        summary = tuning.tune(request)
    finally:
        progress.done()
    if args.json:   # the files not written are said in the document and, last, as the error
        from ..machine import emit
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
