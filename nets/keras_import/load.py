"""A Keras model file (.keras or .h5) as one of our nets: checked, loaded by Keras, imported."""
from __future__ import annotations

import os

import numpy as np

from ..errors import UserError
from ..spec import Net
from ..userfile import regular_file
from .model import import_model, need_keras
from .saved_file import check_config, check_container, config_text


def load_keras(path: str | os.PathLike) -> tuple[Net, dict[str, np.ndarray]]:
    """The model in `path` as (net named after the file, weights)."""
    path = regular_file(path, "Keras model file")
    check_container(path)
    check_config(path, config_text(path))
    keras = need_keras()
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - any loading problem is the file's, said in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load Keras model {path}: {first}") from None
    return import_model(model, path.stem, str(path))
