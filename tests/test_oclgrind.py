"""Every OpenCL backend's kernels under Oclgrind, a simulator that reports
out-of-bounds reads and writes, uninitialised reads and data races.  Any
report fails the test.

The uninitialised-value plugin of Oclgrind 21.10 (Debian 12) cannot run
CLBlast's own kernels: it stops with "Unsupported instruction: freeze" in
Xim2colKernelNormal and XconvgemmNormal, leaving their outputs unwritten.
So the backends built on CLBlast run with the bounds and data-race checks
only; their buffers still start as NaN, so an unwritten element fails the
output check that follows."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import backends

# tinygrad's and OpenCV's kernels are their own, and Oclgrind's platform is no ICD a child of its own can be
# given alone
OPENCL = [n for n in backends.names() if backends.unavailable_reason(n) is None
          and backends.backend_class(n).uses_opencl and n not in ("tinygrad", "opencv")]
SCRIPT = Path(__file__).with_name("oclgrind_net.py")


@pytest.mark.skipif(shutil.which("oclgrind") is None and os.environ.get("COMPARE_REQUIRE_ALL") != "1",
                    reason="oclgrind is not installed (apt-get install oclgrind)")
@pytest.mark.long
@pytest.mark.parametrize("name", OPENCL)
def test_kernels_are_clean_under_oclgrind(name, tmp_path):
    log = tmp_path / "oclgrind.log"
    checks = ["--data-races"] if name.startswith("clblast") else ["--uninitialized", "--data-races"]
    cmd = ["oclgrind", "--log", str(log), *checks, "--num-threads", "2", sys.executable, str(SCRIPT), name]
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parent.parent))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    report = log.read_text() if log.exists() else ""
    assert report.strip() == "", f"Oclgrind reported:\n{report[:4000]}"
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "FAIL" not in proc.stdout and proc.stdout.count("PASS") >= (1 if name == "clblast-best" else 2), proc.stdout
