"""benchmarks/tinygrad_own.py draws each way's process as `compare run --draws` draws the peer's: each
way in N fresh children, taking turns with the other ways, the fastest that passed kept and every draw said."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import backend_or_skip

ROOT = Path(__file__).resolve().parents[1]


def test_each_way_is_drawn_in_fresh_processes_in_turn_and_the_fastest_kept():
    backend_or_skip("tinygrad")
    got = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--nets", "lenet", "--ways", "own,peer",
                          "--repeats", "3", "--draws", "2", "--mode", "untuned"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    out = got.stdout
    # the ways take turns, draw by draw, so a slow phase of the host falls on both alike
    order = re.findall(r"^lenet (own|peer) process (\d) of 2:", out, re.M)
    assert order == [("own", "1"), ("peer", "1"), ("own", "2"), ("peer", "2")], out
    for way in ("own", "peer"):
        drawn = [float(ms) for ms in re.findall(rf"^lenet {way} process \d of 2: PASS, wall ([0-9.]+) ms", out, re.M)]
        assert len(drawn) == 2, out
        kept = re.search(rf"^lenet +{way} +PASS +\S+ +([0-9.]+)", out, re.M)
        assert kept and float(kept.group(1)) == min(drawn)   # the table holds the fastest process's
        assert f"lenet {way}: the fastest of 2 processes" in out
    bad = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--draws", "0"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert bad.returncode == 2 and "--draws is a whole number of processes" in bad.stderr.strip().splitlines()[-1]


def test_the_peer_timed_way_says_its_processs_draw_as_own_does():
    """Each way's line gives its process's plain-Python figure, so a slow draw of the peer's child is told."""
    backend_or_skip("tinygrad")
    got = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--nets", "lenet", "--ways", "peer-timed",
                          "--repeats", "3", "--mode", "untuned"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    said = re.search(r"^lenet peer-timed: PASS, .*plain Python ([0-9.]+) ms", got.stdout, re.M)
    assert said and float(said.group(1)) > 0, got.stdout


def test_the_peer_runs_owns_very_recipe_by_default_where_the_net_has_one():
    """The default peer mode is the ONNX recipe own runs (what differs is only how each runs it), the
    transformer's too: own runs vit-tiny and passes the check."""
    backend_or_skip("tinygrad")
    got = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--nets", "lenet,vit-tiny", "--ways", "own",
                          "--repeats", "2"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "lenet: the peer in its searched-onnx mode" in got.stdout, got.stdout
    assert "vit-tiny: the peer in its searched-onnx mode" in got.stdout, got.stdout
    assert re.search(r"^vit-tiny own: PASS", got.stdout, re.M), got.stdout


def test_interleaved_own_and_the_peer_are_held_open_and_sampled_in_turn():
    """--interleave: each process prepared first, then one sample of each in turn, round after round, so a
    phase of the host falls on both sides alike; each sample the same rule's passes back to back."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tinygrad_turns
    order = []

    class Player:
        def __init__(self, name):
            self.name = name

        def sample(self):
            order.append(self.name)
            return float(len(order))
    took = tinygrad_turns.in_turn([Player("own"), Player("peer")], 3)
    assert order == ["own", "peer"] * 3
    assert took == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]


def test_a_gap_after_each_round_stands_for_the_other_backends_of_a_run(monkeypatch):
    """--gap-ms: asleep after each round, as a process waits for a crowded run's other backends."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tinygrad_turns
    said = []

    class Player:
        def sample(self):
            said.append("sample")
            return 1.0
    monkeypatch.setattr(tinygrad_turns.time, "sleep", lambda s: said.append(s))
    tinygrad_turns.in_turn([Player(), Player()], 2, gap_s=0.1)
    assert said == ["sample", "sample", 0.1, "sample", "sample", 0.1]
    for bad, why in ((["--gap-ms", "5"], "give --interleave too"), (["--gap-ms", "-1", "--interleave",
                                                                     "--ways", "own"], "0 up to a minute")):
        got = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", *bad], capture_output=True, text=True,
                             timeout=300, cwd=ROOT)
        assert got.returncode == 2 and why in got.stderr.strip().splitlines()[-1], got.stderr


def test_interleave_runs_both_sides_checked_and_refuses_ways_it_cannot_take_in_turn():
    backend_or_skip("tinygrad")
    got = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--nets", "lenet", "--ways",
                          "own,own-copies,own-pruned,peer-timed", "--repeats", "8", "--mode", "untuned",
                          "--interleave"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    out = got.stdout
    assert re.search(r"^lenet: 4 processes open, timed in turn, 8 samples each \(own \d, own-copies \d, own-pruned "
                     r"\d, peer-timed \d passes", out, re.M), out
    for way in ("own", "own-copies", "own-pruned", "peer-timed"):
        assert re.search(rf"^lenet {way}: PASS, wall [0-9.]+ ms \(median of 8\)", out, re.M), out
    for way in ("own-copies", "own-pruned", "peer-timed"):   # each against own, with its interval
        assert re.search(rf"^lenet +{way} +PASS .* of own \[", out, re.M), out
    bad = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--ways", "own,peer", "--interleave"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert bad.returncode == 2
    said = bad.stderr.strip().splitlines()[-1]
    assert "--interleave times own, own-copies, own-pruned, peer-timed in turn, not peer" in said
    alone = subprocess.run([sys.executable, "benchmarks/tinygrad_own.py", "--ways", "own,own-copies"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert alone.returncode == 2 and "own-copies is timed in turn only" in alone.stderr.strip().splitlines()[-1]
