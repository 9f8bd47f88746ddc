"""A mode that cannot win is not timed at length: `tuned-per-problem` switches CLBlast's parameters between
calls, each switch costing the call after it an override call and CLBlast's program looked up again at least,
on top of the pass's calls enqueued: its switches a pass times the least a switch added to a call, plus its
calls times the least an enqueue took, bound a pass's host time from below (backends/clblast/tuned.py
switches_per_pass, ModeFloor)."""
import pytest

from backends.clblast import problems
from backends.clblast.record import Candidate, DeviceId, ProblemRecord, Store, Verified
from backends.tuning.clblast.space import STAGES, limits_from_device
from backends.clblast.tuned import PER_PROBLEM, TUNED, frozen, switches_per_pass
from nets import LENET
from conftest import backend_or_skip

A1, A2 = frozen([("Xgemm", {"MWG": 1})]), frozen([("Xgemm", {"MWG": 2})])
B1 = frozen([("Xgemv", {"WGS1": 1})])


A3, A4 = frozen([("Xgemm", {"MWG": 3})]), frozen([("Xgemm", {"MWG": 4})])
B2, B3, B4 = (frozen([("Xgemv", {"WGS1": k})]) for k in (2, 3, 4))
C1 = frozen([("Xconvgemm", {"W": 1})])


@pytest.mark.parametrize("layers, switches", [
    # one way a layer: exact
    ([[[A1]], [[A1]]], 0),                      # one set throughout: nothing to switch once in force
    ([[[A1]], [[A2]]], 2),                      # two sets of one kernel, in a loop: twice a pass
    ([[[A1, A2]], [[B1]]], 2),                  # two calls of one layer
    ([[[A1]], [], [[A2]], [[A2]]], 2),          # a layer without CLBlast calls changes nothing
    # several ways: a bound from below
    ([[[A1]], [[A2], [B1]]], 0),                # the second layer may take a kernel of its own: no switch need be
    ([[[A1], [B1]], [[A2], [B2]], [[A3], [C1]]], 0),   # three layers on sets of their own, one kernel each: none
    ([[[A1], [B1]], [[A2], [B2]], [[A3], [B3]], [[A4], [B4]]], 2),   # four such layers on two kernels: 2 (4 are made)
    ([[[A1], [B1]], [[A2], [B2]], [[A3], [B1]]], 0),   # B1 is not the first layer's own: it need not switch
])
def test_switches_a_pass_once_in_a_loop(layers, switches):
    assert switches_per_pass(layers) == switches


def test_the_per_problem_mode_of_clblast_has_a_floor_and_the_net_wide_one_none(tmp_path, monkeypatch):
    backend_or_skip("clblast")
    import backends
    from backends.clblast.tuned import clblast_version
    from backends.opencl.runtime import get_runtime
    rt = get_runtime()
    store = Store(DeviceId.of(rt.info, clblast_version()), tmp_path)
    order = STAGES["xgemm_direct"][0].search_order(limits_from_device(rt.device))
    for k, p in enumerate(problems.net_problems(LENET, 2)):   # each problem a set of its own
        sets = [("XgemmDirect", order[k % 2]), ("GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE": 1 << 20})]
        store.save(ProblemRecord(p, [], {}, Verified("now", {}, "test", [Candidate("database", [], 1.0),
                                                                         Candidate("tuned", sets, 0.5)])))
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    backend = backends.get("clblast")
    try:
        floor = backend.mode_floor(LENET, 2, PER_PROBLEM)
        assert floor is not None and floor.ms > 0 and "parameter switches a pass" in floor.how, floor
        # the floor is its parts: the switches at what one added to a call, the calls at what one took to enqueue
        switches = int(floor.how.split()[0])
        switch_ms = float(floor.how.split(" x ")[1].split()[0])
        calls, enqueue = floor.how.split(" + ")[1].split(" CLBlast calls a pass x ")
        # each part is printed to 3 decimals: up to half of the last digit off, times its count
        assert floor.ms == pytest.approx(switches * switch_ms + int(calls) * float(enqueue.split()[0]),
                                         rel=0, abs=5e-4 * (switches + int(calls)) + 1e-9)
        assert switches >= 2   # the GEMM layers alternate two sets
        assert backend.mode_floor(LENET, 2, TUNED) is None
    finally:
        backend.close()
