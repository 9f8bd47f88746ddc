"""Tuning, as one part.  Every search the comparison depends on is a scope
registered here (scopes.py), the way backends register, each a folder of
the same shape (its search, its farm hook where it has one, and scope.py:
its check, run and show): CLBlast's own default search (clblast/), our
tiles (tiles/) and prepare-time forms (forms/), tinygrad's schedule search (tinygrad/), OpenCV DNN's
convolution auto-tuning (opencv/).  The backends never import a search:
they read what it chose through the store (backends/store/).  One entry: `tune(Request) -> Summary` checks the
request whole before any budget is spent, shares one Budget (budget.py)
among the scopes asked for, and runs each here or, with a scheduler's
Address (address.py), on a Dask farm's workers of the device's kind
(farm.py); `show(Request)` says how deep each went.  Every scope keeps
what it finds in the tuning folder (backends/cache.py: COMPARE_CACHE_DIR
moves it) through the one locked store (backends/store/: the
folder's lock, what is on disk merged in, the whole file renamed into
place), so two tunes on one folder, or a farm's client and a local tune,
lose nothing of each other's.
"""
from __future__ import annotations

from .address import Address, parse as parse_address
from .budget import Budget
from .driver import check, show, shown, tune
from .request import Harness, Request, Summary
from .scopes import SCOPES, parse as parse_scopes

__all__ = ["Address", "Budget", "Harness", "Request", "SCOPES", "Summary", "check", "parse_address", "parse_scopes",
           "show", "shown", "tune"]
