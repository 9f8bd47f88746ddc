"""What the results say about the machine they came from."""
from __future__ import annotations

import os
import platform
import sys

from backends.host import cpu_name


def host_info() -> dict:
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
