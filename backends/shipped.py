"""A net's weights go to each child through one set of files, not pickled down every child's socket.

The first VGG-16 answer sends half a gigabyte of weights to each of up to a dozen children (every mode of
`clblast-best` and `torch`, each draw, each child screened and started again); pickling each copy held the
runner's main thread for seconds (the H200 notes' step 48).  `shipped(weights)` writes the arrays once, as .npy
files in a folder of this process's own, and stands for them in a request: it pickles as the folder's name,
and a child reads the arrays back from the page cache.  The arrays are made read-only here once written (a
change after would not reach the files: it raises instead).  The last KEPT sets stay written; the folders go
when this process ends."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

import numpy as np

KEPT = 2   # a sweep's runs come one after another: the one running, and the one before while its children close
_LOCK = threading.Lock()
_WRITTEN: dict[int, tuple[dict, str]] = {}   # id(weights) -> (the weights, kept so the id stays theirs; folder)


def _read(folder: str, names: list[str]) -> dict[str, np.ndarray]:
    return {name: np.load(os.path.join(folder, f"{i}.npy")) for i, name in enumerate(names)}


class Shipped(dict):
    """The weights themselves here; in a child, read from `folder` as it is unpickled."""

    def __init__(self, weights: dict, folder: str):
        super().__init__(weights)
        self.folder = folder

    def __reduce__(self):
        return _read, (self.folder, list(self))


def shipped(weights: dict):
    """`weights` as a request carries them to a child: written once for every child of this process (a dict of
    arrays; anything else goes as it is)."""
    if not weights or not all(isinstance(v, np.ndarray) for v in weights.values()):
        return weights
    with _LOCK:
        known = _WRITTEN.get(id(weights))
        if known is None:
            folder = tempfile.mkdtemp(prefix="compare-weights-")
            try:
                for i, value in enumerate(weights.values()):
                    np.save(os.path.join(folder, f"{i}.npy"), value, allow_pickle=False)
            except BaseException:   # a full disk: the pickle path still works
                shutil.rmtree(folder, ignore_errors=True)
                return weights
            for value in weights.values():
                value.flags.writeable = False
            known = _WRITTEN[id(weights)] = (weights, folder)
            while len(_WRITTEN) > KEPT:
                shutil.rmtree(_WRITTEN.pop(next(iter(_WRITTEN)))[1], ignore_errors=True)
    return Shipped(weights, known[1])


@atexit.register
def _remove() -> None:
    with _LOCK:
        for _, folder in _WRITTEN.values():
            shutil.rmtree(folder, ignore_errors=True)
        _WRITTEN.clear()
