"""Repeats calibrated to a minimum time per backend (a given --repeats honoured exactly), the host's load
and governor recorded in the results."""
from compare import noise
from compare.cli import build_parser
from compare.results import Host


def test_repeats_are_calibrated_between_the_floor_and_the_cap():
    assert noise.calibrated(0.1, 10, 0.5) == noise.MAX_REPEATS     # a fast pass: the cap
    assert noise.calibrated(20.0, 10, 0.5) == 25                     # 25 passes of 20 ms add up to 0.5 s
    assert noise.calibrated(500.0, 10, 0.5) == 10                    # a slow pass: the floor
    assert noise.calibrated(0.1, 7, None) == 7                       # --repeats given: exactly


def test_repeats_given_are_exact_and_the_default_is_calibrated():
    parser = build_parser()
    assert parser.parse_args(["run", "--net", "lenet"]).repeats is None
    assert parser.parse_args(["run", "--net", "lenet", "--repeats", "3"]).repeats == 3


def test_the_host_state_is_read_and_a_busy_host_is_named():
    state = noise.host_state()
    assert set(state) == {"load_1m", "governor", "plain_python_ms"} and (state["load_1m"] is None or state["load_1m"] >= 0)
    assert state["plain_python_ms"] > 0
    assert noise.busy(Host(cpus=2, load_1m=3.1)) == "load 3.10 on 2 cores"
    assert noise.busy(Host(cpus=2, load_1m=0.5)) is None and noise.busy(Host(cpus=2)) is None


def test_the_cap_falls_to_the_floor_where_more_passes_would_not_fit():
    from nets.errors import UserError

    def fits(k):
        if k > 20:
            raise UserError("too many")
    assert noise.fitting_cap(fits, 10) == 10 and noise.fitting_cap(lambda k: None, 10) == noise.MAX_REPEATS


def test_a_process_that_ran_plain_python_slower_than_the_runs_fastest_is_named_the_runners_too():
    from types import SimpleNamespace as NS

    def run(mine, **theirs):
        backends = [NS(name=n, status="OK", config={"plain_python_ms": ms}) for n, ms in theirs.items()]
        backends.append(NS(name="vectorised", status="OK", config={}))   # in the runner's process: nothing to hold
        return NS(host=Host(plain_python_ms=mine), backends=backends)
    line = noise.slow_processes_line(run(10.0, tinygrad=14.1, torch=10.5))
    assert line == ("Slow process: `tinygrad` 1.41x slower at plain Python than the run's fastest (10.0 ms): its "
                    "times may be the draw's.")
    # the runner drew slow (2026-11-29 evening: ours and PyTorch run there): held against its children
    assert noise.slow_processes_line(run(44.2, clblast=25.3, tinygrad=24.9)) == (
        "Slow process: the runner's own 1.78x slower at plain Python than the run's fastest (24.9 ms): its times "
        "may be the draw's.")
    several = run(20.0, tinygrad=14.1, opencv=13.0, clblast=10.0)
    assert noise.slow_processes_line(several, limit=200).startswith(
        "Slow processes: the runner's own 2.00x, `tinygrad` 1.41x, `opencv` 1.30x slower at plain Python")
    assert noise.slow_processes_line(several).startswith(   # counted, the runner still named
        "Slow processes: the runner's own 2.00x and 2 more, 1.2x or more slower at plain Python")
    assert noise.slow_processes_line(run(10.0, tinygrad=14.1, opencv=13.0), limit=60).startswith(
        "Slow processes: 2 of 3, 1.2x or more slower at plain Python")   # too long to name them: counted
    assert noise.slow_processes_line(run(10.0, tinygrad=11.9)) is None        # within 1.2x: the same draw
    assert noise.slow_processes_line(run(11.9, tinygrad=10.0)) is None
    assert noise.slow_processes_line(run(None, tinygrad=30.0)) is None        # a file written before the figure
