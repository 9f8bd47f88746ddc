"""Train LeNet-5 on scikit-learn's digits with Keras and write its weights in
our .npz format (nets/data/lenet-digits.npz by default).

    .venv/bin/python scripts/train_digits.py [--epochs 20] [--out PATH]

The Keras model is our exact LeNet-5 (nets/lenet.py): sigmoid after every
layer, S2/S4 as average pooling times a trained per-channel coefficient plus
a bias, F6 with 84 sigmoid outputs.  Nothing is added for training: the loss
is a binary cross-entropy of the first 10 of F6's outputs against the one-hot
label (each unit a one-versus-rest detector of its digit), and the other 74
units are left as initialised.  Seeds are fixed and TensorFlow's ops made
deterministic, so a run on the same versions writes the same file.  Trains
on compare/digits.py's training split only (1437 images) and reports the
accuracy on the held-out 360, from Keras and from our numpy backend.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run from a checkout without installing

from compare import digits  # noqa: E402
from nets.weights import save_weights, validate_weights  # noqa: E402
from nets import LENET  # noqa: E402
from nets.keras_import import conv_kernel_from_keras, dense_rows_from_keras  # noqa: E402

SEED = 0


def build_model(keras):
    class Subsample(keras.layers.Layer):
        """LeNet's subsampling: 2x2 mean, times a per-channel coefficient, plus a bias.
        Its input is a sigmoid's output, near 0.5 at the start; coefficient 8 and
        bias -4 put the next sigmoid in its steep range there.  From 1 and 0 the
        net sits on a plateau (it predicts the class prior) for dozens of epochs."""

        def build(self, shape):
            self.coeff = self.add_weight(shape=(shape[-1],), initializer=keras.initializers.Constant(8.0), name="coeff")
            self.bias = self.add_weight(shape=(shape[-1],), initializer=keras.initializers.Constant(-4.0), name="bias")

        def call(self, x):
            pooled = keras.ops.average_pool(x, 2, strides=2, padding="valid")
            return keras.ops.sigmoid(pooled * self.coeff + self.bias)

    L = keras.layers
    return keras.Sequential([
        keras.Input((32, 32, 1)),
        L.Conv2D(6, 5, activation="sigmoid", name="c1"), Subsample(name="s2"),
        L.Conv2D(16, 5, activation="sigmoid", name="c3"), Subsample(name="s4"),
        L.Flatten(), L.Dense(120, activation="sigmoid", name="f5"), L.Dense(84, activation="sigmoid", name="f6"),
    ])


def our_weights(model) -> dict[str, np.ndarray]:
    """The Keras model's weights in our names and layouts."""
    get = {layer.name: layer.get_weights() for layer in model.layers}
    w = {}
    for conv in ("c1", "c3"):
        w[f"{conv}.weight"] = conv_kernel_from_keras(get[conv][0])
        w[f"{conv}.bias"] = get[conv][1]
    for sub in ("s2", "s4"):
        w[f"{sub}.coeff"], w[f"{sub}.bias"] = get[sub]
    w["f5.weight"] = dense_rows_from_keras(get["f5"][0], LENET.in_shape(LENET.layer_index("f5")))
    w["f5.bias"] = get["f5"][1]
    w["f6.weight"], w["f6.bias"] = get["f6"]
    return {k: np.ascontiguousarray(v, np.float32) for k, v in w.items()}


def train(epochs: int = 20, limit: int | None = None, verbose: int = 0):
    """Train; returns (our weights, Keras's own outputs on the held-out images).
    `limit` trains on the first images only (for a smoke test)."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()
    x_train, y_train, x_test, y_test = digits.split()
    if limit:
        x_train, y_train = x_train[:limit], y_train[:limit]
    to_keras = lambda x: x.transpose(0, 2, 3, 1)  # noqa: E731 - NCHW -> NHWC
    onehot = np.eye(digits.CLASSES, dtype=np.float32)

    def loss(y_true, y_pred):
        return keras.losses.binary_crossentropy(y_true, y_pred[:, :digits.CLASSES])

    model = build_model(keras)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss)
    model.fit(to_keras(x_train), onehot[y_train], batch_size=32, epochs=epochs, shuffle=True, verbose=verbose)
    return our_weights(model), np.asarray(model(to_keras(x_test)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--out", default=str(digits.TRAINED_WEIGHTS))
    args = p.parse_args(argv)
    weights, keras_out = train(args.epochs, verbose=2)
    validate_weights(weights, LENET, "the trained model")
    from backends.reference.numpy_backend import NumpyNet
    x_test, y_test = digits.split()[2:]
    ours = NumpyNet(LENET, weights, len(x_test)).forward(x_test)
    keras_acc, our_acc = (float(np.mean(digits.predictions(out) == y_test)) for out in (keras_out, ours))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_weights(args.out, weights)
    print(f"held-out top-1: Keras {100 * keras_acc:.2f}%, our numpy backend {100 * our_acc:.2f}%")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
