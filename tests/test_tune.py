"""`compare tune` and the tuned parameters: the tuners' output read right,
the problems a net poses, a real (tiny) tuning on this device, and a run
that then applies it (the parameters recorded are the tuned ones)."""
import json
import os
import subprocess
import sys

import pytest

from backends.clblast import problems, tuners
from compare import tune
from nets import LENET, Conv, Dense, Net
from conftest import REQUIRE_ALL, backend_or_skip

ROW = ("|    4 |     4 |   64   32    8    8   32    2    2    2    1    1 |      32       8 |      32       8 |"
       "   OK     28 ms |      0.12 ms |    4.6 |     results match |")
NAMES = "WGD MDIMCD NDIMCD MDIMAD NDIMBD KWID VWMD VWND PADA PADB".split()


def test_a_tuner_row_is_read_into_named_parameters():
    params, ms = tuners._parse_row(ROW, NAMES)
    assert ms == 0.12
    assert params == {"WGD": 64, "MDIMCD": 32, "NDIMCD": 8, "MDIMAD": 8, "NDIMBD": 32, "KWID": 2, "VWMD": 2,
                      "VWND": 2, "PADA": 1, "PADB": 1}
    assert tuners._parse_row(ROW.replace("results match", " L2 error  ") , NAMES) is None   # wrong output: not kept
    assert tuners._parse_row("|  ref |     - |   - |", NAMES) is None
    assert tuners.kernel_of("xgemv", ["WGS2", "WPT2", "VW2"]) == "XgemvFast"
    assert tuners.kernel_of("xconvgemm", NAMES) == "Xconvgemm" and tuners.kernel_of("xgemm_direct", NAMES) == "XgemmDirect"
    assert tuners.fraction_for("xgemm_direct", 30) == pytest.approx(8466 / 30)
    assert tuners.fraction_for("xgemv", 1000) == 1.0   # never more than every configuration


def test_the_problems_of_a_net_by_hand():
    # CLBlast is column-major: our C (K x OH*OW) = W col is its m = OH*OW, n = K, k = C*KH*KW
    jobs = {(j.tuner, j.label): j.args for j in problems.layer_jobs(LENET, 100)}
    assert jobs[("xgemm_direct", "lenet:c1")] == {"m": 784, "n": 6, "k": 25}
    assert jobs[("xgemm", "lenet:c1")] == {"m": 896, "n": 128, "k": 32}          # rounded to the kernel's tiles
    assert jobs[("xconvgemm", "lenet:c1")] == {"channels": 1, "height": 32, "width": 32, "kernelh": 5,
                                                "kernelw": 5, "num_kernels": 6, "batch_num": 100}
    assert jobs[("xgemm_direct", "lenet:f5")] == {"m": 120, "n": 100, "k": 400}
    one = Net("t", (2, 5, 5), (Conv("a", "relu", out_channels=3, kernel=(3, 3), pad=(1, 1)),
                              Conv("b", "relu", out_channels=3, kernel=(3, 3), pad=(1, 1)),
                              Dense("c", out_features=4)))
    jobs = problems.layer_jobs(one, 1)
    assert [(j.tuner, j.label) for j in jobs if j.tuner == "xgemv"] == [("xgemv", "t:c")]    # batch 1: a GEMV
    direct = [j for j in jobs if j.tuner == "xgemm_direct"]
    assert [j.args for j in direct] == [{"m": 25, "n": 3, "k": 18}, {"m": 25, "n": 3, "k": 27}]


def test_a_new_tuning_replaces_what_it_tuned_and_keeps_the_rest():
    old = {"device_sets": {"Xgemm": {"parameters": {"A": 1}}, "Xgemv": {"parameters": {"B": 1}}},
           "shape_sets": [{"tuner": "xgemm_direct", "args": {"m": 1}, "kernels": {}},
                          {"tuner": "xgemm_direct", "args": {"m": 2}, "kernels": {}}]}
    new = {"device_sets": {"Xgemm": {"parameters": {"A": 2}}},
           "shape_sets": [{"tuner": "xgemm_direct", "args": {"m": 2}, "kernels": {"new": 1}}], "tuned": "now"}
    merged = tune.merge(old, new)
    assert merged["device_sets"] == {"Xgemm": {"parameters": {"A": 2}}, "Xgemv": {"parameters": {"B": 1}}}
    assert merged["shape_sets"] == [{"tuner": "xgemm_direct", "args": {"m": 1}, "kernels": {}},
                                    {"tuner": "xgemm_direct", "args": {"m": 2}, "kernels": {"new": 1}}]
    assert merged["tuned"] == "now"


def _compare(*argv, env):
    return subprocess.run([sys.executable, "-m", "compare", *argv], capture_output=True, text=True, env=env,
                          timeout=900)


