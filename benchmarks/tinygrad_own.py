"""tinygrad's own recipe against our `tinygrad` peer, on the same device with the same schedules.

The peer must run tinygrad at its best (DESIGN.md, the first principle): within 5% of how
tinygrad itself runs a model.  tinygrad's own recipe: the model as an ONNX file
(`tinygrad.nn.onnx.OnnxRunner`) inside one `TinyJit`, the input already on the device, one
call and one synchronize per pass.  Here the model is our net with our weights, written as
ONNX by the writer the `opencv` peer uses (so the output is checked against the same float64
oracle), and both sides run the schedules `compare tune --scope tinygrad` chose on this device
(seeded into a fresh tinygrad cache; a kernel not searched runs on tinygrad's heuristics on
both sides), so what differs is only how each runs tinygrad.  The peer runs in its `searched-onnx` mode by
default, the same ONNX recipe built by our code, where the net has an ONNX model.

The ways, each in a child process of its own:
- `own`: the recipe above, in a child set up as the peer's is (tinygrad_device.py: the
  device's OpenCL platform alone, a fresh cache seeded with the choices)
- `own-plain`: the same recipe in a child that sees every platform, as a user's process
  would (tinygrad takes the first platform: run it where that is the device's)
- `peer`: our peer's prepared net in its child, its `run()` per pass
- `peer-pass`: `peer` with timed_pass's input copy and output read between the calls (untimed)
- `peer-checked`: `peer` after what `compare run` does before its timed passes (the check)
- `peer-timed`: the peer as `compare run` times it: a sample the mean of a few passes back to back in one
  request to the child (`timed_passes`, compute; compare/timing.py)
- `peer-run`: each pass one request of `run()` alone, nothing sent either way (timed around the
  request, its round trip included): whether the request or the arrays it carries cost the pass
- `peer-checked-freed`, `peer-timed-freed`: `peer-checked` and `peer-timed` with tinygrad's cache of
  freed device buffers emptied before the timed passes (whether the driver's count of live buffers
  costs each enqueue)
- `peer-checked-gc`, `peer-timed-gc`: the same with Python's collector run and its heap frozen
  instead (whether collections over the heap the check or the build left cost each pass)
- `own-copies` (with `--interleave` only): `own` with the peer's copies around each timed call, untimed
  (benchmarks/tinygrad_turns.py)
- `own-pruned` (with `--interleave` only): `own` jitted and called as the peer is (`prune=True`, a context
  around each call)

Per way: the pass's wall time (call + synchronize, median), the host's enqueue time (the
call alone returning), the kernels' device time summed (each kernel waited for: profiling
events, one pass), the launches a pass makes, and the output's relative L2 error against the
float64 oracle.  Then each way's ratio to `own`, with its 95% interval; the peer is at its
best where its interval reaches 1.05 or below.

    .venv/bin/python benchmarks/tinygrad_own.py --nets resnet18 [--repeats 100] [--ways own,peer-timed] [--draws 3]
        [--interleave]

With `--interleave` (the ways `own`, `own-copies`, `own-pruned` and `peer-timed` alone), every process is prepared
first and held open, then one sample of each is taken in turn, round after round (benchmarks/tinygrad_turns.py): on
a host whose speed changes within seconds, a phase falls on both sides alike.  Each sample is the mean of passes back to
back by compare/timing.py's rule, own's as the peer's.

A line is printed as each way ends and each net's table once its ways are measured (a run cut short
keeps what it measured).

A net with no ONNX writer (Swin's windowed attention) is said, not measured.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import backends
from backends.host import plain_python_ms
from backends.isolated import Worker
from backends.opencl.runtime import get_runtime
from backends.peers.tinygrad_device import Child
from compare import oracle
from compare.checking import compare_arrays
from compare.speedup import Speedup
from nets import get_net
from nets.errors import Unsupported
from nets.weights import init_weights, make_input

import tinygrad_turns as turns   # a sibling: the benchmarks run as scripts

MODULE = __spec__.name if __spec__ else Path(__file__).stem   # how a child imports this file
AUTO = "auto"   # the peer's mode: the ONNX recipe where own runs, else the walk
WAYS = ("own", "own-plain", "peer", "peer-pass", "peer-checked", "peer-timed", "peer-run",
        "peer-checked-freed", "peer-checked-gc", "peer-timed-freed", "peer-timed-gc")


def _passes(call, sync, repeats: int, between=lambda: None) -> dict:
    """Wall and enqueue time per pass (ms lists), then one pass with every kernel waited for."""
    from tinygrad.runtime.ops_cl import CLProgram
    for _ in range(3):
        call()
        sync()
    wall, enqueue = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        enqueue.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
        between()
    kernels: list[tuple[str, float]] = []   # (name, device ms) of one pass, each kernel waited for
    real = CLProgram.__call__

    def waited(self, *args, **kw):
        kw["wait"] = True
        took = real(self, *args, **kw)
        kernels.append((_kernel_name(self.kernel), (took or 0.0) * 1e3))
        return took
    CLProgram.__call__ = waited
    try:
        call()
        sync()
    finally:
        CLProgram.__call__ = real
    return {"wall": wall, "enqueue": enqueue, "kernels_ms": sum(ms for _, ms in kernels), "launches": len(kernels),
            "kernels": kernels, "cpus": _thread_cpus(), "python_ms": plain_python_ms()}


def _thread_cpus() -> str:
    """Where this process's threads last ran (CPU per thread, from /proc) and the CPUs it may use: whether
    the pass's time follows where the scheduler put the Python thread and the driver's threads."""
    try:
        tasks = sorted(os.listdir("/proc/self/task"), key=int)
        last = []
        for t in tasks:
            with open(f"/proc/self/task/{t}/stat") as f:
                last.append(f.read().rsplit(")", 1)[1].split()[36])   # field 39, "processor"
        return f"threads on CPUs {','.join(last)} (main first) of {len(os.sched_getaffinity(0))} allowed"
    except OSError:
        return "-"


def _kernel_name(kernel) -> str:
    import ctypes
    from tinygrad.runtime.autogen import opencl as cl
    buf = ctypes.create_string_buffer(256)
    cl.clGetKernelInfo(kernel, cl.CL_KERNEL_FUNCTION_NAME, 256, buf, None)
    return buf.value.decode(errors="replace")


def _own_recipe(onnx_bytes: bytes, x: np.ndarray, device: str, width: int, repeats: int) -> dict:
    """In a child: tinygrad's own recipe on the ONNX model (see the module)."""
    from tinygrad import Device
    from tinygrad.helpers import Context
    jit, xt = turns.own_recipe(onnx_bytes, x, device, width)
    with Context(BEAM=width):
        got = _passes(lambda: jit(xt), Device[device].synchronize, repeats)
        got["output"] = jit(xt).numpy()
    return got


