"""CLBlast's own tuners (Debian's clblast-utils: clblast_tuner_xgemm, ...),
run on one device under a time cap, their results read as they print them.

Facts about the tuners of CLBlast 1.5.3 this relies on:
- `-fraction F` is a divisor: each stage tries (its configurations) / F of
  them, a random sample in a fixed order; a stage of 0 tries only the
  reference.  So F is chosen from the stage sizes and the time allowed.
- A stage prints `* Parameters explored: NAME ...` and then one table row
  per configuration, the values in that order, and `results match` when the
  configuration's output matched the reference.  Rows are read as they come,
  so a tuner stopped at its time cap still yields the best it had tried.
- The JSON files it writes (in its working folder) name the device it ran
  on; the platform and device are picked by `clinfo -l`'s order, which is
  the tuners' own (it can differ from pyopencl's), and the name is checked.
- Xgemm's tuner needs m and n multiples of 128 (and k of 32): its sizes are
  rounded up; the indirect kernel pads its matrices to such tiles anyway.
"""
from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# tuner -> (stage sizes at any shape, summed: for -fraction), and which
# database kernel a stage's parameter names belong to
TUNERS = {
    "xgemm": 138351,          # 578 + 120800 + 407 + 16566
    "xgemm_direct": 8466,     # 46 + 8420
    "xgemv": 110,             # 12 + 30 + 68 (Xgemv, XgemvFast, XgemvFastRot)
    "xconvgemm": 193,
    "copy_fast": 144,
    "copy_pad": 81,
    "transpose_fast": 96,
    "transpose_pad": 38,
    "xaxpy": 96,
}
KERNEL_OF = {   # a parameter that only that kernel has -> its database name
    "GEMMK": "Xgemm", "WGS1": "Xgemv", "WGS2": "XgemvFast", "WGS3": "XgemvFastRot",
    "COPY_DIMX": "Copy", "PAD_DIMX": "Pad", "TRA_DIM": "Transpose", "PADTRA_TILE": "Padtranspose",
    "WGS": "Xaxpy",
}
SECONDS_PER_CONFIG = 1.0   # first guess (PoCL compiles each in 0.3-1 s); then measured per run
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def binary(tuner: str) -> str:
    return f"clblast_tuner_{tuner}"


def missing_tuners() -> list[str]:
    return [binary(t) for t in TUNERS if shutil.which(binary(t)) is None]


def kernel_of(tuner: str, names: list[str]) -> str:
    for name in names:
        if name in KERNEL_OF:
            return KERNEL_OF[name]
    return "Xconvgemm" if tuner == "xconvgemm" else "XgemmDirect"


@dataclass
class Job:
    """One tuner run: the tuner, its size options, and what it is for."""

    tuner: str
    args: dict                 # option -> value, e.g. {"m": 3136, "n": 64, "k": 27}
    label: str                 # for progress and the tuning file: 'device' or a layer's name(s)
    scope: str = "device"      # 'device': the tuner's own sizes (as the study tuned); 'shape': a layer's

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.args.items()))


@dataclass
class Found:
    parameters: dict
    ms: float


@dataclass
class Outcome:
    best: dict = field(default_factory=dict)     # kernel -> Found
    tried: int = 0
    matched: int = 0
    stopped_at_cap: bool = False
    seconds: float = 0.0
    device_seen: str | None = None               # from the tuner's JSON, where one was written


def tuner_device(platform_name: str, device_name: str) -> tuple[int, int]:
    """The (platform, device) indices of a device in the tuners' order (`clinfo -l`)."""
    try:
        text = subprocess.run(["clinfo", "-l"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    platform = -1
    for line in text.splitlines():
        m = re.match(r"Platform #(\d+): (.*)", line.strip())
        if m:
            platform = int(m.group(1)) if m.group(2).strip() == platform_name else -1
            continue
        m = re.search(r"Device #(\d+): (.*)", line)
        if m and platform >= 0 and m.group(2).strip() == device_name:
            return platform, int(m.group(1))
    raise LookupError(f"`clinfo -l` does not list {device_name!r} on platform {platform_name!r}; "
                      f"install clinfo (apt-get install clinfo) or check OCL_ICD_VENDORS")


def fraction_for(tuner: str, configs: int) -> float:
    """The -fraction that samples about `configs` configurations in all."""
    return max(TUNERS[tuner] / max(configs, 1), 1.0)


def _parse_row(line: str, names: list[str]):
    """(parameters, ms) of a table row whose output matched, else None."""
    cells = [c.strip() for c in line.split("|")]
    if len(cells) < 10 or not cells[1].isdigit() or "results match" not in cells[9]:
        return None
    values = cells[3].split()
    ms = cells[7].split()
    if len(values) != len(names) or not ms:
        return None
    try:
        return dict(zip(names, map(int, values))), float(ms[0])
    except ValueError:
        return None


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run(job: Job, where: tuple[int, int], seconds: float, configs: int, progress=lambda s: None) -> Outcome:
    """Run `job`'s tuner on device `where` for at most `seconds`, sampling
    about `configs` configurations; the best matching one per kernel."""
    out = Outcome()
    args = [binary(job.tuner), "-platform", str(where[0]), "-device", str(where[1]), "-precision", "32",
            "-runs", "2", "-fraction", f"{fraction_for(job.tuner, configs):.4f}"]
    for k, v in job.args.items():
        args += [f"-{k}", str(v)]
    names: list[str] = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="clblast-tune-") as folder:
        proc = subprocess.Popen(args, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        try:
            while True:
                left = seconds - (time.monotonic() - start)
                if left <= 0:
                    out.stopped_at_cap = True
                    break
                try:
                    line = lines.get(timeout=min(left, 1.0))
                except queue.Empty:
                    continue
                if line is None:
                    break
                line = _ANSI.sub("", line)
                if line.startswith("* Parameters explored:"):
                    names = line.split(":", 1)[1].split()
                    continue
                row = _parse_row(line, names) if names else None
                if line.startswith("|") and line.split("|")[1].strip().isdigit():
                    out.tried += 1
                    progress(f"{job.tuner} {job.label}: {out.tried} configurations, {time.monotonic() - start:.0f} s")
                if row:
                    out.matched += 1
                    kernel = kernel_of(job.tuner, names)
                    if kernel not in out.best or row[1] < out.best[kernel].ms:
                        out.best[kernel] = Found(*row)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        out.device_seen = _device_in_json(Path(folder))
    out.seconds = time.monotonic() - start
    return out


def _device_in_json(folder: Path) -> str | None:
    for path in sorted(folder.glob("clblast_*.json")):
        try:
            return json.loads(path.read_text(encoding="utf-8")).get("device")
        except (OSError, ValueError):
            continue
    return None


def environment_ok() -> str | None:
    """None when the tuners can run here, else why not."""
    missing = missing_tuners()
    if missing:
        return (f"CLBlast's tuners are not installed ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): "
                f"apt-get install clblast-utils")
    if shutil.which("clinfo") is None:
        return "clinfo is not installed (apt-get install clinfo): the tuners' device order is read from it"
    return None
