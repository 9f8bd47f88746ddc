"""`compare report`: Markdown and HTML reports with PNG plots, rendered from
results files only, so runs from several machines merge into one report;
batch sweeps (compare/sweep.py) and a roofline per net and device after them."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .. import analysis as an
from .. import names as escapes
from ..timing import BLOCK_MS
from . import kinds
from . import answer
from . import plots
from . import tables as report_tables
from . import roofline
from . import sweeps as sr
from .document import Document
from ..files import staged_folder
from ..modes import times
from .published import SOURCE
from ..results import RunResult
from ..speedup import SPANS_1X
from ..sweep import LoadedSweep
from ..tables import KERNEL_COLUMN, modes_rows


LAUNCHES_CAPTION = ("launches/pass: the kernels one forward pass enqueues, counted while an untimed pass ran; "
                    "'1 replay of N': the pass recorded once as a command buffer (cl_khr_command_buffer) of N "
                    "kernels and enqueued whole; 'N + M calls': N kernels of ours and M CLBlast routine calls, "
                    "each enqueuing kernels of CLBlast's own, not counted; tinygrad: the kernels its replayed "
                    "TinyJit enqueues; — where the backend's dispatch is not seen (PyTorch, TensorFlow, OpenCV, "
                    "numpy) or the results file is older than the count.")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40]


def _file_page(doc: Document, res: RunResult, path: str, out_dir: Path, stem: str, published: bool,
               baselines) -> list[str]:
    """One results file's page: every table and plot of it (the report's index links to it)."""
    net = res.net
    unchecked = an.unchecked_note(res)
    if unchecked:
        doc.para(f"**{unchecked}**")
    doc.bullets(answer.lines(res))
    doc.para(f"From `{path}`. {net.flops / 1e9:.3f} GFLOP per forward pass, {net.params or 0:,} parameters. "
             f"Times are medians of {res.settings.repeats} runs in milliseconds{_per_sample(res)}; per-layer "
             f"times are wall "
             f"time around each layer with a sync after it, 'end to end (compute)' is the whole pass without "
             f"per-layer syncs and without host<->device transfers.")
    doc.table(report_tables.environment_table(res))
    depth = answer.depth_rows(res)
    if depth:
        doc.heading("How far each contender was tuned")
        doc.table(depth, caption="The short label the answer gives beside each name, and in full what the results "
                                 "file records of the tuning or search behind its figures.")
    written = []

    if times(res.mode):
        doc.heading("Per-layer times (ms)")
        caption = f"Columns marked '{SOURCE}' are the study's Mali-T628 figures, not ours." if published else None
        doc.table(report_tables.times_table(res, published), caption=caption)
        doc.heading("End-to-end times: median and tail (ms)")
        doc.table(report_tables.spread_table(res),
                  caption="The whole pass without per-layer syncs and without transfers, over the timed repeats: "
                          "p50 (the median every ratio uses), p90, p99 (numpy's linear percentiles: with fewer "
                          "than 100 repeats p99 lies between the two slowest), the fastest and slowest, and the "
                          "spread: the interquartile range as a % of the median.")
        subsample = an.subsample_note(res)
        if subsample:
            doc.para(subsample)
        for token in an.baselines(res, baselines):
            table = report_tables.speedup_table(res, token)
            if table:
                label = an.reference_label(res, token)
                doc.heading(f"Speedup over {label}")
                doc.table(table, caption=f"{label}'s time divided by each backend's: above 1x is faster. In brackets "
                                         f"the 95% bootstrap interval of the ratio; {SPANS_1X}.")
        by_kind = kinds.kind_table(res)
        if by_kind and len(by_kind.categories) > 1:   # one kind of layer would only repeat the sum
            doc.heading("By kind of layer: where CLBlast wins")
            doc.table(report_tables.kind_table(by_kind), caption="Each backend's time on each kind of layer (the sum over those layers, "
                                        "median of the per-pass sums) and CLBlast at its best's time there divided "
                                        "by it, with the 95% interval; CLBlast at its best is, per kind, the CLBlast "
                                        "backend fastest on it (last row).")
            for line in kinds.verdicts(by_kind):
                doc.para(line)
        util = report_tables.utilisation_table(res)
        if util:
            doc.heading("Device utilisation (% of peak)")
            doc.para(f"Achieved GFLOP/s over the device's peak of {res.peak.gflops:.1f} GFLOP/s, {res.peak.source}. "
                     f"Backends that do not run on this device are left out.")
            doc.table(util)
        modes = modes_rows(res)
        if modes:
            doc.heading("Modes of the backends that have several")
            doc.table(modes, caption="Each mode checked and timed end to end; the fastest is the one every "
                                     "other table uses, named beside the backend.  Its speedup over each other mode "
                                     "has the 95% interval.  The modes are timed in turn, one pass of each after "
                                     "an untimed one of its own (earlier versions timed them one after "
                                     "the other); where only one mode could run, it is not timed here.")
        doc.heading("Transfers and one-off costs")
        doc.table(report_tables.transfers_table(res), caption="Times in ms; memory: device memory the backend holds "
                                                   "(weights and buffers).  " + LAUNCHES_CAPTION)

    doc.heading("Correctness against the float64 oracle")
    doc.table(report_tables.correctness_table(res),
              caption="rel L2 = ||out - ref|| / ||ref|| end to end; each layer is also checked alone on the "
                      "oracle's input (worst layer shown).")

    if times(res.mode):
        for b in an.timed(res):
            tables = [("The composition chosen per layer, measured at prepare", report_tables.choices_table(res, b)),
                      ("Wall, kernel and overhead (as the study's table 6.2)", report_tables.wall_kernel_table(res, b)),
                      ("Steps of each layer (as the study's table 5.3)", report_tables.steps_table(res, b)),
                      ("Matrix products against the infrastructure around them (as the study's table 7.3)",
                       report_tables.useful_time_table(res, b)),
                      ("CLBlast's tuning behind these figures, per problem (best device time of the routine, ms, "
                       "after the configurations tried so far; the verified choice against CLBlast's database, "
                       "median wall ms)", report_tables.tuning_progress_table(b))]
            if not any(t for _, t in tables) and not b.config:
                continue
            tables[1] = (tables[1][0] + f" ({KERNEL_COLUMN})", tables[1][1])
            doc.heading(f"Backend {b.label}")
            for caption, table in tables:
                if table:
                    doc.para(caption + ":")
                    doc.table(table)
            if b.config:
                doc.para("Choices made at prepare (recorded in the results):")
                doc.code(json.dumps(b.config, indent=None, sort_keys=True)[:4000])

        doc.heading("Plots")
        for kind, draw in (("times", plots.layer_times), ("speedups", lambda r, p: plots.speedups(r, p, baselines)),
                           ("utilisation", plots.utilisation)):
            name = f"{stem}-{kind}.png"
            if draw(res, out_dir / name):
                doc.image(name, f"{net.name} {kind}")
                written.append(name)
    return written


def _sweep_page(doc: Document, loaded: LoadedSweep, out_dir: Path, stem: str) -> list[str]:
    sweep, runs = loaded.sweep, sorted(loaded.results, key=lambda r: r.net.batch)
    batches = [r.net.batch for r in runs]
    doc.para(f"From `{loaded.path}` and the {len(runs)} results files it names, one per batch "
             f"({', '.join(map(str, batches))}); made by `{sweep.command}`. Time per image is the end-to-end compute "
             f"median (the whole pass without per-layer syncs and without host<->device transfers, "
             f"{runs[0].settings.repeats} timed runs) over the batch.")
    for note in sr.notes(runs):
        doc.para(note)
    written = []
    doc.heading("Time per image (ms)")
    doc.table(sr.per_image_table(runs), caption="'does not fit': a buffer of that backend would exceed the "
                                                "device's MAX_MEM_ALLOC_SIZE at that batch.")
    name = f"{stem}-per-image.png"
    if plots.per_image(sr.per_image_series(runs), out_dir / name,
                       f"{sweep.net}: time per image against batch\n{sweep.device}"):
        doc.image(name, f"{sweep.net} time per image against batch")
        written.append(name)
    comps = sr.comparisons(runs)
    doc.heading("The best hand-written backend against CLBlast at its best")
    doc.table(sr.speedup_table(runs), caption="Speedup: CLBlast at its best's time divided by the best hand-written "
                                              "backend's (above 1x the hand-written one is faster); in brackets the "
                                              "95% bootstrap interval. A winner is named only where it excludes 1x.")
    doc.para(f"Where CLBlast catches up: {sr.crossover(comps)}")
    name = f"{stem}-speedup.png"
    if plots.speedup_vs_batch([c.batch for c in comps], [c.speedup for c in comps], out_dir / name, f"{sweep.net}: the best hand-written backend over CLBlast at its "
                                              f"best\n{sweep.device}"):
        doc.image(name, f"{sweep.net} speedup against batch")
        written.append(name)
    return written


def _roofline_sections(doc: Document, files: list[tuple[RunResult, str]], out_dir: Path) -> list[str]:
    """One roofline per net and device, over every results file of that pair
    (a sweep's batches included: a larger batch moves its layers to the right)."""
    groups: dict[tuple[str, str], list[tuple[RunResult, str]]] = {}
    seen = set()
    for res, path in files:
        if Path(path).resolve() not in seen:
            seen.add(Path(path).resolve())
            groups.setdefault((res.net.name, res.device.name), []).append((res, path))
    if not groups:
        return []
    doc.para("Each layer of each backend that runs on the device, as a point: its arithmetic intensity (the layer's "
             "FLOPs over the bytes it must at least move: input activations, weights and output activations, "
             "float32) and the GFLOP/s it reached (its FLOPs over its median wall time), under the roof "
             "min(peak, intensity x bandwidth) of the device's measured compute peak and memory bandwidth.")
    written = []
    for k, ((net, device), group) in enumerate(groups.items()):
        doc.heading(f"{net} on {device}")
        lines, why_not, unshaped = [], {}, []
        for res, path in group:
            why = roofline.missing(res)
            if why:
                why_not.setdefault(why, []).append(f"`{path}`")
                continue
            line = roofline.of(res)
            lines.append(line)
            if line.unshaped:
                unshaped.append(f"`{path}` ({', '.join(line.unshaped)})")
        if why_not:
            doc.para("No roofline from " + "; ".join(f"{', '.join(ps)}: {why}" for why, ps in why_not.items()) + ".")
        if unshaped:
            doc.para(f"Left out, as the results file records no layer shapes (a version-1 file): "
                     f"{'; '.join(unshaped)}.")
        name = f"roofline-{k}-{_slug(net)}-{_slug(device)}.png"
        if lines and plots.roofline(lines, out_dir / name, f"{net}: roofline per layer\n{device}"):
            doc.image(name, f"{net} roofline on {device}")
            written.append(name)
        doc.table(report_tables.roofline_table(lines),
                  caption="FLOP/byte: arithmetic intensity; roof: min(peak, intensity x bandwidth); each backend's "
                          "achieved GFLOP/s as a % of that roof.")
    return written


HEADLINE_CAPTION = ("End-to-end compute in ms (median: the whole pass without per-layer syncs and without "
                    "host<->device transfers), and CLBlast at its best's time (the fastest CLBlast backend of "
                    "that file) over each backend's: above 1x it is faster; in brackets the 95% bootstrap "
                    f"interval, {SPANS_1X}.")


REPORT_ROOM = 8 * 2**20   # about the largest report: Markdown, HTML and a few dozen plots
REPORT_NAMES = ("*.md", "*.html", "*.png")   # what it writes into its folder (checked against the files it reads)


def _page_stem(res: RunResult, taken: set[str]) -> str:
    stem, k = f"net-{_slug(res.net.name)}-b{res.net.batch}-{_slug(res.device.name)}", 1
    while stem in taken:   # the same net, batch and device twice (two runs): numbered
        k += 1
        stem = f"net-{_slug(res.net.name)}-b{res.net.batch}-{_slug(res.device.name)}-{k}"
    taken.add(stem)
    return stem


def _short_device(name: str) -> str:
    return name.split("-")[-1].strip()[:22] if name.startswith("pthread") else name[:22]


def _backends_table(results: list[RunResult]):
    """Each backend once: its side of the question and what it is (its summary from the files)."""
    seen: dict[str, list[str]] = {}
    for res in results + []:
        for b in res.backends:
            if b.name not in seen and b.summary:
                seen[b.name] = [b.name, b.family or "—", b.summary]
    return (["backend", "side", "what it is"], list(seen.values())) if seen else None


def _page(title: str) -> Document:
    """A page of the report, its first line a link back to the index."""
    doc = Document(title)
    doc.links([("the report's index", "report", "the answer, the summary figure, the headline and every page")])
    return doc


def render_report(results: list[RunResult], paths: list[str], out_dir: str, published: bool = False,
                  baselines=an.DEFAULT_BASELINES, sweeps: list[LoadedSweep] = ()) -> list[str]:
    """The report's index (report.md, report.html: the answer, one summary figure, the headline table and
    links) and a page per results file, per sweep and for the rooflines.  Rendered into a staging folder,
    then moved into `out_dir` all at once (compare/files.py): an interrupt leaves the old report whole.
    Every string of the files is shown escaped (compare/names.py): a name is data, never Markdown or HTML."""
    results = [escapes.for_markdown(r) for r in results]
    sweeps = [escapes.for_markdown(s) for s in sweeps]
    out = Path(out_dir)
    index = Document("clblast-compare report")
    index.para("Does CLBlast make a good neural-network engine on this device, or do hand-written kernels beat it? "
               "Every figure below is rendered from the results files listed; nothing is typed in by hand.")
    names: list[str] = []
    pages: list[tuple[str, str, str]] = []
    headline = report_tables.headline_table(results)
    with staged_folder(out) as stage:
        def write_page(doc: Document, stem: str) -> None:
            (stage / f"{stem}.md").write_text(doc.to_markdown(), encoding="utf-8")
            (stage / f"{stem}.html").write_text(doc.to_html(), encoding="utf-8")
            names.extend([f"{stem}.md", f"{stem}.html"])

        said = [r for r in results if answer.lines(r)]
        if said:
            index.heading("The answer")
            for r in said:
                index.para(f"**{answer.heading(r)}**")
                index.bullets(answer.lines(r))
        groups = [(f"{r.net.name} b{r.net.batch}\n{_short_device(r.device.name)}", answer.contenders(r))
                  for r in results]
        if plots.summary(groups, stage / "summary.png", "Each side's fastest backend against CLBlast at its best"):
            index.image("summary.png", "each side's fastest backend's speedup over CLBlast at its best")
            index.para("Each bar: the fastest backend of one side (hand-written, the search compiler, the library engine, "
                       "the peers) "
                       "over CLBlast at its best in the same run, with its 95% interval; only outputs that passed "
                       "the check against the float64 oracle.")
            names.append("summary.png")
        if headline is not None:
            index.heading("Headline")
            index.table(headline, caption=HEADLINE_CAPTION)
        taken: set[str] = set()
        by_net: dict[str, list[RunResult]] = {}
        for res, path in zip(results, paths):
            stem = _page_stem(res, taken)
            title = f"{res.net.name} batch {res.net.batch} on {res.device.name}"
            doc = _page(title)
            names.extend(_file_page(doc, res, path, stage, stem, published, baselines))
            write_page(doc, stem)
            pages.append((title, stem, "per-layer times and speedups, kinds of layer, utilisation, modes, "
                                       "correctness, each backend's choices"))
            by_net.setdefault(res.net.name, []).append(res)
        for loaded in sweeps:
            stem = f"sweep-{_slug(loaded.sweep.net)}-{_slug(loaded.sweep.device)}"
            while stem in taken:
                stem += "-2"
            taken.add(stem)
            doc = _page(f"Batch sweep: {loaded.sweep.net} on {loaded.sweep.device}")
            names.extend(_sweep_page(doc, loaded, stage, stem))
            write_page(doc, stem)
            pages.append((f"batch sweep of {loaded.sweep.net} on {loaded.sweep.device}", stem,
                          f"where CLBlast catches up: {sr.crossover(sr.comparisons(loaded.results))}"))
        every = list(zip(results, paths)) + [pair for s in sweeps for pair in zip(s.results, s.paths)]
        rooflines = _page("Rooflines")
        roof_files = _roofline_sections(rooflines, every, stage)
        if len(rooflines.blocks) > 1:
            names.extend(roof_files)
            write_page(rooflines, "rooflines")
            pages.append(("rooflines", "rooflines", "each layer of each backend under the device's roof"))
        index.heading("Pages")
        index.links(pages)
        for net_name, group in by_net.items():
            if len(group) > 1:
                index.heading(f"{net_name} across devices and runs", 3)
                index.table(report_tables.cross_device_table(group, baselines[0]),
                            caption=f"End-to-end compute ms per results file (speedup over {baselines[0]} there).")
        index.heading("Backends")
        index.table(_backends_table(results + [r for s in sweeps for r in s.results]))
        index.heading("Results files")
        index.para(", ".join(f"`{p}`" for p in paths + [s.path for s in sweeps]))
        (stage / "report.md").write_text(index.to_markdown(), encoding="utf-8")
        (stage / "report.html").write_text(index.to_html(), encoding="utf-8")
        if headline is not None:   # the table alone, to paste into a README
            alone = Document("Headline")
            alone.para("Rendered by `compare report` from " + ", ".join(f"`{p}`" for p in paths) + ".")
            alone.table(headline, caption=HEADLINE_CAPTION)
            (stage / "headline.md").write_text(alone.to_markdown(), encoding="utf-8")
            names.append("headline.md")
    return [str(out / "report.md"), str(out / "report.html")] + [str(out / n) for n in names]


def _per_sample(res) -> str:
    """How many passes back to back each end-to-end sample averaged (compare/timing.py), where any took more
    than one: ', each end-to-end run the mean of 2-8 passes back to back'."""
    counts = sorted({b.timing.passes_per_sample for b in res.backends if b.timing is not None})
    if not counts or counts == [1]:
        return ""
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f", each end-to-end run the mean of {span} passes back to back (as many as add up to {BLOCK_MS:g} ms)"