def own_in_peer_child(target, options, store, onnx_bytes, x, width, repeats) -> dict:
    """`own` in a child set up as the peer's: the device opened and the choices seeded by the peer's code."""
    from backends.peers.tinygrad_peer import TinygradInChild
    inside = TinygradInChild(target, options, store)
    return _own_recipe(onnx_bytes, x, inside.device.tinygrad, width, repeats)


def own_in_plain_child(store, onnx_bytes, x, width, repeats) -> dict:
    """`own-plain`: tinygrad's default CL device (the loader's first platform), the same choices seeded."""
    from backends.peers.tinygrad_beam import BeamHook, seed
    choices = store.load()
    seed(choices, "CL")
    BeamHook.install(set(choices.kernels))
    return _own_recipe(onnx_bytes, x, "CL", width, repeats)


def peer_in_child(target, options, store, net, weights, x, mode, repeats, way: str = "peer") -> dict:
    """The peer's prepared net in the child the peer's code sets up, its replayed pass per call (run() less
    its synchronize, which _passes makes apart).  `way`: "peer" alone; "peer-checked" after what
    `compare run` does before its timed passes (the check: a forward pass, each layer alone);
    "peer-pass" with timed_pass's output read and input copy between the calls (untimed)."""
    from backends.peers.tinygrad_peer import TinygradInChild
    inside = TinygradInChild(target, options, store)
    prepared = inside.prepare(net, weights, x.shape[0], mode)
    if way.startswith("peer-checked"):
        from compare import oracle as ref
        outs = ref.forward(net, weights, x)
        prepared.forward(x)
        for i in range(len(net.layers)):
            ins = [np.asarray(x if s < 0 else outs[s], np.float32) for s in net.sources(i)]
            prepared.run_layer(i, ins[0] if len(ins) == 1 else ins)
        prepared.load_input(x)
    settle(inside.device.tinygrad, way)

    def call():
        with prepared._context():
            prepared._y = prepared._jit(prepared._x)

    def around():
        prepared.fetch_output()
        prepared.load_input(x)
    prepared.load_input(x)
    got = _passes(call, prepared._sync, repeats, around if way == "peer-pass" else lambda: None)
    got["output"] = prepared.fetch_output()
    got["config"] = prepared.config.get("tinygrad_search") if way == "peer" else None
    return got


