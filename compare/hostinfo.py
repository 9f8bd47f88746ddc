"""What the results say about the machine they came from."""
from __future__ import annotations

import os
import platform
import sys


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> dict:
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
