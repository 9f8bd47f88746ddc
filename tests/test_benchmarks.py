"""Every benchmark script starts: its imports resolve and its options parse (`--help`), so a module moved
elsewhere in the tree cannot leave a benchmark broken until a GPU call finds it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if '__name__ == "__main__"' in p.read_text())


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_benchmark_starts_and_says_its_options(script):
    got = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert got.returncode == 0 and got.stdout.startswith("usage:"), got.stderr[-2000:]


@pytest.mark.parametrize("direct", ["--direct", "--no-direct"])
def test_the_kernels_benchmark_runs_a_net_and_prints_its_ratios(tmp_path, direct):
    """benchmarks/kernels_vs_peers.py end to end on a small batch: its output goes through a tee (the terminal
    and OUT/<net>.txt), which the run's tables must be able to lay out, and it ends with the ratios; with
    --no-direct without the direct-kernels twin of each hand-written backend."""
    got = subprocess.run([sys.executable, "benchmarks/kernels_vs_peers.py", "--nets", "lenet:4", "--backends",
                          "vectorised,torch", "--repeats", "2", "--warmup", "1", "--out", str(tmp_path), direct],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    ran = {b["name"] for b in json.loads((tmp_path / "lenet.json").read_text())["backends"]}
    assert ran == ({"vectorised", "torch", "vectorised-direct"} if direct == "--direct" else {"vectorised", "torch"})
    assert "against PyTorch at its best" in got.stdout and (tmp_path / "lenet.json").is_file()
    assert "checks and times" in (tmp_path / "lenet.txt").read_text()   # the run's tables, teed
    assert "against PyTorch at its best" in (tmp_path / "lenet-summary.txt").read_text()


def test_the_tiles_benchmark_times_each_tile_alone_and_checks_it():
    """benchmarks/tiles.py on LeNet-5: each conv's tiles, the layer run by the tiled kernel alone (on a CPU the
    vector-width kernel would take its place, and the plan would name no tile), every one checked."""
    got = subprocess.run([sys.executable, "benchmarks/tiles.py", "--nets", "lenet", "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    rows = [line for line in got.stdout.splitlines() if line.startswith(("c1 ", "c3 "))]
    assert len(rows) == 2 and all(row.rstrip().endswith("all PASS") and "per work-item" in row for row in rows)


def test_the_kernels_benchmark_times_fused_where_it_runs_the_net():
    # fused's whole-net kernel has the layers of LeNet-5, vit-tiny and VGG-16 (whose activations then do not
    # fit the device's work-group: refused at prepare, on the device), not ResNet-18's padded max pool
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernels_vs_peers", ROOT / "benchmarks" / "kernels_vs_peers.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert [net for net in ("lenet", "vit-tiny", "vgg16", "resnet18") if not bench._refused("fused", net)] == \
        ["lenet", "vit-tiny", "vgg16"]
    assert not bench._refused("vectorised-tiled", "vgg16")


def test_the_two_queues_benchmark_times_each_way_and_says_the_ratio():
    got = subprocess.run([sys.executable, "benchmarks/two_queues.py", "--groups", "2", "--iters", "200",
                          "--rounds", "3"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    timed = {line.split()[0] for line in got.stdout.splitlines() if line.startswith("  ")}
    assert timed == {"one", "serial", "two", "serial3", "waits"} and "serial / two: " in got.stdout


ARGS = {"registers.py": ["--net", "lenet", "--batch", "2", "--backends", "fused"],
        "register_caps.py": ["--net", "lenet", "--batch", "2", "--caps", "0,248", "--rounds", "2", "--passes", "1"]}


@pytest.mark.parametrize("script", sorted(ARGS))
def test_the_register_benchmarks_run_or_say_where_there_is_no_cap(script):
    """On a device without cl_nv_compiler_options (PoCL) one line saying so, no traceback (the cap is
    NVIDIA's); on one with it, the report or the caps' table."""
    from backends.opencl.runtime import get_runtime
    got = subprocess.run([sys.executable, f"benchmarks/{script}", *ARGS[script]], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    if "cl_nv_compiler_options" in get_runtime().device.extensions.split():
        assert ("net_fused" in got.stdout and "the empty kernel: WORK_GROUP_SIZE" in got.stdout
                if script == "registers.py" else "register cap" in got.stdout and "248 " in got.stdout), got.stdout
    else:
        assert got.stdout.strip().endswith("cl_nv_compiler_options: no register report to read"
                                           if script == "registers.py" else
                                           "cl_nv_compiler_options: no register cap to set")


def test_ptxas_report_is_read_per_kernel():
    import importlib.util
    spec = importlib.util.spec_from_file_location("registers", ROOT / "benchmarks" / "registers.py")
    registers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(registers)
    log = ("ptxas info    : Compiling entry function 'net_fused' for 'sm_90'\n"
           "ptxas info    : Function properties for net_fused\n"
           "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 110 registers, 23520 bytes smem, 464 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function 'pack' for 'sm_90'\n"
           "ptxas info    : Used 10 registers, 380 bytes cmem[0]\n")
    assert registers._report(log) == {"net_fused": {"registers": 110, "spill": "8/12"}, "pack": {"registers": 10}}
