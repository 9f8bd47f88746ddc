"""What the results say about the machine they came from."""
from __future__ import annotations

import platform
import sys

import psutil

from backends.host import cpu_name


def host_info() -> dict:
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_name(),
        # the machine's logical CPUs, not this process's affinity: the load recorded beside them (compare/noise.py)
        # is the whole machine's, and a report reads the two together
        "cpus": psutil.cpu_count(),
        "python": sys.version.split()[0],
    }
