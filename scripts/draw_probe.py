"""Why a process on the H200's guest runs plain Python 1.6-2x slower at times (reports/nvidia-h200/NOTES.md,
2026-11-29 night: one runner process was fast as it started and slow by the time its run began).  In fresh
processes, the fixed piece of plain Python (backends/host.py) timed after each thing a runner does before
it measures: bare, numpy's float64 matrix product (the oracle's; BLAS threads may spin after it), torch
imported, CUDA opened, NVIDIA's OpenCL opened; and beside each, the process's threads that used a CPU over
the next idle second (a thread spinning on the core beside the main one would slow it).  Then, in this
process, the piece pinned to each CPU in turn, twice: whether some CPUs are slow ones.
    python3 scripts/draw_probe.py [PROCESSES, default 6]   (on the GPU machine, after scripts/gpu-card.sh)"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.host import plain_python_ms  # noqa: E402 - after the checkout is on the path


def busy_threads(over_s: float = 1.0) -> str:
    """Threads of this process that used a CPU over `over_s` idle seconds, busiest first."""
    def ticks() -> dict[str, int]:
        got = {}
        for t in os.listdir("/proc/self/task"):
            try:
                stat = Path(f"/proc/self/task/{t}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                got[f"{stat[stat.index('(') + 1:stat.rindex(')')]}/{t}"] = int(fields[11]) + int(fields[12])
            except (OSError, ValueError):
                pass
        return got
    before = ticks()
    time.sleep(over_s)
    after = ticks()
    hz = os.sysconf("SC_CLK_TCK")
    used = sorted(((k, (v - before.get(k, 0)) * 1e3 / hz) for k, v in after.items()), key=lambda kv: -kv[1])
    busy = [f"{k} {ms:.0f} ms" for k, ms in used if ms > 0][:4]
    return f"{len(after)} threads, busy: {', '.join(busy) or 'none'}"


def stages():
    """Each stage's name and what it does, in the order a runner meets them."""
    def blas():
        import numpy as np
        a = np.random.default_rng(0).random((1500, 1500))
        for _ in range(3):
            a @ a

    def torch_cuda():
        import torch
        (torch.ones(1024, device="cuda") * 2).sum().item()

    def opencl():
        import pyopencl as cl
        nvidia = [p for p in cl.get_platforms() if "NVIDIA" in p.name]
        ctx = cl.Context(nvidia[0].get_devices()[:1])
        cl.CommandQueue(ctx).finish()
    return [("bare", lambda: None), ("float64 matmul", blas), ("torch + CUDA", torch_cuda), ("NVIDIA OpenCL", opencl)]


def one() -> None:
    said = []
    for name, run in stages():
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - a stage this machine cannot do is said, the rest go on
            said.append(f"{name}: {type(exc).__name__}")
            continue
        right_after = plain_python_ms(5)
        said.append(f"{name}: {right_after:.1f} then {plain_python_ms(5):.1f} ms [{busy_threads()}]")
    print(f"pid {os.getpid()}: " + "; ".join(said), flush=True)


def per_cpu() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    worst = {c: 0.0 for c in cpus}
    for lap in (1, 2):
        figures = []
        for c in cpus:
            os.sched_setaffinity(0, {c})
            ms = plain_python_ms(5)
            worst[c] = max(worst[c], ms)
            figures.append(f"{c}:{ms:.0f}")
        os.sched_setaffinity(0, set(cpus))
        print(f"pinned to each CPU, lap {lap} (ms): {' '.join(figures)}", flush=True)
    # the CPUs fast in both laps, as taskset takes them (the next command in a call can run pinned to them)
    best = min(worst.values())
    print("fast CPUs: " + ",".join(str(c) for c in cpus if worst[c] <= best * 1.15), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        one()
    else:
        for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
            subprocess.run([sys.executable, __file__, "one"], check=False, timeout=120)
        per_cpu()
