"""Counting the CLBlast routine calls a forward pass makes (backends/base.py Launches).

Every call the CLBlast backends make goes through pyclblast's routine functions or our C
bindings' `library._call`, each looked up on its module when called; for one untimed pass both
are wrapped by a counter and then put back.  What each routine enqueues inside CLBlast (an
indirect xGEMM's pad and transpose kernels around the GEMM) is the library's and not counted."""
from __future__ import annotations

import types
from contextlib import contextmanager

from . import library

# pyclblast's names that are helpers, not BLAS routines
_HELPERS = {"check_array", "check_dtype", "check_matrix", "check_vector", "dtype_size", "dtypes_str",
            "float32_to_float16", "override_parameters"}


def _routines(module) -> list[str]:
    return [n for n in dir(module) if not n.startswith("_") and n not in _HELPERS
            and callable(getattr(module, n)) and not isinstance(getattr(module, n), (type, types.ModuleType))]


@contextmanager
def routine_calls():
    """Yields a callable giving the routine calls made since the block began."""
    import pyclblast
    calls = [0]

    def counted(fn):
        def call(*args, **kwargs):
            calls[0] += 1
            return fn(*args, **kwargs)
        return call

    saved = [(pyclblast, n, getattr(pyclblast, n)) for n in _routines(pyclblast)] + [(library, "_call", library._call)]
    for module, name, fn in saved:
        setattr(module, name, counted(fn))
    try:
        yield lambda: calls[0]
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)
