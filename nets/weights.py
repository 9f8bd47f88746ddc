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

import numpy as np

from .errors import UserError
from .npy import check_holds, header_of, read_data
from .userfile import regular_file

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
            elif pname == "cosine_scale":   # Swin v2's exp(logit_scale): from 10 at its start up to 100
                arr = rng.uniform(5.0, 30.0, shape).astype(np.float32)
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
    """The weights in the user's .npz file, each array's header checked against the net and against the
    bytes the archive holds for it before its data is read (a header or the archive may claim any size)."""
    path = regular_file(path, "weights file", fix=f"`compare weights --net {net.name} --out {path}` writes one")
    wanted = net.param_shapes()
    try:
        with zipfile.ZipFile(path) as z:
            members = {}
            for info in z.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if key in members:
                    raise UserError(f"weights file {path} holds array '{key}' twice")
                members[key] = info
            _same_keys(set(members), wanted, net, str(path))
            arrays = {k: _member(z, members[k], wanted[k], str(path), net.name) for k in wanted}
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as exc:
        raise UserError(f"weights file {path} is not a readable .npz file ({exc})") from None
    validate_weights(arrays, net, str(path))
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()}


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple, source: str, net: str) -> np.ndarray:
    """One array of an .npz archive, its header held against the net's `shape` and against the size the
    archive records for it (a decompressed member cannot outgrow that: zipfile checks) before reading."""
    what = f"array '{info.filename.removesuffix('.npy')}' in {source}"
    with z.open(info) as f:
        header = header_of(f, what)
        if tuple(header.shape) != tuple(shape):
            raise UserError(f"{what} has shape {header.shape}, net {net} needs {tuple(shape)}")
        if header.dtype.kind != "f":
            raise UserError(f"{what} has dtype {header.dtype}; weights must be floating point")
        check_holds(header, info.file_size - header.offset, what)
        return read_data(f, header, what)


def _same_keys(have: set, wanted: dict, net: Net, source: str) -> None:
    for key, shape in wanted.items():
        if key not in have:
            raise UserError(f"weights file {source} lacks array '{key}' of shape {shape} needed by net {net.name}")
    for key in sorted(have):
        if key not in wanted:
            raise UserError(f"weights file {source} has array '{key}', which net {net.name} does not use")


def validate_weights(arrays: dict[str, np.ndarray], net: Net, source: str) -> None:
    wanted = net.param_shapes()
    _same_keys(set(arrays), wanted, net, source)
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
