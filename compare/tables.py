"""Plain-text tables of one run, printed by `compare run` and `compare check`,
and the number formats every table shares."""
from __future__ import annotations

from . import analysis as an
from .results import BackendResult, RunResult, Samples
from .speedup import Speedup, figure, of_samples
from .terminal import table, wrap

DASH = "—"
# what a step's time is, by how it was measured (backends/base.py Step.how)
HOW = {"event": "kernel event",
       "markers": "routine span (includes host gaps between its kernels)",
       "wall": "host clock (includes dispatch)"}
KERNEL_COLUMN = ("device ms: the sum of the layer's steps, each a kernel's own profiling event, or for a library "
                 "routine (CLBlast, cuDNN) the span between markers around it, which includes host gaps between its "
                 "kernels; torch's per-layer spans include Python dispatch")

LAUNCHES_NOTE = ("launches: the kernels one pass enqueues; 'N + M calls': M CLBlast routine calls beside N kernels of "
                 "ours; '1 replay of N': the pass recorded once as a command buffer of N kernels")


def fmt_ms(value: Samples | float | None, digits: int = 3) -> str:
    ms = value.median if isinstance(value, Samples) else value
    if ms is None:
        return DASH
    return f"{ms:.{digits}f}" if ms < 1000 else f"{ms:.1f}"


def fmt_ratio(x) -> str:
    return DASH if x is None else f"{figure(x)}x"


def fmt_speedup(s: Speedup | None) -> str:
    """A speedup with its 95% interval and what the interval does not allow (compare/speedup.py)."""
    return DASH if s is None else s.text()


def fmt_err(x) -> str:
    return DASH if x is None else f"{x:.1e}"


def fmt_num(x) -> str:
    return DASH if x is None else f"{x:.2f}"


def fmt_pct(x) -> str:
    return DASH if x is None else f"{x:.1f}"


def reason_line(b) -> str:
    """The first line of why a backend did not run (empty when it did)."""
    return b.reason.splitlines()[0] if b.reason else ""


def _steps_text(steps) -> str:
    return " + ".join(f"{s.name} {fmt_ms(s.ms)}" for s in steps) if len(steps) > 1 else ""


def layer_table(res: RunResult, b: BackendResult) -> str:
    """Per-layer times of one backend: wall, kernel, GFLOP/s, steps."""
    rows, fused = [], an.folded(b)
    for i, (spec, t) in enumerate(zip(res.net.layers, b.timing.layers)):
        if spec.name in fused:   # its work is in another layer's kernel: no rate of its own
            rate, steps = DASH, f"folded {fused[spec.name][1].split(' (')[0]}" + (
                f"; {_steps_text(t.steps) or t.steps[0].name}" if t.steps else "")
        else:
            rate, steps = fmt_num(an.gflops(spec.flops, an.layer_ms(b, i))), _steps_text(t.steps)
        rows.append([spec.name, spec.kind, f"{spec.flops / 1e6:.1f}", fmt_ms(t.wall), fmt_ms(t.kernel), rate, steps])
    e2e = b.timing.end_to_end
    flops = res.net.flops
    rows.append(["sum of layers", "", f"{flops / 1e6:.1f}", fmt_ms(an.layers_ms(b)), "",
                 fmt_num(an.gflops(flops, an.layers_ms(b))), ""])
    rows.append(["end to end", "", "", fmt_ms(e2e.total), "", fmt_num(an.gflops(flops, an.compute_ms(b))),
                 f"upload {fmt_ms(e2e.upload)} + compute {fmt_ms(e2e.compute)} + download {fmt_ms(e2e.download)}"])
    # the overhead (wall - device) is the report's table 6.2: here the columns it is made of
    headers = ["layer", "kind", "MFLOP", "wall ms", "device ms", "GFLOP/s", "steps (median ms)"]
    return table(rows, headers) + "\n" + wrap(f"({KERNEL_COLUMN})")


