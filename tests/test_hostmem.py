"""A batch too large for the host's memory is refused before anything of it
is allocated (one line, exit 2, the figure and a batch that fits), not left
to numpy's traceback or the out-of-memory killer; and the estimate it is
refused by covers what a run really allocates."""
import tracemalloc
from types import SimpleNamespace

import pytest

from compare import hostmem, runner
from compare.cli import main
from compare.hostmem import HEADROOM, host_need
from nets import LENET
from nets.weights import init_weights, make_input


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# batches whose input alone is petabytes: refused at once, and no allocation is ever tried
@pytest.mark.parametrize("argv, what", [
    (["run", "--net", "vgg16", "--backends", "numpy", "--batch", "1000000000"], "vgg16 at --batch 1000000000"),
    (["run", "--net", "lenet", "--mode", "performance", "--batch", "2000000000"], "lenet at --batch 2000000000"),
    (["check", "--net", "lenet", "--backends", "numpy", "--batch", "2000000000"], "lenet at --batch 2000000000"),
    (["sweep", "--net", "lenet", "--backends", "numpy", "--batch", "1,2,2000000000"],
     "lenet at batch 2000000000 of the sweep"),
])
def test_a_batch_too_large_for_the_host_is_refused_before_any_allocation(tmp_path, capsys, argv, what):
    out = tmp_path / ("sweep" if argv[0] == "sweep" else "r.json")
    assert main(argv + ["--out", str(out)]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {what} needs about ") and " TiB of host memory (input, " in line
    fits = "batches up to" if argv[0] == "sweep" else "--batch"
    assert f"GiB available; {fits} " in line and line.endswith(" fits" if argv[0] != "sweep" else " fit")
    assert list(tmp_path.iterdir()) == []


def test_the_batch_named_is_the_largest_that_fits(monkeypatch, capsys):
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 2**30)
    assert main(["run", "--net", "lenet", "--backends", "numpy,baseline", "--batch", "100000"]) == 2
    line = _one_line(capsys)
    fits = int(line.rsplit("--batch ", 1)[1].split()[0])
    need = host_need(LENET, checking=True, backends_at_once=1, outputs_kept=2)
    assert need.at(fits) <= HEADROOM * 2**30 < need.at(fits + 1)
    assert "more than 80% of the 1.0 GiB available" in line and "float64 oracle" in line


def test_not_even_one_image_says_so(monkeypatch, capsys):
    monkeypatch.setattr(hostmem, "available_bytes", lambda: 2**20)
    assert main(["check", "--net", "vgg16", "--backends", "numpy"]) == 2
    assert _one_line(capsys).endswith("available; not even batch 1 fits: free some memory")


def test_the_figure_available_is_the_systems_or_a_cgroup_limit_when_lower(monkeypatch):
    monkeypatch.setattr(hostmem.psutil, "virtual_memory", lambda: SimpleNamespace(available=2048 * 1024))
    monkeypatch.setattr(hostmem, "_cgroup_room", lambda: None)
    assert hostmem.available_bytes() == 2048 * 1024
    monkeypatch.setattr(hostmem, "_cgroup_room", lambda: 1000)
    assert hostmem.available_bytes() == 1000

    def unreadable():
        raise FileNotFoundError("/proc/meminfo")
    monkeypatch.setattr(hostmem.psutil, "virtual_memory", unreadable)
    assert hostmem.available_bytes() == 1000   # the cgroup's room alone still counts
    monkeypatch.setattr(hostmem, "_cgroup_room", lambda: None)
    assert hostmem.available_bytes() is None   # nothing to go by: the run is not refused


def test_a_cgroup_limit_leaves_what_it_has_not_used(tmp_path, monkeypatch):
    own = tmp_path / "proc_self_cgroup"
    own.write_text("0::/job.slice/run.scope\n")
    folder = tmp_path / "job.slice" / "run.scope"
    folder.mkdir(parents=True)
    (folder / "memory.max").write_text("5000\n")
    (folder / "memory.current").write_text("1200\n")
    monkeypatch.setattr(hostmem, "CGROUP", tmp_path)
    monkeypatch.setattr(hostmem, "SELF_CGROUP", own)
    assert hostmem._cgroup_room() == 3800
    (folder / "memory.max").write_text("max\n")
    assert hostmem._cgroup_room() is None   # no limit: the system's figure is the one
    monkeypatch.setattr(hostmem, "SELF_CGROUP", tmp_path / "none")
    assert hostmem._cgroup_room() is None


@pytest.mark.parametrize("mode", ["both", "performance"])
def test_the_estimate_covers_what_a_run_allocates(mode):
    batch = 600
    weights = init_weights(LENET, 0)
    tracemalloc.start()   # numpy reports its arrays to tracemalloc
    try:
        x = make_input(LENET, batch, 0)
        plan = runner.Plan(net=LENET, batch=batch, weights=weights, x=x, backends=["numpy"], mode=mode,
                           repeats=2, warmup=1)
        result, _ = runner.execute(plan)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.backends[0].status == "OK"
    need = host_need(LENET, checking=mode == "both").at(batch)
    assert peak <= need, f"a run took {peak / 2**20:.1f} MiB, the estimate says {need / 2**20:.1f} MiB"
