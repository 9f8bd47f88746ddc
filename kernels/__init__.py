"""OpenCL kernel sources (.cl files beside this module), read by name.

A line `#include "name.h"` is replaced by the text of kernels/name.h here,
on the host, rather than left to the driver's -I search: a driver's program
cache (PoCL's, NVIDIA's) keys on the source it is given, so a change to a
header can never leave a stale binary in use.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([A-Za-z0-9_.]+\.h)"[ \t]*$', re.MULTILINE)


def _read(filename: str) -> str:
    try:
        return resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel source kernels/{filename} is missing from the installation") from None


def expand_includes(text: str) -> str:
    """`text` with its #include "x.h" lines replaced by kernels/x.h (once each)."""
    seen: set[str] = set()

    def expand(match) -> str:
        header = match.group(1)
        if header in seen:
            return f"// {header} included above"
        seen.add(header)
        return f"// ---- kernels/{header}\n{_INCLUDE.sub(expand, _read(header))}\n// ---- end of kernels/{header}"
    return _INCLUDE.sub(expand, text)


@lru_cache(maxsize=None)
def kernel_source(filename: str) -> str:
    """The source of kernels/`filename` with its includes expanded."""
    return expand_includes(_read(filename))
