"""Issue 45's Keras part: keras.applications' ConvNeXt (nested Sequential
stem, LayerNormalization, Dense on pixels, gelu, LayerScale, StochasticDepth)
and NASNet (Cropping2D) at a small size, imported and run against Keras's own
output.  Keras runs in a child process (tests/keras_transformer_models.py)."""
import numpy as np
import pytest

from backends.isolated import Worker
from backends.reference.numpy_backend import NumpyNet
from compare import oracle
from compare.models import load_net
from nets import LayerKind

from conftest import backend_or_skip


@pytest.fixture(scope="module")
def keras_child():
    backend_or_skip("tensorflow")   # Keras comes with the tensorflow extra
    worker = Worker("keras transformer test models")
    yield worker
    worker.close()


@pytest.mark.parametrize("builder, kinds", [
    ("convnext_model", {LayerKind.LAYERNORM}),
    ("nasnet_model", {LayerKind.CROP}),
])
@pytest.mark.long
def test_keras_model_matches_keras(keras_child, tmp_path, builder, kinds):
    x = np.random.default_rng(5).random((2, 3, 32, 32), dtype=np.float32)
    path, keras_out = keras_child.call("keras_transformer_models", "save", builder, str(tmp_path), x)
    net, weights = load_net(path)
    assert kinds <= {layer.kind for layer in net.layers}
    # before the softmax: an untrained net's softmax can round to one-hot and hide differences
    logits = oracle.forward(net, weights, x)[-2]
    want = np.log(np.maximum(keras_out.astype(np.float64), 1e-300))
    got = np.log(np.maximum(oracle.softmax(logits), 1e-300))
    assert np.abs((got - got.max(axis=1, keepdims=True)) - (want - want.max(axis=1, keepdims=True))).max() < 1e-3
    assert np.linalg.norm(NumpyNet(net, weights, 2).forward(x) - keras_out) / np.linalg.norm(keras_out) < 1e-5


@pytest.mark.long
def test_keras_convnext_on_the_opencl_backends_at_batch_1_and_2(keras_child, tmp_path):
    """Issue 54's Keras form: keras.applications' ConvNeXt (its LayerNormalization and gelu) at batch 1 and 2
    on the CLBlast and hand-written backends, against Keras's own output."""
    x = np.random.default_rng(6).random((2, 3, 32, 32), dtype=np.float32)
    path, keras_out = keras_child.call("keras_transformer_models", "save", "convnext_model", str(tmp_path), x)
    net, weights = load_net(path)
    for name in ("clblast", "clblast-convgemm", "clblast-best", "vectorised", "vectorised-tiled"):
        for batch in (1, 2):
            prepared = backend_or_skip(name).prepare(net, weights, batch)
            try:
                got = prepared.forward(x[:batch]).reshape(keras_out[:batch].shape)
            finally:
                prepared.close()
            err = np.linalg.norm(got - keras_out[:batch]) / np.linalg.norm(keras_out[:batch])
            assert err < 1e-4, (name, batch, err)
