"""What a newcomer writes to add an OpenCL backend: one class on the OpenCL
base (tests/run_checks.py: NewcomerBackend, as README.md shows it) and one
registry line.  The registry creates it on the device the run resolved."""
import backends
from backends.opencl.runtime import get_runtime
from compare import runner
from nets import LENET
from nets.weights import init_weights, make_input


def test_one_class_on_the_opencl_base_and_one_registry_line_make_a_backend(monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, "newcomer", ("run_checks", "NewcomerBackend"))
    assert "newcomer" in backends.parse_names("all")
    plan = runner.Plan(net=LENET, batch=2, weights=init_weights(LENET, 0), x=make_input(LENET, 2, 0),
                       backends=["newcomer"], mode="both", repeats=1, warmup=1, peak_gflops=1.0)
    result, outputs = runner.execute(plan)
    entry, = result.backends
    assert entry.status == "OK" and entry.check.status == "PASS", entry.reason
    assert entry.timing.end_to_end.compute.n == 1 and "newcomer" in outputs.backends
    runtime = get_runtime()
    assert entry.info["device"] == runtime.info["name"] and entry.info["versions"]["driver"] == runtime.info["driver"]
