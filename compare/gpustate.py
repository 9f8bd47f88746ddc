"""An NVIDIA GPU's clocks, power and temperature, read with nvidia-smi where
it is installed: recorded before and after each backend, so a run that
throttled shows it.  Nothing (None) where there is no nvidia-smi."""
from __future__ import annotations

import shutil
import subprocess

FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active")


def available() -> bool:
    return shutil.which("nvidia-smi") is not None


def snapshot() -> list[dict] | None:
    """One dict per GPU of FIELDS (as nvidia-smi prints them), or None."""
    if not available():
        return None
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [dict(zip(FIELDS, (v.strip() for v in line.split(",")))) for line in out.stdout.strip().splitlines()]
