"""A small hand-made results file, so report tables can be checked exactly:
small_results_dict() as JSON would hold it, small_results() as the typed model."""
from compare.results import SCHEMA, VERSION, RunResult, decode


def stats(ms, n=5):
    return {"median": ms, "min": ms, "max": ms, "q1": ms, "q3": ms, "iqr": 0.0, "n": n, "values": [ms] * n}


def layer(name, wall, kernel=None, steps=()):
    return {"name": name, "wall": stats(wall), "kernel": stats(kernel) if kernel is not None else None,
            "overhead": stats(wall - kernel) if kernel is not None else None,
            "steps": [{"name": n, "how": "markers" if n.startswith("x") else "event", "ms": stats(ms)} for n, ms in steps]}


FAMILY = {"numpy": "reference", "clblast": "clblast", "clblast-best": "clblast", "clblast-convgemm": "clblast",
          "vectorised": "hand-written",
          "fused": "hand-written", "torch": "peer", "tinygrad": "compiler",
          "opencv": "engine"}


def backend(name, layers, compute, uses_opencl=True, kind=None, check_rel=1e-7):
    return {"name": name, "summary": f"the {name} backend", "family": FAMILY.get(name, ""), "uses_opencl": uses_opencl,
            "status": "OK",
            "info": {"kind": kind} if kind else {}, "config": {}, "prepare_ms": 10.0, "first_run_ms": 20.0,
            "memory_bytes": 3 * 2**20,
            "check": {"status": "PASS" if check_rel < 1e-4 else "FAIL", "tolerance": 1e-4,
                      "end_to_end": {"passed": check_rel < 1e-4, "rel_l2": check_rel, "max_abs": 2e-6, "top1": 1.0},
                      "layers": [{"name": "a", "passed": True, "rel_l2": check_rel / 2, "max_abs": 1e-6},
                                 {"name": "b", "passed": True, "rel_l2": check_rel, "max_abs": 2e-6}]},
            "timing": {"end_to_end": {"total": stats(compute + 0.5), "upload": stats(0.25), "compute": stats(compute),
                                      "download": stats(0.25)},
                       "layers": layers}}


def small_results_dict(device="Test GPU", created="2026-11-01T10:00:00+00:00"):
    return {
        "schema": SCHEMA, "schema_version": VERSION,
        "tool": {"name": "clblast-compare", "version": "0.1.0"},
        "created": created, "command": "compare run --net tiny", "mode": "both",
        "host": {"cpu": "Test CPU", "cpus": 2, "os": "Linux", "python": "3.11"},
        "device": {"name": device, "type": "CPU", "platform": "Test platform", "driver": "1.0", "opencl": "OpenCL 3.0",
                   "compute_units": 2},
        "settings": {"repeats": 5, "warmup": 1, "layerwise_check": True},
        "net": {"name": "tiny", "batch": 1, "input_shape": [1, 4, 4], "params": 10, "flops": 3_000_000,
                "layers": [{"name": "a", "kind": "conv", "flops": 2_000_000},
                           {"name": "b", "kind": "dense", "flops": 1_000_000}]},
        "sources": {"weights": {"kind": "seed", "seed": 0}, "input": {"kind": "seed", "seed": 0}},
        "peak": {"gflops": 10.0, "bandwidth_gbs": 20.0, "source": "given by the test"},
        "backends": [
            backend("numpy", [layer("a", 2.0), layer("b", 0.5)], 2.5, uses_opencl=False, kind="cpu"),
            backend("clblast", [layer("a", 4.0, 3.0, [("xCOPY", 0.5), ("xIM2COL", 1.0), ("xGEMM", 1.5)]),
                                layer("b", 2.0, 1.0, [("xCOPY", 0.25), ("xGEMV", 0.75)])], 5.0),
            backend("vectorised", [layer("a", 1.0, 0.5, [("conv", 0.5)]), layer("b", 1.0, 0.5, [("gemv", 0.5)])], 1.25),
            {"name": "torch", "summary": "PyTorch", "family": "peer", "uses_opencl": False, "status": "UNAVAILABLE",
             "reason": "PyTorch is not installed"},
        ],
    }


def small_results(device="Test GPU", created="2026-11-01T10:00:00+00:00") -> RunResult:
    return decode(RunResult, small_results_dict(device, created))
