"""Keras models for the tests, built and run in a child process (through
backends.isolated): TensorFlow must never load in the test process, where
PoCL's compiler breaks beside it.  Only plain data comes back: file paths,
numpy arrays, error messages."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _keras():
    import keras
    return keras


def small_model():
    """Every supported layer type once: same/valid padding, strides, a 3x1
    kernel, activations on layers and as separate layers, Dropout."""
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(11)
    return keras.Sequential([
        keras.Input((20, 18, 3)),
        L.Conv2D(5, 3, padding="same", activation="relu", name="conv.a"),   # a dot: sanitised
        L.Conv2D(4, (3, 1), padding="same", name="b"), L.ReLU(),
        L.MaxPooling2D(2),                                                 # 10x9
        L.Conv2D(6, 3, strides=(1, 2), padding="same", activation="sigmoid"),  # W 9 -> 5: 'same' pads 1 each side
        L.Conv2D(6, 3, strides=2, padding="valid"),                       # 4x2
        L.AveragePooling2D(2), L.Activation("sigmoid"),                   # 2x1
        L.Flatten(), L.Dropout(0.5),
        L.Dense(7, activation="relu"), L.Dense(5), L.Activation("sigmoid"),
    ])


def stride2_same_model():
    keras = _keras()
    keras.utils.set_random_seed(2)
    return keras.Sequential([keras.Input((9, 7, 2)), keras.layers.Conv2D(3, 3, strides=2, padding="same")])


def functional_model():
    """A functional model with the newer kinds: batch norms (random statistics), a residual add,
    a depthwise convolution with 'same' padding at stride 2 (one more row below than above),
    ReLU6, a grouped convolution with tanh, a padded max-pool, a global average pool."""
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(5)
    inp = keras.Input((12, 12, 3))
    a = L.Activation("relu")(L.BatchNormalization(name="bn1")(L.Conv2D(8, 3, padding="same", name="c1")(inp)))
    b = L.BatchNormalization(name="bn2")(L.Conv2D(8, 3, padding="same", use_bias=False, name="c2")(a))
    r = L.ReLU(name="after_add")(L.Add(name="skip")([a, b]))
    d = L.ReLU(max_value=6.0)(L.BatchNormalization(name="bn3")(L.DepthwiseConv2D(3, strides=2, padding="same",
                                                                                  name="dw")(r)))
    g = L.Conv2D(16, 1, groups=4, activation="tanh", name="grouped")(d)
    p = L.MaxPooling2D(3, strides=2, padding="same")(g)
    out = L.Dense(5, activation="sigmoid", name="fc")(L.GlobalAveragePooling2D()(p))
    model = keras.Model(inp, out)
    rng = np.random.default_rng(5)
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n), rng.uniform(-0.1, 0.1, n), rng.uniform(-0.1, 0.1, n),
                               rng.uniform(0.5, 1.5, n)])
    return model


def zoo_model():
    """The layers keras.applications' classifiers use beyond those above: Rescaling and
    Normalization at the input, ZeroPadding2D before a strided convolution, swish,
    SeparableConv2D with hard_swish, a 'same' average pool, Concatenate, a
    squeeze-and-excitation gate (Reshape, MobileNetV3's hard sigmoid written with
    operators, Multiply), a dilated depthwise convolution, a softmax classifier."""
    keras = _keras()
    L = keras.layers
    keras.utils.set_random_seed(7)
    inp = keras.Input((16, 16, 3))
    x = L.Rescaling(1 / 127.5, offset=-1.0)(inp)
    x = L.Normalization(mean=[0.1, -0.2, 0.05], variance=[0.8, 1.2, 0.9])(x)
    x = L.ZeroPadding2D(((0, 1), (0, 1)), name="pad")(x)
    x = L.Conv2D(8, 3, strides=2, activation="swish", name="stem")(x)
    a = L.Conv2D(4, 1, activation="relu", name="a")(x)
    b = L.SeparableConv2D(4, 3, padding="same", activation="hard_swish", name="b")(x)
    c = L.AveragePooling2D(3, strides=1, padding="same", name="c")(x)
    d = L.MaxPooling2D(3, strides=1, name="d")(L.ZeroPadding2D(1, name="d_pad")(a))   # zeros after a relu
    joined = L.Concatenate(name="cat")([a, b, c, d])
    g = L.Reshape((1, 1, 20))(L.GlobalAveragePooling2D(name="squeeze")(joined))
    g = L.Conv2D(8, 1, activation="relu", name="reduce")(g)
    g = L.Conv2D(20, 1, name="expand")(g)
    g = L.ReLU(6.0)(g + 3.0) * (1.0 / 6.0)
    y = L.Multiply(name="excite")([joined, g])
    y = L.DepthwiseConv2D(3, dilation_rate=2, padding="same", name="dilated")(y)
    out = L.Dense(5, activation="softmax", name="classes")(L.GlobalAveragePooling2D()(y))
    return keras.Model(inp, out)


def keras_output(model, x_nchw: np.ndarray) -> np.ndarray:
    """Keras's own output for our canonical input, in our canonical layout."""
    y = np.asarray(model(x_nchw.transpose(0, 2, 3, 1), training=False))
    return y.transpose(0, 3, 1, 2) if y.ndim == 4 else y


