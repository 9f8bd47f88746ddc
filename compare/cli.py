"""`compare`: the command line.  One cmd_<name> function per subcommand.

Exit codes: 0 success; 1 a check failed or a backend crashed; 2 bad input
or a missing prerequisite, or finished work whose file could not be written
where asked and was kept elsewhere (one line on stderr, naming where; a
traceback only with --debug).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import os
import re
import shlex
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

import backends
import nets
from backends.options import CLBLAST_PARAMS, RunOptions
from nets.errors import CheckFailed, UserError
from nets.npy import check_holds, header_of, read_data
from nets.userfile import regular_file
from nets.weights import init_weights, load_weights, make_input, save_weights, weights_digest

from . import __version__, bounds, noise
from .report import answer
from .analysis import DEFAULT_BASELINES, baseline_names, parse_baselines, timed
from .cli_common import add_device_option, positive, seed_arg, unwritten
from .files import RESULTS_ROOM, Output, check_apart, check_writable
from .hostmem import HostNeed, check_fits, check_passes, host_need
from .keep import Keeper, keep_file, text_writer
from .models import SUFFIXES, load_net
from .progress import Progress
from .results import MAX_FILE_BYTES, MAX_SAMPLES, RunResult, Source, load_results, to_json
from .modes import MODES, checks
from .runner import Outputs, Plan, execute, exit_code, steps
from .signals import install_handlers, restore_handlers
from .tables import check_table, layer_table, modes_table, summary_table
from .terminal import table as fit_table, wrap
from .diff import add_diff_parser
from .tune_cli import add_tune_parser


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line like ours."""

    last_error = ""   # for --json: the document that says the command line was refused

    def error(self, message):
        message = re.sub(r"^argument (--[\w-]+): must be", r"\1 must be", message)   # a bound's refusal (bounds.py)
        _Parser.last_error = f"{message} (see `{self.prog} --help`)"
        self.exit(2, f"error: {_Parser.last_error}\n")


# -- inputs shared by run and check ---------------------------------------