def speedup_cell(res: RunResult, b: BackendResult, ref: BackendResult | None, s: Speedup | None) -> str:
    """b's cell in a column of speedups over `ref`: the figure, or why there is none."""
    why = an.untrusted_why(res, b)
    if why:
        return f"{DASH} ({why})"
    if ref is not None and b.name == ref.name:
        return "1.00x (reference)"
    return fmt_speedup(s)


def summary_table(res: RunResult, baselines=an.DEFAULT_BASELINES) -> str:
    """One row per backend: status (its check's verdict where it ran), headline time, and its end-to-end
    speedup over each baseline with the 95% interval (only between backends whose output passed)."""
    tokens = an.baselines(res, baselines)
    rows = []
    for b in res.backends:
        ms = an.compute_ms(b)
        cells = [speedup_cell(res, b, an.reference(res, t), an.speedup(an.reference(res, t), b)) if ms is not None
                 else DASH for t in tokens]
        # the check's verdict stands for OK (a backend that ran); the sum of its layers is in its layer table
        status = b.check.status if b.ok and b.check else b.status
        launches = DASH if b.launches is None else b.launches.text()
        rows.append([b.label, status, fmt_ms(ms), fmt_num(an.gflops(res.net.flops, ms)), launches, *cells])
    # CLBlast at its best's own row says "(reference)": its name need not widen the header
    headers = ["backend", "status", "compute ms", "GFLOP/s", "launches",
               *["vs CLBlast at its best" if t == an.BEST_CLBLAST else f"vs {an.reference_label(res, t)}"
                 for t in tokens]]
    # why a backend did not run, under the table: a sentence in a column would make every row tall
    why = [wrap(f"{b.name}: {reason_line(b)}", indent="  ") for b in res.backends if reason_line(b)]
    note = an.unchecked_note(res)
    counted = [wrap(f"({LAUNCHES_NOTE})")] if any(b.launches for b in res.backends) else []
    return "\n".join([table(rows, headers)] + why + counted + ([wrap(f"({note})")] if note else []))


def worst_layer(b: BackendResult):
    layers = [c for c in b.check.layers if c.rel_l2 is not None] if b.check else []
    return max(layers, key=lambda c: c.rel_l2, default=None)


def check_table(res: RunResult) -> str:
    """Correctness per backend: end-to-end error, worst layer, top-1 agreement."""
    rows = []
    for b in res.backends:
        if not b.ok or not b.check:
            rows.append([b.name, b.status, DASH, DASH, DASH, DASH, reason_line(b)])
            continue
        end = b.check.end_to_end
        worst = worst_layer(b)
        rows.append([b.label, b.check.status, fmt_err(end.rel_l2), fmt_err(end.max_abs),
                     f"{worst.name} {fmt_err(worst.rel_l2)}" if worst else DASH,
                     DASH if end.top1 is None else f"{end.top1 * 100:.0f}%", end.note or ""])
    headers = ["backend", "check", "rel L2", "max abs", "worst layer (rel L2)", "top-1 agree", "note"]
    return table(rows, headers)


def modes_rows(res: RunResult):
    """Every mode of the backends that have several (a peer: eager, graph replay,
    XLA...) as (headers, rows); the fastest is the one every other table uses."""
    rows = [[b.name, m.name, m.status, fmt_ms(m.compute), _used_over(b, m) if b.passed else DASH, fmt_err(m.rel_l2),
             "used (fastest)" if m.name == b.mode else reason_line(m)]
            for b in res.backends for m in b.modes]
    headers = ["backend", "mode", "status", "compute ms", "used mode's speedup over it", "rel L2", "note"]
    return (headers, rows) if rows else None


def _used_over(b: BackendResult, m) -> str:
    """How much faster the mode in use was than mode `m`, with its interval (CLBlast tuned
    against its database, say).  The modes are timed in turn, one pass of each (runner.py);
    earlier versions timed them one after the other (a run's notes say which)."""
    used = next((u for u in b.modes if u.name == b.mode), None)
    if used is None or m is used or m.status != "OK":   # a mode that failed its check is in no ratio
        return DASH
    return fmt_speedup(of_samples(m.compute, used.compute))


def modes_table(res: RunResult) -> str | None:
    found = modes_rows(res)
    return table(found[1], found[0]) if found else None
