"""ResNet-18 (He et al. 2016, "Deep Residual Learning for Image Recognition",
table 1, the 18-layer column): ImageNet 224x224, basic blocks, batch 1.

Layer names follow the table's rows: conv1, then conv2_x .. conv5_x, each two
basic blocks conv{s}_{b} of two 3x3 convolutions (conv{s}_{b}a with ReLU,
conv{s}_{b}b without) and the add of the shortcut (conv{s}_{b}, with ReLU).
The 3x3 max-pool the table lists at the top of conv2_x is conv2_pool; the
first block of conv3_x..conv5_x halves the size in conv{s}_1a (stride 2) and
its shortcut is a 1x1 stride-2 projection, conv{s}_1_proj (option B, as
torchvision's resnet18).  The table's last row is avgpool (global) and fc.

Batch normalisation after each convolution is folded into it
(nets/batchnorm.py), so each convolution has a bias; with seeded weights
there is nothing to fold.  Softmax is left out: it does not change the top-1.
"""
from .spec import Add, Conv, Dense, GlobalAvgPool, MaxPool, Net

_STAGES = ((2, 64), (3, 128), (4, 256), (5, 512))   # conv{s}_x and its channels


def _basic_block(stage: int, block: int, channels: int, block_input: str, downsample: bool):
    name = f"conv{stage}_{block}"
    stride = (2, 2) if downsample else (1, 1)
    shortcut = block_input
    if downsample:   # first: the add then folds into conv{s}_1b, and the projection may run beside conv{s}_1a
        shortcut = f"{name}_proj"
        yield Conv(shortcut, "none", inputs=(block_input,), out_channels=channels, kernel=(1, 1), stride=(2, 2))
    yield Conv(f"{name}a", "relu", inputs=(block_input,), out_channels=channels, kernel=(3, 3),
               stride=stride, pad=(1, 1))
    yield Conv(f"{name}b", "none", out_channels=channels, kernel=(3, 3), pad=(1, 1))
    yield Add(name, "relu", inputs=(f"{name}b", shortcut))


def _layers():
    yield Conv("conv1", "relu", out_channels=64, kernel=(7, 7), stride=(2, 2), pad=(3, 3))
    yield MaxPool("conv2_pool", kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    previous = "conv2_pool"
    for stage, channels in _STAGES:
        for block in (1, 2):
            yield from _basic_block(stage, block, channels, previous, downsample=stage > 2 and block == 1)
            previous = f"conv{stage}_{block}"
    yield GlobalAvgPool("avgpool")
    yield Dense("fc", "none", out_features=1000)


RESNET18 = Net(
    name="resnet18",
    input_shape=(3, 224, 224),
    default_batch=1,
    description="ResNet-18: conv 7x7, max-pool, 8 basic blocks (3x3 convs, residual adds), global avg-pool, fc 1000",
    layers=tuple(_layers()),
)
