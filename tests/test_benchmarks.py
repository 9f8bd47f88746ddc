"""Every benchmark script starts: its imports resolve and its options parse (`--help`), so a module moved
elsewhere in the tree cannot leave a benchmark broken until a GPU call finds it."""
from __future__ import annotations

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
