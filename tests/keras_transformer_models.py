"""Keras models for issue 45's tests, built from keras.applications' own code
at a small size (run in a child process, as tests/keras_models.py's)."""
from __future__ import annotations

import numpy as np

from pathlib import Path

from keras_models import _keras, keras_output


def convnext_model():
    """keras.applications' ConvNeXt (its stem and downsampling Sequential models, LayerNormalization, Dense on
    pixels, gelu, LayerScale, StochasticDepth, the head's LayerNormalization), one block a stage, 8..16 wide."""
    _keras().utils.set_random_seed(7)
    from keras.src.applications.convnext import ConvNeXt
    return ConvNeXt(depths=[1, 1, 1, 1], projection_dims=[8, 16, 16, 16], drop_path_rate=0.1,
                    layer_scale_init_value=0.5, default_size=32, name="convnext_small_test", weights=None,
                    input_shape=(32, 32, 3), classes=10, classifier_activation="softmax")


def nasnet_model():
    """keras.applications' NASNet (its Cropping2D after ZeroPadding2D, separable convolutions, 'same' pools)
    with one cell a stage."""
    _keras().utils.set_random_seed(8)
    from keras.src.applications.nasnet import NASNet
    return NASNet(input_shape=(32, 32, 3), penultimate_filters=96, num_blocks=1, stem_block_filters=8,
                  skip_reduction=False, filter_multiplier=2, weights=None, classes=10, default_size=32)


def save(builder: str, folder: str, x: np.ndarray) -> tuple[str, np.ndarray]:
    """Model `builder` saved as .keras in `folder`; its path and Keras's output on `x`."""
    model = globals()[builder]()
    path = str(Path(folder) / f"{builder.replace('_', '-')}.keras")
    model.save(path)
    return path, keras_output(model, x)
