"""The study's table 7.2 on this device: every VGG-16 conv layer on `clblast`,
`baseline` and `vectorised` in one process, with the ratios clblast/baseline
and clblast/vectorised, then LeNet-5's totals for the three (the study's
table 6.2 comparison).

    .venv/bin/python benchmarks/table_7_2.py [--repeats 3] [--device 0:0] [--nets vgg16,lenet]

Per net, every backend is prepared first; then warm-up passes, then the
timed repeats run round-robin (clblast, baseline, vectorised, clblast, ...)
so that a noisy machine disturbs all three alike.  Times are medians of the
repeats: per layer the host wall clock around the layer's enqueue + finish
(`run_timed()`, as the study compared wall times), and end to end one
`run()` with no syncs between layers.  Each backend's output is checked
against the float64 oracle first.  A backend that cannot import or prepare
is printed as UNAVAILABLE / FAILED with its reason and the others still run.

Reference columns: the study's Mali-T628 ratios (Rovder 2018, table 7.2 in
seconds: CLBlast, baseline, vectorised; table 6.2 for LeNet).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tabulate import tabulate

import backends
from compare import oracle
from compare.checking import compare_arrays
from compare.report.published import FIGURES
from nets.weights import init_weights, make_input
from nets import get_net

NAMES = ("clblast", "baseline", "vectorised")

# Rovder 2018, table 7.2 (seconds): CLBlast, our baseline, vectorisation
STUDY_7_2 = {
    "conv1_1": (0.87, 0.15, 0.07), "conv1_2": (1.36, 6.67, 0.51), "conv2_1": (0.89, 1.71, 0.28),
    "conv2_2": (1.26, 5.99, 0.55), "conv3_1": (0.80, 1.85, 0.28), "conv3_2": (1.12, 4.79, 0.57),
    "conv3_3": (1.12, 4.73, 0.57), "conv4_1": (0.77, 1.16, 0.32), "conv4_2": (1.05, 6.64, 1.01),
    "conv4_3": (1.05, 6.27, 1.01), "conv5_1": (1.95, 0.61, 0.33), "conv5_2": (1.95, 0.62, 0.34),
    "conv5_3": (1.95, 0.62, 0.33), "total": (16.14, 41.81, 6.16),
}
# Rovder 2018, table 6.2 (ms): LeNet-5 batch 100 totals, CLBlast and baseline wall time
STUDY_6_2 = {name: sum(FIGURES["lenet"][name].values()) for name in ("clblast", "baseline")}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def prepare_all(net, batch, weights, x, ref, runtime, warmup):
    """name -> PreparedNet, or name -> 'UNAVAILABLE: ...' / 'FAILED: ...'."""
    out = {}
    for name in NAMES:
        reason = backends.unavailable_reason(name)
        if reason:
            out[name] = f"UNAVAILABLE: {reason}"
            continue
        try:
            log(f"{net.name}: preparing {name}")
            prepared = backends.create(backends.backend_class(name), runtime).prepare(net, weights, batch)
            y = prepared.forward(x)
            for _ in range(max(warmup - 1, 0)):
                prepared.forward(x)
            check = compare_arrays(y, ref)
            if not check.passed:
                prepared.close()
                out[name] = f"FAILED: output differs from the oracle ({check})"
                continue
            out[name] = prepared
        except Exception as exc:   # noqa: BLE001 - one backend's failure must not stop the others
            out[name] = f"FAILED: {type(exc).__name__}: {exc}"
    return out


def time_round_robin(prepared: dict, x, repeats: int):
    """name -> (layer name -> median wall ms, median end-to-end ms)."""
    live = {n: p for n, p in prepared.items() if not isinstance(p, str)}
    per_layer = {n: [] for n in live}
    end_to_end = {n: [] for n in live}
    for p in live.values():
        p.load_input(x)
    for r in range(repeats):
        log(f"repeat {r + 1}/{repeats}")
        for name, p in live.items():
            per_layer[name].append({t.name: t.wall_ms for t in p.run_timed()})
            t0 = time.perf_counter()
            p.run()
            end_to_end[name].append((time.perf_counter() - t0) * 1e3)
    out = {}
    for name in live:
        layers = {layer: statistics.median(run[layer] for run in per_layer[name]) for layer in per_layer[name][0]}
        out[name] = (layers, statistics.median(end_to_end[name]))
    return out


def ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "—"


def ms(v) -> str:
    if v is None:
        return "—"
    return f"{v:.1f}" if v >= 10 else f"{v:.3f}"   # GPUs run layers in well under a millisecond


def status_lines(prepared: dict) -> list[str]:
    return [f"  {n}: {p}" for n, p in prepared.items() if isinstance(p, str)]


def vgg_table(times: dict, prepared: dict, net) -> str:
    def get(name, layer):
        return times[name][0][layer] if name in times else None

    convs = [layer.name for layer in net.layers if layer.kind == "conv"]
    rows = []
    for layer in convs:
        vals = [get(n, layer) for n in NAMES]
        study = STUDY_7_2[layer]
        vec = prepared.get("vectorised")
        local = vec.config["layers"][layer]["local"] if not isinstance(vec, str) and vec is not None else "—"
        rows.append([layer] + [ms(v) for v in vals]
                    + [ratio(vals[0], vals[1]), ratio(vals[0], vals[2]),
                       ratio(study[0], study[1]), ratio(study[0], study[2]), str(tuple(local)) if local != "—" else "—"])
    tot = [sum(times[n][0][layer] for layer in convs) if n in times else None for n in NAMES]
    study = STUDY_7_2["total"]
    rows.append(["total (conv)"] + [ms(v) for v in tot]
                + [ratio(tot[0], tot[1]), ratio(tot[0], tot[2]), ratio(study[0], study[1]), ratio(study[0], study[2]), ""])
    e2e = [times[n][1] if n in times else None for n in NAMES]
    rows.append(["whole net, end to end"] + [ms(v) for v in e2e] + [ratio(e2e[0], e2e[1]), ratio(e2e[0], e2e[2]),
                                                                     "", "", ""])
    headers = ["layer", "clblast ms", "baseline ms", "vectorised ms", "clblast/baseline", "clblast/vectorised",
               "study: clblast/baseline", "study: clblast/vectorised", "vectorised work-group"]
    return tabulate(rows, headers, disable_numparse=True, colalign=("left",) + ("right",) * 8)


def lenet_table(times: dict) -> str:
    rows = []
    for n in NAMES:
        if n not in times:
            rows.append([n, "—", "—", "—", "—"])
            continue
        layers, e2e = times[n]
        total = sum(layers.values())
        ref = times.get("clblast")
        rows.append([n, ms(total), ms(e2e), ratio(sum(ref[0].values()), total) if ref else "—",
                     ratio(ref[1], e2e) if ref else "—"])
    rows.append(["study (Mali-T628, table 6.2)", "", "", "", f"baseline {ratio(STUDY_6_2['clblast'], STUDY_6_2['baseline'])}"])
    return tabulate(rows, ["backend", "sum of layers ms", "end to end ms", "clblast/x (layers)", "clblast/x (end to end)"],
                    disable_numparse=True)


def bench(net_name: str, args, runtime) -> None:
    net = get_net(net_name)
    batch = net.default_batch
    weights = init_weights(net, args.seed)
    x = make_input(net, batch, args.seed)
    log(f"{net.name}: float64 reference")
    ref = oracle.forward(net, weights, x)[-1]
    prepared = prepare_all(net, batch, weights, x, ref, runtime, args.warmup)
    try:
        times = time_round_robin(prepared, x, args.repeats)
    finally:
        for p in prepared.values():
            if not isinstance(p, str):
                p.close()
    print(f"\n{net.name}, batch {batch}: median of {args.repeats} round-robin repeats, wall ms per layer")
    print(vgg_table(times, prepared, net) if net.name == "vgg16" else lenet_table(times))
    for line in status_lines(prepared):
        print(line)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nets", default="vgg16,lenet", help="comma-separated: vgg16, lenet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed passes per backend (the first is checked)")
    parser.add_argument("--device", default=None, help="OpenCL device: 'P:D' or a name fragment")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from backends.opencl.runtime import get_runtime
    runtime = get_runtime(args.device)   # resolved once: every backend runs on this one
    info = runtime.info
    print(f"device: {info['name']} ({info['platform']}, {info['driver']})")
    for net_name in [n.strip() for n in args.nets.split(",") if n.strip()]:
        bench(net_name, args, runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
