"""Net parameters: made from a seed, or read from a user's .npz file.

The file holds one float32 array per parameter, named '<layer>.<param>'
(e.g. 'conv1_1.weight'); the README lists the layouts.  A file is refused,
with the array named, when an array is missing, extra, mis-shaped, not a
float array, or holds NaN/Inf.
"""
from __future__ import annotations

import hashlib
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .errors import UserError

from .spec import Activation, LayerKind, Net


def _rng(seed: int, name: str) -> np.random.Generator:
    # One stream per array, so an array depends only on the seed and its name.
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode())]))


def init_weights(net: Net, seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled normal weights for ReLU layers, LeCun-scaled for the others,
    so activations keep their size through all 16 layers of VGG-16; small
    uniform biases so a backend that drops a bias is caught."""
    weights = {}
    for i, layer in enumerate(net.layers):
        for pname, shape in layer.param_shapes(net.in_shape(i)).items():
            key = f"{layer.name}.{pname}"
            rng = _rng(seed, key)
            if pname == "weight":
                fan_in = int(np.prod(shape[1:])) if layer.kind == LayerKind.CONV else shape[0]
                gain = 2.0 if layer.activation in (Activation.RELU, Activation.RELU6) else 1.0
                arr = rng.standard_normal(shape, dtype=np.float32)
                arr *= np.float32(np.sqrt(gain / fan_in))
            elif pname in ("coeff", "scale", "var"):   # batch norm's var must be positive
                arr = rng.uniform(0.5, 1.5, shape).astype(np.float32)
            else:
                arr = rng.uniform(-0.1, 0.1, shape).astype(np.float32)
            weights[key] = arr
    return weights


def make_input(net: Net, batch: int, seed: int = 0) -> np.ndarray:
    """A batch of images with values in [0, 1), like scaled pixels."""
    return _rng(seed, "input").random((batch,) + tuple(net.input_shape), dtype=np.float32)


def save_weights(path: str | os.PathLike, weights: dict[str, np.ndarray]) -> None:
    """`weights` as an .npz file at `path` (`compare weights` writes it to a temporary
    file renamed into place, so an interrupted write leaves nothing behind)."""
    with open(path, "wb") as f:
        np.savez(f, **{k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()})


def load_weights(path: str | os.PathLike, net: Net) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"weights file {path} not found; `compare weights --net {net.name} --out {path}` writes one")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"weights file {path} is not a readable .npz file ({exc})") from None
    validate_weights(arrays, net, str(path))
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()}


def validate_weights(arrays: dict[str, np.ndarray], net: Net, source: str) -> None:
    wanted = net.param_shapes()
    for key, shape in wanted.items():
        if key not in arrays:
            raise UserError(f"weights file {source} lacks array '{key}' of shape {shape} needed by net {net.name}")
    for key in arrays:
        if key not in wanted:
            raise UserError(f"weights file {source} has array '{key}', which net {net.name} does not use")
    for key, shape in wanted.items():
        arr = arrays[key]
        if tuple(arr.shape) != tuple(shape):
            raise UserError(f"array '{key}' in {source} has shape {tuple(arr.shape)}, net {net.name} needs {shape}")
        if not np.issubdtype(arr.dtype, np.floating):
            raise UserError(f"array '{key}' in {source} has dtype {arr.dtype}; weights must be floating point")
        if not np.all(np.isfinite(arr)):
            raise UserError(f"array '{key}' in {source} holds NaN or Inf values")


def weights_digest(weights: dict[str, np.ndarray]) -> str:
    """A short fingerprint so results say exactly which weights were used."""
    h = hashlib.sha256()
    for key in sorted(weights):
        h.update(key.encode())
        h.update(np.ascontiguousarray(weights[key], dtype=np.float32).tobytes())
    return h.hexdigest()[:16]
