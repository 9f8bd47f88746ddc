"""MobileNet-v2 (Sandler et al. 2018, "MobileNetV2: Inverted Residuals and
Linear Bottlenecks", table 2): 224x224, width multiplier 1.0, batch 1.

Layer names follow the table's rows: conv2d_1 (3x3, 32, stride 2), seven
rows of bottlenecks bottleneck{r}_{i} (row r = 1..7, its i-th block) of
  _expand     1x1 to t times the channels, ReLU6 (absent where t = 1),
  _depthwise  3x3 depthwise (groups = channels), the row's stride on the
              first block, ReLU6,
  _project    1x1 to c channels, linear,
  _add        the residual add, linear, where the stride is 1 and the
              channels do not change;
then conv2d_2 (1x1 to 1280, ReLU6), avgpool (global, the table's 7x7) and
conv2d_3, the table's 1x1 convolution to k = 1000 classes on a 1x1 input,
which is a dense layer.  Padding 1 on every 3x3 (as torchvision's).

Batch normalisation after each convolution is folded into it
(nets/batchnorm.py); with seeded weights there is nothing to fold.
"""
from .spec import Add, Conv, Dense, GlobalAvgPool, Net

# table 2's bottleneck rows: expansion t, output channels c, repeats n, first stride s
_ROWS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
         (6, 320, 1, 1))


def _bottleneck(name: str, block_input: str, in_channels: int, t: int, c: int, stride: int):
    hidden = in_channels * t
    if t != 1:
        yield Conv(f"{name}_expand", "relu6", inputs=(block_input,), out_channels=hidden, kernel=(1, 1))
    yield Conv(f"{name}_depthwise", "relu6", inputs=(block_input,) if t == 1 else (), out_channels=hidden,
               kernel=(3, 3), stride=(stride, stride), pad=(1, 1), groups=hidden)
    yield Conv(f"{name}_project", "none", out_channels=c, kernel=(1, 1))
    if stride == 1 and in_channels == c:
        yield Add(f"{name}_add", "none", inputs=(f"{name}_project", block_input))


def _layers():
    yield Conv("conv2d_1", "relu6", out_channels=32, kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    previous, channels = "conv2d_1", 32
    for row, (t, c, n, s) in enumerate(_ROWS, start=1):
        for i in range(1, n + 1):
            name = f"bottleneck{row}_{i}"
            block = list(_bottleneck(name, previous, channels, t, c, s if i == 1 else 1))
            yield from block
            previous, channels = block[-1].name, c
    yield Conv("conv2d_2", "relu6", inputs=(previous,), out_channels=1280, kernel=(1, 1))
    yield GlobalAvgPool("avgpool")
    yield Dense("conv2d_3", "none", out_features=1000)


MOBILENET_V2 = Net(
    name="mobilenet-v2",
    input_shape=(3, 224, 224),
    default_batch=1,
    description="MobileNet-v2 1.0: conv 3x3, 17 inverted residual bottlenecks (depthwise 3x3, ReLU6), "
                "conv 1x1 1280, global avg-pool, fc 1000",
    layers=tuple(_layers()),
)