def settle(device: str, way: str) -> None:
    """In the child, before the timed passes: the `-freed` ways empty tinygrad's cache of freed device
    buffers (the allocator keeps them for reuse); the `-gc` ways collect and freeze Python's heap."""
    if way.endswith("-freed"):
        from tinygrad import Device
        Device[device].allocator.free_cache()
    elif way.endswith("-gc"):
        import gc
        gc.collect()
        gc.freeze()


def _in_child(device, fn: str, *args) -> dict:
    child = Child(device, f"tinygrad ({fn})", screen=True)   # screened as the peer's is: backends/screen.py
    try:
        return child.worker.call(MODULE, fn, child.target, *args)
    finally:
        child.close()


def _plain_child(fn: str, *args) -> dict:
    folder = tempfile.mkdtemp(prefix="tinygrad-plain-")
    worker = Worker(f"tinygrad ({fn})", env={"DEV": "CL", "CACHEDB": os.path.join(folder, "cache.db"),
                                            "BEAM": None, "JITBEAM": None, "CACHELEVEL": None}, screen=True)
    try:
        return worker.call(MODULE, fn, *args)
    finally:
        worker.close()
        shutil.rmtree(folder, ignore_errors=True)


def peer_timed(net, weights, x, mode, repeats, way: str = "peer-timed") -> dict:
    """`peer-timed`: the peer as `compare run` times a pass (timed_passes' compute, in the child, each value the
    mean of a sample's passes back to back; benchmarks/tinygrad_turns.py PeerTimed, alone in its turns).
    `peer-run`: the input loaded once, then each pass one request of `run()` alone (nothing sent either
    way), timed here around the request: its round trip included, none of the arrays' pickling."""
    def settle(prepared):   # the child's tinygrad device, where a -freed or -gc way settles it
        if way != "peer-timed":
            prepared._worker.call(MODULE, "settle", prepared.config["device"], way)
    if way != "peer-run":
        player = turns.PeerTimed(net, weights, x, mode, settle)
        try:
            wall = turns.in_turn([player], repeats)[0]
        except BaseException:
            player.finish()
            raise
        return {"wall": wall, "enqueue": [], "kernels_ms": None, "launches": None, "output": player.finish(),
                "python_ms": player.python_ms}
    backend = backends.get("tinygrad")
    prepared = backend.prepare(net, weights, x.shape[0], mode)
    try:
        settle(prepared)
        prepared.load_input(x)
        for _ in range(3):
            prepared.run()
        wall = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            prepared.run()
            wall.append((time.perf_counter() - t0) * 1e3)
        return {"wall": wall, "enqueue": [], "kernels_ms": None, "launches": None, "output": prepared.fetch_output(),
                "python_ms": (prepared.config or {}).get("plain_python_ms", float("nan"))}   # its child's draw
    finally:
        prepared.close()
        backend.close()


