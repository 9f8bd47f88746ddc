"""OpenCL kernel sources (.cl files beside this module), read by name."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def kernel_source(filename: str) -> str:
    try:
        return resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel source kernels/{filename} is missing from the installation") from None