def _peak(value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise UserError(f"--peak-gflops must be a positive number, not {value}")
    return value


def _load_input(path: str, net, batch: int | None, room_for: Callable[[int], None]) -> np.ndarray:
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


def _host_need(net, names: list[str], mode: str, interleave: bool) -> HostNeed:
    return host_need(net, checking=checks(mode),
                     backends_at_once=len(names) if interleave else 1, outputs_kept=len(names))


def fixed_batch(net, batch: int | None) -> None:
    """A UserError where `net` runs at one batch only (an imported graph fixes it) and `batch` is another."""
    if batch is not None and net.fixed_batch is not None and batch != net.fixed_batch:
        raise UserError(f"{net.name} runs at batch {net.fixed_batch} only ({net.description.split('; ', 1)[-1]}), "
                        f"not {batch}: run it with --batch {net.fixed_batch}, or export it with a dynamic batch "
                        f"(torch.onnx.export's dynamic_axes) so that it reshapes to (-1, ...)")


def _min_time(value: float) -> float:
    if not 0 < value <= 3600:
        raise UserError(f"--min-time-s must be a number of seconds above 0 and at most 3600, not {value}")
    return value


def _plan(args, mode: str) -> Plan:
    if not args.timeout_s > 0:
        raise UserError(f"--timeout-s must be a positive number of seconds, not {args.timeout_s}")
    given = args.repeats is not None   # a count given is honoured exactly; else calibrated (compare/noise.py)
    repeats = positive("--repeats", args.repeats) if given else noise.DEFAULT_REPEATS
    warmup = positive("--warmup", args.warmup)
    names = backends.parse_names(args.backends)
    net, model_weights = load_net(args.net)
    batch = positive("--batch", args.batch) if args.batch is not None else None
    fixed_batch(net, batch)   # before any work; an input file's batch is checked below
    data = getattr(args, "data", None)
    need = _host_need(net, names, mode, getattr(args, "interleave", False))

    def room_for(n: int, what: str | None = None, fits: str = "--batch {} fits") -> None:
        """Before a batch's input is made or read: it fits the host's memory, and so do the timings kept."""
        check_fits(net, n, need, what, fits)
        check_passes(net, len(names), repeats, warmup, n, need, MAX_FILE_BYTES, MAX_SAMPLES)
        cap[0] = noise.fitting_cap(lambda k: check_passes(net, len(names), k, warmup, n, need, MAX_FILE_BYTES,
                                                          MAX_SAMPLES), repeats)
    cap = [repeats]
    if args.input and data:
        raise UserError("--input and --data are alternatives: give one")
    if args.input:
        x = _load_input(args.input, net, batch,
                        lambda n: room_for(n, f"the {n} images of {args.input}", "an input of {} images fits"))
        batch = x.shape[0]
        input_source = {"kind": "file", "path": args.input}
    elif data:   # the held-out digits (compare/digits.py)
        from .digits import held_out_input
        x, input_source = held_out_input(net, batch)
        batch = x.shape[0]
        room_for(batch)
    else:
        batch = batch or net.default_batch
        room_for(batch)   # before the input, the largest single allocation, is made
        x = make_input(net, batch, args.seed)
        input_source = {"kind": "seed", "seed": args.seed}
    weights_file = args.weights
    if data and not weights_file and net is nets.NETS["lenet"]:
        from .digits import TRAINED_WEIGHTS
        weights_file = str(TRAINED_WEIGHTS)   # the weights trained on the digits, unless others are given
    if weights_file:
        weights = load_weights(weights_file, net)
        weights_source = {"kind": "file", "path": weights_file}
    elif model_weights is not None:   # a model file brings its own
        weights = model_weights
        weights_source = {"kind": "file", "path": args.net}
    else:
        weights = init_weights(net, args.seed)
        weights_source = {"kind": "seed", "seed": args.seed}
    weights_source["sha256_16"] = weights_digest(weights)
    fixed_batch(net, batch)
    return Plan(net=net, batch=batch, weights=weights, x=x, backends=names,
                explicit=args.backends.strip() != "all", device=args.device,
                repeats=repeats, warmup=warmup, max_repeats=cap[0],
                min_time_s=None if given else _min_time(getattr(args, "min_time_s", noise.MIN_TIME_S)),
                mode=mode, layerwise=not args.end_to_end_only,
                sources={"weights": Source(**weights_source), "input": Source(**input_source)},
                peak_gflops=_peak(getattr(args, "peak_gflops", None)),
                command=shlex.join(["compare"] + args.argv), debug=args.debug,
                options=RunOptions(clblast_params=args.clblast_params, timeout_s=args.timeout_s),
                interleave=getattr(args, "interleave", False))


def _inputs(args) -> list[tuple[str, str | None]]:
    """The files a run, check or sweep reads: the model file (a built-in net names none), the input, the weights."""
    net = args.net if args.net.lower().endswith(SUFFIXES) else None
    inputs = [("--net", net), ("--input", getattr(args, "input", None)), ("--weights", args.weights)]
    if getattr(args, "data", None):   # the weights trained on the digits, which lenet reads unless given others
        from .digits import TRAINED_WEIGHTS
        inputs.append(("--data's trained weights", str(TRAINED_WEIGHTS)))
    return inputs


def _outputs_apart(args, out: str | None) -> None:
    """Before any work: neither --out nor a file --save-outputs writes may be a file the command reads."""
    outputs = [Output("--out", out)] if out else []
    if getattr(args, "save_outputs", None):
        names = ["input", "reference"] + backends.parse_names(args.backends)
        outputs.append(Output("--save-outputs", args.save_outputs, tuple(f"{n}.npy" for n in names)))
    check_apart(outputs, _inputs(args))


def _save_outputs(outputs: Outputs, plan: Plan, directory: str) -> str | None:
    """The arrays as .npy files in `directory`, or kept elsewhere: then the line that says where."""
    def writer(array):
        def write(tmp):
            with open(tmp, "wb") as f:   # a file, not a name: np.save would add .npy to the staged name
                np.save(f, array, allow_pickle=False)
        return write
    arrays = {"input": plan.x, "reference": outputs.reference, **outputs.backends}
    keeper = Keeper(directory)
    for name, array in arrays.items():
        if array is not None:
            keeper.write(f"{name}.npy", writer(array))
    return keeper.problem("--save-outputs", "outputs")


def _default_out(net_name: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"results/{net_name}-{stamp}.json"


def _sweep_plans(args) -> tuple[Plan, list[int], Iterator[Plan]]:
    """A sweep's first plan, its batches and a plan per batch, made as each is
    reached: the same net, weights and device throughout, and a fresh seeded
    input per batch (seed + batch), so no batch's images are another's."""
    from .sweep import default_batches, parse_batches
    given = parse_batches(args.batch) if args.batch is not None else None
    args.batch = given[0] if given else None
    base = _plan(args, "both")
    batches = given or default_batches(base.net.name)
    for batch in batches:
        fixed_batch(base.net, batch)
    need = _host_need(base.net, base.backends, "both", base.interleave)
    check_fits(base.net, batches[-1], need, f"batch {batches[-1]} of the sweep", "batches up to {} fit")   # the largest, before any runs
    check_passes(base.net, len(base.backends), base.repeats, base.warmup, batches[-1], need, MAX_FILE_BYTES,
                 MAX_SAMPLES)

    def plans():
        for batch in batches:
            seed = args.seed + batch
            yield dataclasses.replace(base, batch=batch, x=make_input(base.net, batch, seed),
                                      sources={**base.sources, "input": Source("seed", seed=seed)})
    return base, batches, plans()


def _print_failures(results) -> None:
    for b in results.backends:
        if b.status == "FAILED":
            print(f"error: backend {b.name} failed: {b.reason}", file=sys.stderr)


def _execute(args, mode: str):
    if args.save_outputs:
        check_writable(args.save_outputs, "--save-outputs", folder=True)
    plan = _plan(args, mode)
    progress = Progress(in_place=False, every_s=float("inf")) if getattr(args, "quiet", False) else Progress()

    def say(line: str) -> None:   # a line that stays, before the tables
        progress.done()
        if not getattr(args, "quiet", False):
            print(wrap(line, indent="  ") + "\n", flush=True)
    progress.expect(steps(plan))
    try:
        results, outputs = execute(plan, progress, say)
    finally:
        progress.done()
    problems = [_save_outputs(outputs, plan, args.save_outputs)] if args.save_outputs else []
    if getattr(args, "data", None):
        from .digits import add_accuracy
        add_accuracy(results, outputs)
    return results, plan, problems


# -- subcommands ------------------------------------------------------------

STDOUT = "-"   # --out -: the results file's JSON on stdout, and what is said for people on stderr


def _human(to_stdout: bool):
    """Where the text for people goes: stdout, or stderr while stdout carries a JSON document."""
    return contextlib.nullcontext() if to_stdout else contextlib.redirect_stdout(sys.stderr)


def _answer_text(results: RunResult) -> str | None:
    said = answer.lines(results)
    if not said:
        return None
    return "\n".join([answer.heading(results)] + [wrap("- " + line, indent="  ") for line in said])


def cmd_run(args) -> int:
    out = args.out or _default_out(Path(args.net).stem)
    parse_baselines(args.baseline)   # before any work, as every name given
    _outputs_apart(args, None if out == STDOUT else out)
    if out != STDOUT:
        check_writable(out, "--out")
    if out == STDOUT and args.json:
        raise UserError("--out - and --json both want stdout: give one (--out FILE keeps the results file)")
    with _human(out != STDOUT and not args.json):
        results, plan, problems = _execute(args, args.mode)
    if out == STDOUT:
        sys.stdout.write(to_json(results) + "\n")
        kept = None
    else:
        kept = keep_file(out, text_writer(to_json(results)), "--out", "results")
    if args.json:
        from .machine import emit
        emit("run", {"results": None if kept is None or kept.problem else out,
                     **dataclasses.asdict(answer.as_data(results))})
    with _human(out != STDOUT and not args.json):
        if not args.quiet:
            _run_tables(results, plan, args)
        if kept is not None and kept.problem is None and not args.quiet:
            print(f"\nresults written to {out}")
        _print_failures(results)
        unwritten(problems + [kept.problem if kept else None])
        said = _answer_text(results)
        if said:   # the conclusion last, where a reader of the terminal looks
            print(("" if args.quiet else "\n") + "The answer:\n" + said)
    return exit_code(results)


def _run_tables(results: RunResult, plan, args) -> None:
    device = results.device.name
    print(wrap(f"{plan.net.name} batch {plan.batch} on {device} ({results.net.flops / 1e9:.2f} GFLOP per pass), "
               f"median of {plan.repeats} runs" + (f" or more a backend, until they add up to {plan.min_time_s:g} s"
                                                   if plan.min_time_s else "")) + "\n")
    for b in results.backends:
        if b.ok and b.timing:
            print(wrap(f"== {b.name}: {b.summary} [{b.info.get('device', device)}]", indent="   "))
            print(layer_table(results, b) + "\n")
    print(summary_table(results, parse_baselines(args.baseline)))
    modes = modes_table(results)
    if modes:
        print("\n" + modes)
    if plan.checks:
        print("\n" + check_table(results))


def _verdict(results: RunResult) -> str:
    """`compare check`'s last line: how many of the backends that ran passed."""
    ran = [b for b in results.backends if b.status in ("OK", "FAILED")]
    passed = [b for b in ran if b.passed]
    idle = len(results.backends) - len(ran)
    return (f"{len(passed)} of {len(ran)} passed" + (f" ({idle} could not run here: see above)" if idle else "")
            + ("" if len(passed) == len(ran) else f"; failed: {', '.join(b.name for b in ran if not b.passed)}"))


def cmd_check(args) -> int:
    to_stdout = args.out == STDOUT
    _outputs_apart(args, None if to_stdout else args.out)
    if args.out and not to_stdout:
        check_writable(args.out, "--out")
    if to_stdout and args.json:
        raise UserError("--out - and --json both want stdout: give one (--out FILE keeps the results file)")
    with _human(not (to_stdout or args.json)):
        results, plan, problems = _execute(args, "correctness")
    if to_stdout:
        sys.stdout.write(to_json(results) + "\n")
    elif args.out:
        problems.append(keep_file(args.out, text_writer(to_json(results)), "--out", "results").problem)
    if args.json:
        from .machine import check_payload, emit
        emit("check", check_payload(results))
    with _human(not (to_stdout or args.json)):
        if not args.quiet:
            print(wrap(f"{plan.net.name} batch {plan.batch}: outputs against the float64 oracle "
                       f"(each layer on the oracle's input, and end to end)") + "\n")
            print(check_table(results))
            if args.data:
                from .digits import accuracy_table
                print("\n" + accuracy_table(results))
        _print_failures(results)
        code = exit_code(results)
        failed = None
        if code == 1 and not any(b.status == "FAILED" for b in results.backends):
            failed = "check failed: see the table above"
        if args.data and code == 0:
            from .digits import disagreements
            if disagreements(results):
                failed = (f"check failed: {', '.join(disagreements(results))} predicted differently "
                          f"(see the accuracy table)")
        print(("" if args.quiet else "\n") + _verdict(results))
        if failed and any(problems):   # said first: the line naming where the files are comes last
            print(f"error: {failed}", file=sys.stderr)
        unwritten(problems)
    if failed:
        raise CheckFailed(failed)
    return code


def cmd_sweep(args) -> int:
    if not args.json:
        return _sweep(args)
    from .machine import emit
    with _human(False):   # the text for people on stderr, the document on stdout
        code = _sweep(args)
    emit("sweep", args.said)
    return code


def _sweep(args) -> int:
    from . import sweep as sw
    from .report.sweeps import batches_text, comparisons, crossover, notes, per_image_table, speedup_table
    baselines = parse_baselines(args.baseline)
    if args.out:
        check_apart([Output("--out", args.out, ("*-batch*.json", sw.SWEEP_FILE))], _inputs(args))
        check_writable(args.out, "--out", folder=True)
    base, batches, plans = _sweep_plans(args)
    out = args.out or f"results/sweep-{Path(args.net).stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    check_writable(out, "--out", folder=True, room=len(batches) * RESULTS_ROOM)
    runs = f"at least {base.repeats}" if base.min_time_s else f"{base.repeats}"   # calibrated: compare/noise.py
    print(f"{base.net.name} at {batches_text(batches)}, {runs} timed runs each, into {out}\n")
    done: list[RunResult] = []
    progress = Progress()

    def finished(res: RunResult, path: Path | None) -> None:
        progress.done()
        done.append(res)
        print(wrap(f"== {res.net.name} batch {res.net.batch} on {res.device.name} ({res.net.flops / 1e9:.3g} GFLOP per "
              f"pass), median of {runs} runs: {path or 'not written'}", indent="   "))
        print(summary_table(res, baselines) + "\n")

    keeper = Keeper(out)
    progress.expect(len(batches) * steps(base))   # every batch's: one time left for the whole sweep
    try:
        try:
            path = sw.run_sweep(plans, keeper, base.command, progress, finished)
        finally:
            progress.done()
    except KeyboardInterrupt:
        if done:   # their files are whole and stay; the sweep file is written only at the end
            print(f"sweep stopped after batch {done[-1].net.batch}: the results files of "
                  f"{batches_text([r.net.batch for r in done])} are in {keeper.folder}, and no sweep file",
                  file=sys.stderr)
        raise
    print(f"{base.net.name}: time per image (ms), end-to-end compute over the batch")
    for headers, rows in (per_image_table(done), speedup_table(done)):
        print(fit_table(rows, headers) + "\n")
    print(wrap(f"where CLBlast catches up: {crossover(comparisons(done))}"))
    for note in notes(done):
        print(wrap(note))
    if keeper.error is None:
        print(f"\nsweep written to {path}; `compare report {path}` renders it")
    for res in done:
        for b in res.backends:
            if b.status == "FAILED" and not sw.does_not_fit(b):
                print(f"error: batch {res.net.batch}: backend {b.name} failed: {b.reason}", file=sys.stderr)
    stayed = f"; what was written into {out} before stays there too" if keeper.written_before_failing else ""
    args.said = {"sweep": None if keeper.error else str(path), "net": base.net.name, "batches": batches,
                 "crossover": crossover(comparisons(done)),
                 "answers": [dataclasses.asdict(answer.as_data(res)) for res in done]}
    unwritten([keeper.problem("into --out", "sweep", f" (`compare report {keeper.folder}` renders it{stayed})")])
    return sw.exit_code(done)


def cmd_weights(args) -> int:
    if Path(args.net).suffix.lower() in SUFFIXES:   # a model file carries its own weights: none are seeded for it
        raise UserError(f"--net {args.net} is a model file: `compare weights` writes the seeded weights of a built-in "
                        f"net ({', '.join(nets.NETS)}); a model file's weights are its own, read with it")
    net = nets.get_net(args.net)
    check_writable(args.out, "--out", room=net.params() * 4 + 2**16)
    weights = init_weights(net, args.seed)
    kept = keep_file(args.out, lambda tmp: save_weights(tmp, weights), "--out", "weights")
    unwritten([kept.problem])
    if args.json:
        from .machine import emit
        emit("weights", {"net": net.name, "seed": args.seed, "out": args.out, "arrays": len(weights),
                         "params": net.params()})
        return 0
    print(f"wrote {len(weights)} arrays ({net.params():,} parameters) of {net.name}, seed {args.seed}, to {args.out}")
    return 0


def cmd_nets(args) -> int:
    if args.json:
        from .machine import emit
        emit("nets", {"nets": [{"name": n.name, "default_batch": n.default_batch, "input_shape": list(n.input_shape),
                                "layers": len(n.layers), "params": n.params(), "gflop_per_image": n.flops(1) / 1e9,
                                "description": n.description} for n in nets.NETS.values()]})
        return 0
    rows = [[n.name, n.default_batch, "x".join(map(str, n.input_shape)), len(n.layers), f"{n.params():,}",
             f"{n.flops(1) / 1e9:.3f}", n.description] for n in nets.NETS.values()]
    print(fit_table(rows, ["net", "batch", "input", "layers", "params", "GFLOP/image", "description"]))
    return 0


def _backend_rows() -> list[dict]:
    rows = []
    for name in backends.names():
        reason = backends.unavailable_reason(name)
        cls = backends.backend_class(name) if not (reason or "").startswith("cannot import") else None
        rows.append({"name": name, "status": "available" if reason is None else "unavailable",
                     "family": str(cls.family) if cls else None, "summary": cls.summary if cls else None,
                     "reason": reason})
    return rows


def cmd_backends(args) -> int:
    rows = _backend_rows()
    if args.json:
        from .machine import emit
        emit("backends", {"backends": rows})
        return 0
    print(fit_table([[r["name"], r["status"], r["reason"] or r["summary"] or ""] for r in rows],
                    ["backend", "status", "what it is / why not"]))
    return 0


def cmd_devices(args) -> int:
    from backends.opencl.runtime import all_devices, device_info, select_device
    chosen = select_device(args.device)
    found = []
    for index, _plat, dev in all_devices():
        info = device_info(dev)
        found.append({"index": index, "default": dev.int_ptr == chosen.int_ptr, **info})
    if args.json:
        from .machine import emit
        emit("devices", {"devices": found})
        return 0
    # the driver's version and the work-group limit are in --json: here the columns a choice rests on
    rows = [["*" if d["default"] else "", d["index"], d["name"], d["platform"], d["type"],
             " ".join(d["opencl"].split()[:2]), d["compute_units"], f"{d['global_mem_bytes'] / 2**20:.0f}",
             f"{d['max_alloc_bytes'] / 2**20:.0f}"] for d in found]
    print(fit_table(rows, ["", "index", "device", "platform", "type", "OpenCL", "CUs", "memory MiB",
                           "max alloc MiB"]))
    print("\n* the device used by default (choose another with --device INDEX|NAME or PYOPENCL_CTX)")
    return 0


def cmd_peak(args) -> int:
    from backends.opencl.peak import measure_peak
    from backends.opencl.runtime import get_runtime

    from .peak import cache_path, store
    if not 0 < args.cap_s < float("inf"):
        raise UserError(f"--cap-s must be a positive number of seconds, not {args.cap_s}")
    check_writable(cache_path(), "the peak cache")
    rt = get_runtime(args.device)
    progress = Progress()
    progress.until(progress.now() + args.cap_s)   # the time left: the cap's, at most
    try:
        peak = measure_peak(rt, progress.update, args.cap_s)
    finally:
        progress.done()
    kept = store(rt.info, peak)
    if args.json:
        from .machine import emit
        emit("peak", {"device": rt.info, "peak": peak, "cached": None if kept.problem else str(cache_path())})
        unwritten([kept.problem])
        return 0
    d = peak["details"]
    print(f"{rt.info['name']} ({rt.info['platform']}, {rt.info['compute_units']} compute units)")
    print(f"  multiply-add: {peak['gflops']:.1f} GFLOP/s (float4 {d['float4_gflops']:.1f}, "
          f"float8 {d['float8_gflops']:.1f})")
    print(f"  bandwidth:    {peak['bandwidth_gbs']:.1f} GB/s (copy kernel {d['copy_kernel_gbs']:.1f}, "
          f"buffer copy {d['enqueue_copy_gbs']:.1f}; bytes read + written)")
    print(f"  timed by {d['timer']}, in {d['seconds']:.0f} s" + (f"; {d['capped']}" if d.get("capped") else ""))
    if kept.problem is None:
        print(f"cached in {cache_path()} for `compare run`")
    unwritten([kept.problem])
    return 0


def cmd_report(args) -> int:
    from .report import REPORT_NAMES, REPORT_ROOM, render_report
    from .sweep import is_sweep, load_sweep
    baseline_names(args.baseline)   # an empty one, before the files are read
    check_apart([Output("--out", args.out, REPORT_NAMES)], [("results file", p) for p in args.files])
    check_writable(args.out, "--out", folder=True, room=REPORT_ROOM)
    results, paths, sweeps = [], [], []
    for p in _once(args.files):
        if is_sweep(p):
            sweeps.append(load_sweep(p))
        else:
            results.append(load_results(p))
            paths.append(p)
    runs = results + [r for s in sweeps for r in s.results]
    # a name of the files' backends counts too: they may come from another version of this tool
    baselines = parse_baselines(args.baseline, known=set(backends.names()) | {b.name for r in runs for b in r.backends})
    try:
        written = render_report(results, paths, args.out, published=args.published,
                                baselines=baselines, sweeps=sweeps)
    except OSError as exc:   # nothing measured is lost: the report is rendered again from the same files
        raise UserError(f"cannot write the report into --out {args.out} ({exc.strerror or exc}): nothing of it was "
                        f"written there; free some room and run `compare report` again") from None
    from .report.pagecheck import check_folder
    pages, images, problems = check_folder(args.out)
    with _human(not args.json):
        if not args.quiet:
            for path in written:
                print(f"wrote {path}")
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{args.out}: {pages} pages and {images} images checked, "
              + (f"{len(problems)} problems" if problems else "every link and image there"))
    if args.json:
        from .machine import emit, report_payload
        emit("report", report_payload(args.out, written, pages, images, problems, results, paths))
    return 1 if problems else 0


def cmd_answer(args) -> int:
    from tabulate import tabulate

    from .report.answer import TABLE_NOTE, answer_tables, as_data, heading, lines
    from .names import for_markdown, for_terminal
    results = [load_results(p) for p in _once(args.files)]
    for p, r in zip(args.files, results):
        if not timed(r):
            raise UserError(f"results file {p} times no backend (mode {r.mode!r}; "
                            f"{', '.join(sorted({b.status for b in r.backends}))}): nothing to answer; "
                            f"`compare run` times them")
    if not args.json:   # names are data: escaped for where they are shown (compare/names.py)
        results = [(for_markdown if args.markdown else for_terminal)(r) for r in results]
    if args.json:
        from .machine import emit
        emit("answer", {"files": [{"file": p, **dataclasses.asdict(as_data(r))} for p, r in zip(args.files, results)]})
    elif args.markdown:   # the README's tables
        from .report.document import _cell   # a '|' of a name would split its cell
        blocks = [f"**{device}**\n\n" + tabulate([[_cell(c) for c in r] for r in rows], headers=headers,
                                                 tablefmt="github", disable_numparse=True)
                  for device, headers, rows in answer_tables(results)]
        print("\n\n".join(blocks))
    elif args.table:
        for device, headers, rows in answer_tables(results):
            print(f"{device}\n" + fit_table([[c.replace("`", "") for c in r] for r in rows], headers) + "\n")
        print(wrap(TABLE_NOTE))
    else:
        for r in results:
            said = lines(r)
            if said:
                print("\n".join([heading(r)] + [wrap("- " + line, indent="  ") for line in said]))
    return 0


def _once(files: list[str]) -> list[str]:
    """The files given, each once (one file given twice would be counted twice)."""
    seen: dict[Path, str] = {}
    for p in files:
        key = Path(os.path.realpath(p))   # never raises: a loop of links is load_results's to name
        if key in seen:
            raise UserError(f"{p} is given twice (also as {seen[key]}): give each results file or sweep once")
        seen[key] = p
    return list(files)


# -- parser -----------------------------------------------------------------

def _add_net_options(p) -> None:
    """What every command that runs a net takes: the net, the backends, where they run and with what weights."""
    p.add_argument("--net", required=True, help="a built-in net (`compare nets` lists them), or a model file: "
                   "Keras (.keras, .h5) or ONNX (.onnx)")
    p.add_argument("--backends", default="all", help="'all' or a comma-separated list (see `compare backends`)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the generated weights and input (default 0)")
    p.add_argument("--weights", help="a .npz weights file (see `compare weights`) instead of seeded weights")
    add_device_option(p)
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
    add_device_option(p)
    p.add_argument("--cap-s", type=bounds.CAP_S, default=30.0, help="time for the whole measurement, in seconds (default 30)")
    _add_json_option(p, "the device, its peak and bandwidth, and where they were cached")
    p.set_defaults(func=cmd_peak)

    add_tune_parser(sub)
    add_diff_parser(sub)

    p = sub.add_parser("weights", help="write a net's seeded weights as a .npz file")
    p.add_argument("--net", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=seed_arg, default=0)
    _add_json_option(p, "the file written, its arrays and parameters")
    p.set_defaults(func=cmd_weights)

    p = sub.add_parser("devices", help="list the OpenCL platforms and devices")
    add_device_option(p, help="show which device this selection picks")
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