def save(builder: str, folder: str, x: np.ndarray, suffixes=("keras", "h5")) -> tuple[dict, np.ndarray]:
    """Model `builder` saved in `folder` once per suffix; returns the paths and
    Keras's output on `x`."""
    model = globals()[builder]()
    paths = {}
    for suffix in suffixes:
        paths[suffix] = str(Path(folder) / f"{builder.replace('_', '-')}.{suffix}")
        model.save(paths[suffix])
    return paths, keras_output(model, x)


# Models the importer must refuse: name -> the layers after an (8, 8, 2) input,
# or (layers, input shape); the test holds the words each message must contain.
def _refusals(L):
    return {
        "zero-padding": [L.Conv2D(2, 3), L.ZeroPadding2D(1, name="zp")],
        "selu": [L.Conv2D(2, 3), L.Activation("selu", name="s")],
        "cropping-channels-first": [L.Cropping2D(((1, 1), (0, 0)), data_format="channels_first", name="crop")],
        "softmax-on-pixels": [L.Dense(3, activation="softmax", name="pixelwise")],
        "second-activation": [L.Conv2D(2, 3, activation="relu"), L.Activation("sigmoid", name="twice")],
        "relu5": [L.ReLU(max_value=5.0, name="relu5")],
        "activation-first": [L.Activation("relu", name="first")],
        "leaky-relu": [L.Conv2D(2, 3), L.LeakyReLU(name="leaky")],
        "flatten-last": [L.Conv2D(2, 3), L.Flatten()],
        "flatten-twice": [L.Flatten(), L.Flatten(name="again")],
        "flat-input": ([L.Dense(3)], (10,)),
    }


def refusal(case: str) -> str:
    """The importer's message for refused model `case`, or '' if it was accepted."""
    from nets.errors import UserError
    from nets.keras_import import import_model
    keras = _keras()
    L = keras.layers
    if case == "shared-layer":
        inp = keras.Input((8, 8, 2))
        conv = L.Conv2D(2, 3, padding="same", name="twice_used")
        model = keras.Model(inp, conv(conv(inp)))
    elif case == "branch-activation":   # the conv's output is read by the add too: relu cannot fold into it
        inp = keras.Input((8, 8, 2))
        a = L.Conv2D(2, 3, padding="same", name="c")(inp)
        model = keras.Model(inp, L.Add()([a, L.Activation("relu", name="act")(a)]))
    elif case == "dense-branch-activation":   # the same on a dense layer's (N, features): no layer for it
        inp = keras.Input((8, 8, 2))
        a = L.Dense(3, name="d")(L.Flatten()(inp))
        model = keras.Model(inp, L.Add()([a, L.Activation("relu", name="act")(a)]))
    else:
        layers = _refusals(keras.layers)[case]
        layers, shape = layers if isinstance(layers, tuple) else (layers, (8, 8, 2))
        model = keras.Sequential([keras.Input(shape), *layers])
    try:
        import_model(model, "m")
    except UserError as exc:
        return str(exc)
    return ""


def train_digits_smoke() -> tuple[dict, np.ndarray]:
    """scripts/train_digits.py for one epoch on 64 images: (our weights, Keras's outputs)."""
    path = Path(__file__).resolve().parent.parent / "scripts" / "train_digits.py"
    spec = importlib.util.spec_from_file_location("train_digits", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.train(epochs=1, limit=64)
