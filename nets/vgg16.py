"""VGG-16 (Simonyan and Zisserman, model D) as in the study's tables 5.4 and
5.5: 13 conv 3x3 pad 1 with ReLU, 5 max-pools 2x2, fc 25088-4096-4096-1000
(ReLU on fc1 and fc2, fc3 left linear: softmax does not change the top-1)."""
from .spec import Conv, Dense, MaxPool, Net

_BLOCKS = ((1, 2, 64), (2, 2, 128), (3, 3, 256), (4, 3, 512), (5, 3, 512))


def _layers():
    for block, convs, channels in _BLOCKS:
        for i in range(1, convs + 1):
            yield Conv(f"conv{block}_{i}", "relu", out_channels=channels, kernel=(3, 3), pad=(1, 1))
        yield MaxPool(f"mp{block}", kernel=(2, 2), stride=(2, 2))
    yield Dense("fc1", "relu", out_features=4096)
    yield Dense("fc2", "relu", out_features=4096)
    yield Dense("fc3", "none", out_features=1000)


VGG16 = Net(
    name="vgg16",
    input_shape=(3, 224, 224),
    default_batch=1,
    description="VGG-16: 13 conv 3x3 + ReLU, 5 max-pool 2x2, fc 25088-4096-4096-1000",
    layers=tuple(_layers()),
)
