"""A Keras model file checked before Keras reads it: a whole zip (.keras) or HDF5 (.h5)
container, and every layer's windows, counts and epsilon in range in its saved JSON, so a
damaged or hand-edited file is refused in one line that names the value, not deep inside Keras."""
from __future__ import annotations

import math
import zipfile
import zlib
from pathlib import Path

from ..errors import UserError

def check_container(path: Path) -> None:
    """A UserError when `path` is not a whole zip (.keras) or HDF5 (.h5) file.
    Checked before Keras sees it: Keras calls a .keras file cut short
    "File not found", which sends the user looking for the wrong thing."""
    bad = f"Keras model file {path} is not a valid model file"
    if path.suffix.lower() == ".keras":
        if not zipfile.is_zipfile(path):
            raise UserError(f"{bad}: truncated, or not a zip archive (a .keras file is one); save the model again")
        try:
            with zipfile.ZipFile(path) as z:
                damaged = z.testzip()
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as exc:
            raise UserError(f"{bad}: a damaged zip archive ({exc}); save the model again") \
            from None
        if damaged is not None:
            raise UserError(f"{bad}: {damaged} in its zip archive is damaged; save the model again")
        return
    try:
        import h5py   # comes with Keras; it tells a file cut short by the length its header promises
    except ImportError:
        return        # Keras will say it cannot read .h5 files
    if not h5py.is_hdf5(path):
        raise UserError(f"{bad}: not an HDF5 file (a .h5 model is one); save the model again")
    try:
        h5py.File(path, "r").close()
    except OSError as exc:
        why = "a truncated HDF5 file" if "truncated" in str(exc) else str(exc).strip().splitlines()[0]
        raise UserError(f"{bad}: {why}; save the model again") from None


MAX_CONFIG_BYTES = 64 * 2**20   # a model's layer configuration: kilobytes, a megabyte for the largest zoo models
_WINDOWS = ("kernel_size", "strides", "pool_size", "dilation_rate")   # each a number, or numbers, at least 1
_COUNTS = ("filters", "units", "groups", "depth_multiplier")          # each a whole number, at least 1


def config_text(path: Path) -> str | None:
    """The JSON of the model's layers, as saved in the file (a .keras archive's config.json, a .h5 file's
    model_config attribute); None where there is none to read (Keras then says what is wrong)."""
    try:
        if path.suffix.lower() == ".keras":
            with zipfile.ZipFile(path) as z:
                info = z.getinfo("config.json")
                if info.file_size > MAX_CONFIG_BYTES:
                    raise UserError(f"Keras model file {path}: its config.json claims {info.file_size:,} bytes, more "
                                    f"than a model's configuration holds; save the model again")
                return z.read(info).decode("utf-8")
        import h5py
        with h5py.File(path, "r") as f:
            text = f.attrs.get("model_config")
        return text.decode("utf-8") if isinstance(text, bytes) else text
    except (KeyError, ImportError, OSError, UnicodeDecodeError, zipfile.BadZipFile):
        return None


def check_config(path: Path, text: str | None) -> None:
    """Every layer's windows (kernel_size, strides, pool_size, dilation_rate), counts (filters, units,
    groups, depth_multiplier) and epsilon in their valid range, read from the saved JSON before Keras
    builds anything from it: a hand-edited file may hold a zero stride, and Keras would then fail
    deep inside with a message that names no value."""
    if text is None:
        return
    import json
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):
        raise UserError(f"Keras model file {path}: its layer configuration is not JSON; save the model again") \
            from None
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        # Keras would index it as a model's and fail on its own ("list indices must be integers")
        shape = "a list" if isinstance(config, list) else "an object without 'class_name'" \
            if isinstance(config, dict) else f"a {type(config).__name__}"
        raise UserError(f"Keras model file {path}: its configuration is {shape}, not a model's (an object naming "
                        f"its class); the file was damaged or edited: save the model again")
    stack = [config]
    while stack:
        obj = stack.pop()
        if isinstance(obj, list):
            stack.extend(obj)
            continue
        if not isinstance(obj, dict):
            continue
        stack.extend(obj.values())
        layer = obj.get("config") if isinstance(obj.get("class_name"), str) else None
        if isinstance(layer, dict):
            _check_layer_config(path, f"layer {layer.get('name')} ({obj['class_name']})", layer)


def _check_layer_config(path: Path, what: str, config: dict) -> None:
    def bad(key, rule):
        raise UserError(f"Keras model file {path}: {what}: {key} {config[key]!r} {rule}; the file was damaged or "
                        f"edited: save the model again")

    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)
    for key in _WINDOWS:
        value = config.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(whole(v) and v >= 1 for v in values):
            bad(key, "is not a window's size: each must be a whole number, at least 1")
    for key in _COUNTS:
        value = config.get(key)
        if value is not None and not (whole(value) and value >= 1):
            bad(key, "must be a whole number, at least 1")
    eps = config.get("epsilon")
    if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool)
                                and math.isfinite(eps) and eps >= 0):
        bad("epsilon", "must be a finite number, 0 or more")
