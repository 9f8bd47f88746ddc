"""Real data: scikit-learn's handwritten digits as LeNet-5 input, and the
top-1 accuracy every backend gets on a held-out split.

`sklearn.datasets.load_digits` ships 1797 8x8 images (values 0..16) with the
library, so nothing is downloaded.  Each image is scaled to LeNet's 32x32
input as MNIST was for LeNet-5: every pixel becomes a 3x3 block (nearest
neighbour, 8x8 -> 24x24) centred in a 32x32 field with a 4-pixel zero
border; values are divided by 16 into [0, 1].  A fixed permutation (seed 0)
orders the images; the last 20% (360 images) are held out for the check and
never trained on (scripts/train_digits.py trains on the rest).

The class scores are the first 10 of F6's 84 sigmoid outputs (that is how
the committed weights were trained); a prediction is their argmax.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import nets
from nets.errors import UserError

from .results import BackendDigits, DigitsSummary

SPLIT_SEED = 0
HELD_OUT = 360          # the last 20% of 1797 images, rounded
CLASSES = 10
INPUT_SHAPE = (1, 32, 32)
TRAINED_WEIGHTS = Path(nets.__file__).resolve().parent / "data" / "lenet-digits.npz"   # scripts/train_digits.py


def load_digits_32() -> tuple[np.ndarray, np.ndarray]:
    """All 1797 digits as float32 (N, 1, 32, 32) in [0, 1], and their labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise UserError("--data digits needs scikit-learn: pip install 'clblast-compare[digits]'") from None
    data = load_digits()
    small = data.images.astype(np.float32) / np.float32(16.0)            # (N, 8, 8)
    big = np.repeat(np.repeat(small, 3, axis=1), 3, axis=2)             # (N, 24, 24)
    x = np.zeros((len(big),) + INPUT_SHAPE, np.float32)
    x[:, 0, 4:28, 4:28] = big
    return x, data.target.astype(np.int64)


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_held_out, y_held_out), the same on every machine."""
    x, y = load_digits_32()
    order = np.random.default_rng(SPLIT_SEED).permutation(len(x))
    train, test = order[:-HELD_OUT], order[-HELD_OUT:]
    return x[train], y[train], x[test], y[test]


def predictions(outputs: np.ndarray) -> np.ndarray:
    return np.argmax(np.asarray(outputs).reshape(len(outputs), -1)[:, :CLASSES], axis=1)


def held_out_input(net, batch: int | None) -> tuple[np.ndarray, dict]:
    """The held-out images (the first `batch` of them) as a net's input."""
    if tuple(net.input_shape) != INPUT_SHAPE or int(np.prod(net.output_shape)) < CLASSES:
        raise UserError(f"--data digits feeds 1x32x32 images and reads {CLASSES} class scores; net {net.name} "
                        f"takes {'x'.join(map(str, net.input_shape))} and gives {int(np.prod(net.output_shape))}")
    x = split()[2]
    if batch is not None and batch > len(x):
        raise UserError(f"--batch {batch} is more than the {len(x)} held-out digits")
    x = x[:batch] if batch else x
    return np.ascontiguousarray(x), {"kind": "digits",
                                     "path": f"sklearn digits, held-out {len(x)} images (split seed {SPLIT_SEED})"}


def add_accuracy(results, outputs) -> None:
    """Each backend's top-1 accuracy on the held-out digits, and how many of its
    predictions differ from numpy's (from the float64 oracle's when numpy did
    not run), from the outputs kept beside the results."""
    labels = split()[3][:results.net.batch]
    oracle = predictions(outputs.reference) if outputs.reference is not None else None
    numpy_out = outputs.backends.get("numpy")
    against, base = ("numpy", predictions(numpy_out)) if numpy_out is not None else ("oracle", oracle)
    results.digits = DigitsSummary(
        images=int(len(labels)), compared_with=against,
        oracle_accuracy=float(np.mean(oracle == labels)) if oracle is not None else None,
        oracle_differ=int(np.sum(oracle != base)) if oracle is not None and base is not None else None)
    for b in results.backends:
        y = outputs.backends.get(b.name)
        if y is None:
            continue
        pred = predictions(y)
        b.digits = BackendDigits(float(np.mean(pred == labels)), int(np.sum(pred != base)) if base is not None else None)


def disagreements(results) -> list[str]:
    """Backends whose predictions differ from the ones they were compared with."""
    return [b.name for b in results.backends if b.digits and b.digits.differ]


def accuracy_table(results) -> str:
    from .terminal import table
    d = results.digits
    rows = []
    if d.oracle_accuracy is not None:
        rows.append(["oracle (float64)", "", f"{100 * d.oracle_accuracy:.2f}%", _count(d.oracle_differ)])
    for b in results.backends:
        if b.digits:
            rows.append([b.name, b.status, f"{100 * b.digits.accuracy:.2f}%", _count(b.digits.differ)])
        else:
            rows.append([b.name, b.status, "-", b.reason.splitlines()[0] if b.reason else "-"])
    head = (f"top-1 accuracy on {d.images} held-out digits (class = argmax of the first {CLASSES} outputs)\n")
    return head + table(rows, ["backend", "status", "top-1", f"predictions differing from {d.compared_with}"])


def _count(n) -> str:
    return "-" if n is None else ("none" if n == 0 else str(n))