def test_tune_on_this_device_then_a_run_applies_it(tmp_path):
    backend_or_skip("clblast")
    problem = tuners.environment_ok()
    if problem:
        if REQUIRE_ALL:
            pytest.fail(f"`make test` installs CLBlast's tuners: {problem}")
        pytest.skip(problem)
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    # the device scope (the study's way: every kernel at its tuner's sizes); the shape scope's
    # problems and the tuners' output are checked above, and clblast-best's use of them in test_clblast.py
    tuned = _compare("tune", "--net", "lenet", "--batch", "2", "--budget-s", "12", "--scope", "device", env=env)
    assert tuned.returncode == 0, tuned.stderr
    entry = next(iter(json.loads((tmp_path / "clblast-tuning.json").read_text()).values()))
    assert entry["budget_s"] == 12 and entry["took_s"] < 12 + 2 * len(problems.DEVICE_JOBS) + 30
    assert entry["device_sets"] and entry["shape_sets"] == [], entry
    for found in entry["device_sets"].values():
        assert found["matched"] >= 1 and found["parameters"]
    # a fresh process (CLBlast's overrides hold for a whole process) runs with them
    out = tmp_path / "r.json"
    run = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "clblast", "--mode", "correctness",
                   "--out", str(out), env=env)
    assert run.returncode == 0, run.stderr
    clblast = json.loads(out.read_text())["backends"][0]
    assert clblast["check"]["status"] == "PASS"
    assert clblast["config"]["clblast_parameters"].startswith("tuned on ")
    in_force = clblast["config"]["clblast_parameters_in_force"]
    used = {k: v["parameters"] for k, v in entry["device_sets"].items() if k in in_force}
    assert used and all(in_force[k] == p for k, p in used.items())   # the tuned sets, not the database's
    default = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "clblast", "--mode", "correctness",
                       "--clblast-params", "default", "--out", str(out), env=env)
    assert default.returncode == 0, default.stderr
    config = json.loads(out.read_text())["backends"][0]["config"]
    assert config["clblast_parameters"] == "CLBlast database default" and config["clblast_parameters_in_force"] == {}
    # clblast-best measures the tuned sets against the database's, each in a child of its own, and keeps the faster
    best = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "clblast-best", "--repeats", "2",
                    "--warmup", "1", "--out", str(out), env=env)
    assert best.returncode == 0, best.stderr
    entry = json.loads(out.read_text())["backends"][0]
    modes = {m["name"]: m for m in entry["modes"]}
    assert set(modes) == {"tuned", "database"} and all(m["status"] == "OK" for m in modes.values()), modes
    assert entry["mode"] == min(modes, key=lambda m: modes[m]["compute"]["median"])
    want = "CLBlast database default" if entry["mode"] == "database" else "tuned on "
    assert entry["config"]["clblast_parameters"].startswith(want) and entry["check"]["status"] == "PASS"


@pytest.mark.parametrize("argv, message", [
    (["tune", "--budget-s", "0"], "--budget-s must be a positive number of seconds, not 0.0"),
    (["tune", "--scope", "everything"], "--scope takes device, shape, tiles (comma-separated)"),
    (["tune", "--net", "nosuch", "--budget-s", "5"], "unknown net 'nosuch'"),
])
def test_tune_refuses_bad_options_in_one_line(argv, message, tmp_path):
    proc = _compare(*argv, env=dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path)))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "clblast-tuning.json").exists()


def test_tiles_are_measured_and_then_used(tmp_path):
    backend_or_skip("vectorised-tiled")
    env = dict(os.environ, COMPARE_CACHE_DIR=str(tmp_path))
    tuned = _compare("tune", "--net", "lenet", "--batch", "2", "--budget-s", "8", "--scope", "tiles", env=env)
    assert tuned.returncode == 0, tuned.stderr
    entry = next(iter(json.loads((tmp_path / "tiles.json").read_text()).values()))
    layers = entry["layers"]
    assert set(layers) == {"n2 in1x32x32 k6 w5x5 s1x1 p0x0", "n2 in6x14x14 k16 w5x5 s1x1 p0x0"}
    for found in layers.values():
        # the cost model's own choice is always timed, and the choice is never slower than it
        assert found["timed"] >= 1 and found["model"]["ms"] is not None and found["ms"] <= found["model"]["ms"]
    out = tmp_path / "r.json"
    run = _compare("run", "--net", "lenet", "--batch", "2", "--backends", "vectorised-tiled", "--mode", "correctness",
                   "--out", str(out), env=env)
    assert run.returncode == 0, run.stderr
    config = json.loads(out.read_text())["backends"][0]["config"]
    assert all(source.startswith("measured by `compare tune`") for source in config["tile_source"].values())
    assert set(config["tile_source"]) == {"c1", "c3"}