def measure(net_name: str, ways: list[str], repeats: int, mode: str, draws: int = 1,
            interleave: bool = False, gap_s: float = 0.0) -> list[dict]:
    from backends.peers.opencv_onnx import net_model
    from backends.peers.tinygrad_peer import ONNX, SEARCHED, width_of
    net = get_net(net_name)
    batch = net.default_batch
    weights = init_weights(net, 0)
    x = make_input(net, batch, 0)
    ref = oracle.forward(net, weights, x)[-1]
    rt = get_runtime()
    backend = backends.get("tinygrad")
    try:
        model = net_model(net, weights, batch)
    except Unsupported as exc:
        model = None
        print(f"{net_name}: tinygrad's own recipe not run: {exc}")
    if mode == AUTO:   # the peer on own's very recipe where there is one: what differs is only how each runs it
        mode = ONNX if model is not None else SEARCHED
        print(f"{net_name}: the peer in its {mode} mode", flush=True)
    store, options, width = backend.store(), backend.options, width_of(mode)
    # each draw a fresh child process (`compare run --draws` draws the peer's so: compare/draws.py); the ways
    # take turns, draw by draw, so a slow phase of the host (the H200 notes' step 19) falls on every way alike
    drawn: dict[str, list[dict]] = {way: [] for way in ways}
    if interleave:
        _in_turn(net, weights, x, ref, mode, model, (store, options, width), ways, repeats, draws, drawn, gap_s)
    else:
        for d in range(1, draws + 1):
            for way in ways:
                try:
                    if way == "own" and model is not None:
                        got = _in_child(rt.device, "own_in_peer_child", options, store, model, x, width, repeats)
                    elif way == "own-plain" and model is not None:
                        got = _plain_child("own_in_plain_child", store, model, x, width, repeats)
                    elif way in ("peer", "peer-pass") or way.startswith("peer-checked"):
                        got = _in_child(rt.device, "peer_in_child", options, store, net, weights, x, mode, repeats, way)
                    elif way.startswith("peer-timed") or way == "peer-run":
                        got = peer_timed(net, weights, x, mode, repeats, way)
                    else:
                        continue
                except Exception as exc:  # noqa: BLE001 - one way failing is a line of the table, not the end
                    print(_failed(net_name, way, exc))
                    continue
                _kept(drawn, net_name, way, ref, got, f" process {d} of {draws}" if draws > 1 else "")
    rows = []
    for way in ways:
        if drawn[way]:   # the fastest process that passed, as the runner keeps the peer's
            best = min(drawn[way], key=lambda r: (not r["passed"], statistics.median(r["wall"])))
            rows.append({**best, "drawn": [statistics.median(r["wall"]) for r in drawn[way]]})
    backend.close()
    return rows


def _failed(net_name: str, way: str, exc: Exception) -> str:
    """A way that failed, in one line of the table's run (its first line of error)."""
    return f"{net_name} {way}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _kept(drawn: dict, net_name: str, way: str, ref, got: dict, which: str) -> None:
    """A way's measurement checked against the oracle and kept among its draws, and its line printed at once
    (a run cut short keeps the ways it measured)."""
    check = compare_arrays(got.pop("output"), ref)
    error = check.rel_l2 if check.rel_l2 is not None else float("nan")
    drawn[way].append({"net": net_name, "way": way, "passed": check.passed, "error": error, **got})
    print(f"{net_name} {way}{which}: {'PASS' if check.passed else 'FAIL'}, wall {statistics.median(got['wall']):.3f} "
          f"ms (median of {len(got['wall'])}); plain Python {got.get('python_ms', float('nan')):.1f} ms; "
          f"{got.get('cpus', '-')}", flush=True)


def _in_turn(net, weights, x, ref, mode, model, setup, ways, repeats: int, draws: int, drawn: dict,
             gap_s: float = 0.0) -> None:
    """--interleave: every process of `ways` (own, peer-timed) prepared and held open, then their samples taken
    in turn (benchmarks/tinygrad_turns.py; `gap_s` asleep after each round), each process's kept in `drawn`."""
    store, options, width = setup
    players = []
    try:
        for d in range(1, draws + 1):
            for way in ways:
                try:
                    if way.startswith("own") and model is not None:
                        players.append((d, turns.Own(get_runtime().device, options, store, model, x, width, way)))
                    elif way == "peer-timed":
                        players.append((d, turns.PeerTimed(net, weights, x, mode)))
                except Exception as exc:  # noqa: BLE001 - one process failing is a line, not the end
                    print(_failed(net.name, way, exc))
        print(f"{net.name}: {len(players)} processes open, timed in turn, {repeats} samples each "
              f"({', '.join(f'{p.way} {p.per_sample}' for _, p in players)} passes a sample)"
              + (f", {gap_s * 1e3:g} ms asleep after each round" if gap_s else ""), flush=True)
        took = turns.in_turn([p for _, p in players], repeats, gap_s)
        while players:
            (d, player), wall = players.pop(0), took.pop(0)
            got = {"wall": wall, "enqueue": [], "kernels_ms": None, "launches": None, "output": player.finish(),
                   "python_ms": player.python_ms}
            _kept(drawn, net.name, player.way, ref, got, f" process {d} of {draws}" if draws > 1 else "")
    finally:   # an interrupt or a failure: every child still open stopped
        for _, player in players:
            try:
                player.finish()
            except Exception:  # noqa: BLE001 - stopping what is left; the failure is already on its way
                pass


