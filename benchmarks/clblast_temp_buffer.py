"""What CLBlast's xGEMM pays per call for the temporary buffer it allocates
when the caller gives none (issue 35): every single-GEMM problem of the nets,
called as the CLBlast backends call it (row major, untransposed; CLBlast's
database parameters, this process sets no others), once with no buffer and
once with a buffer sized once by CLBlastSGemmTempBufferSize, alternating,
each call timed by the host clock around the call and a queue.finish().

    .venv/bin/python benchmarks/clblast_temp_buffer.py [--net lenet,vgg16,resnet18,mobilenet-v2] [--repeats 30]

Printed per problem: the bytes CLBlast would allocate (0: none, the call
costs the same either way), the median ms of each way, the ratio (no buffer
over a buffer given: above 1x the given buffer saves time) with its 95%
interval, and what the difference comes to per forward pass (the problem's
calls in one pass times the difference of the medians).  Batched GEMMs have
no such entry point (CLBlast allocates their alpha/beta arrays and temporary
matrices inside every call), so they are not here.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import pyopencl as cl
from tabulate import tabulate

from backends.clblast import library, problems
from backends.opencl.runtime import get_runtime
from compare.speedup import Speedup
from nets import get_net


def _time(rt, call) -> float:
    t0 = time.perf_counter()
    call()
    rt.queue.finish()
    return (time.perf_counter() - t0) * 1e3


def measure(rt, problem: problems.Problem, repeats: int) -> tuple[int, list[float], list[float]]:
    """(bytes of the temporary buffer, ms with none given, ms with one given) of one GEMM problem."""
    m, n, k, _ = problem.sizes
    rng = np.random.default_rng(0)
    bufs = [cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                      hostbuf=rng.random(size, dtype=np.float32)) for size in (m * k, k * n, m * n)]
    a, b, c = bufs
    nbytes = library.gemm_temp_bytes(rt.queue, m, n, k, k, n, n)
    temp = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, nbytes) if nbytes else None

    def call(buffer):
        return lambda: library.gemm_with_temp(rt.queue, m, n, k, a, b, c, buffer, k, n, n)
    none_ms, given_ms = [], []
    for _ in range(3):   # compile, first-call costs
        _time(rt, call(None))
        _time(rt, call(temp))
    for _ in range(repeats):
        none_ms.append(_time(rt, call(None)))
        given_ms.append(_time(rt, call(temp)))
    return nbytes, none_ms, given_ms


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", default="lenet,vgg16,resnet18,mobilenet-v2")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--device")
    args = p.parse_args(argv)
    library.require_library()
    rt = get_runtime(args.device)
    print(f"{rt.info['name']} ({rt.info['platform']}, {rt.info['driver']}); CLBlast's database parameters; "
          f"{args.repeats} calls each way, alternating\n")
    for name in args.net.split(","):
        net = get_net(name)
        batch = net.default_batch
        calls = problems.net_calls(net, batch)
        rows, per_pass, verdicts = [], 0.0, []
        for problem, n_calls in calls.items():
            if problem.routine != problems.GEMM or problem.sizes[3] != 1:
                continue
            nbytes, none_ms, given_ms = measure(rt, problem, args.repeats)
            s = Speedup.of(none_ms, given_ms)
            verdicts.append(s.verdict)
            diff = statistics.median(none_ms) - statistics.median(given_ms)
            per_pass += n_calls * diff
            rows.append([problem.key, n_calls, nbytes, f"{statistics.median(none_ms):.4f}",
                         f"{statistics.median(given_ms):.4f}", s.text(), f"{n_calls * diff:+.4f}"])
        print(f"{name} batch {batch}: single-GEMM calls")
        print(tabulate(rows, headers=["problem", "calls a pass", "temp bytes", "no buffer ms", "buffer given ms",
                                      "no buffer / given", "a pass, ms saved"], disable_numparse=True))
        counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
        print(f"summed over a pass: {per_pass:+.4f} ms saved by a buffer given once (medians' difference); problems "
              + ", ".join(f"{n} {'a buffer given is ' + str(v) if v in ('faster', 'slower') else str(v)}"
                          for v, n in counts.items()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