def _print(rows: list[dict]) -> None:
    from tabulate import tabulate
    table = []
    for r in rows:
        own = next((o for o in rows if o["net"] == r["net"] and o["way"] == "own" and o["passed"]), None)
        ratio = Speedup.of(own["wall"], r["wall"]) if own and r["way"] != "own" and r["passed"] else None
        table.append([r["net"], r["way"], "PASS" if r["passed"] else "FAIL", f"{r['error']:.1e}",
                      f"{statistics.median(r['wall']):.3f}",
                      f"{statistics.median(r['enqueue']):.3f}" if r["enqueue"] else "-",
                      f"{r['kernels_ms']:.3f}" if r["kernels_ms"] is not None else "-",
                      r["launches"] if r["launches"] is not None else "-",
                      "" if ratio is None else f"{1 / ratio.value:.3f}x of own" + (
                          f" [{1 / ratio.interval[1]:.3f}, {1 / ratio.interval[0]:.3f}]" if ratio.interval else "")])
    print(tabulate(table, headers=["net", "way", "check", "rel L2", "wall ms", "enqueue ms", "kernels ms",
                                   "launches", "time against own (95%)"]))
    for r in rows:
        if len(r.get("drawn", ())) > 1:
            print(f"{r['net']} {r['way']}: the fastest of {len(r['drawn'])} processes "
                  f"({', '.join(f'{ms:.3f}' for ms in r['drawn'])} ms)")
        if r.get("config"):
            print(f"{r['net']} peer: {r['config']}")
        if r.get("kernels"):   # one pass's kernels, each waited for: where two ways' device times part
            print(f"{r['net']} {r['way']} kernels (device ms): " +
                  ", ".join(f"{name} {ms:.4f}" for name, ms in r["kernels"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nets", default="resnet18")
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--mode", default=AUTO,
                        help="the peer's mode (searched: BEAM=2 choices through our walk; searched-onnx: through "
                             "tinygrad's ONNX recipe; default auto: searched-onnx where the net has an ONNX model)")
    parser.add_argument("--draws", type=int, default=1,
                        help="each way in this many fresh processes, the ways taking turns, the fastest kept (as "
                             "`compare run --draws`)")
    parser.add_argument("--interleave", action="store_true",
                        help="own and peer-timed: every process prepared first, then their samples taken in turn "
                             "(benchmarks/tinygrad_turns.py), so a phase of the host falls on both alike")
    parser.add_argument("--gap-ms", type=float, default=0.0,
                        help="with --interleave: this long asleep after each round, as a process waits for the "
                             "other backends' samples in a `compare run --backends all` round (default 0)")
    args = parser.parse_args(argv)
    if not (args.gap_ms >= 0 and args.gap_ms < 60_000):
        parser.error(f"--gap-ms is a pause in milliseconds, 0 up to a minute, not {args.gap_ms:g}")
    if args.gap_ms and not args.interleave:
        parser.error("--gap-ms pauses between the rounds of --interleave: give --interleave too")
    if args.draws < 1:
        parser.error(f"--draws is a whole number of processes, 1 or more, not {args.draws}")
    others = sorted(set(args.ways.split(",")) - set(turns.WAYS))
    if args.interleave and others:
        parser.error(f"--interleave times {', '.join(turns.WAYS)} in turn, not {', '.join(others)}: "
                     f"leave those out, or --interleave")
    in_turn_only = sorted(set(args.ways.split(",")) - set(WAYS))
    if in_turn_only and not args.interleave:
        parser.error(f"{', '.join(in_turn_only)} is timed in turn only: give --interleave (or leave it out)")
    print(f"device: {get_runtime().device.name.strip()}; mode {args.mode}; {args.repeats} passes a way; "
          f"{args.draws} process{'es' if args.draws > 1 else ''} a way, the fastest kept", flush=True)
    for net in args.nets.split(","):
        _print(measure(net, args.ways.split(","), args.repeats, args.mode, args.draws, args.interleave,
                       args.gap_ms / 1e3))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
