"""Small PyTorch models in the shape of ResNet and MobileNet, exported to ONNX
for tests/test_onnx_import.py.  Batch norms get random statistics, so folding
them is a real test; the export keeps them as BatchNormalization nodes
(TrainingMode.PRESERVE on an eval-mode model) so our importer folds them."""
from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn


def _randomise_batchnorms(model: nn.Module, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                m.running_mean.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
    return model.eval()


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-bn-relu, conv-bn, add the shortcut (projected when it downsamples), relu."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class InvertedResidual(nn.Module):
    """MobileNet-v2's bottleneck: expand 1x1 + ReLU6, depthwise 3x3 + ReLU6, project 1x1, add when it can."""

    def __init__(self, cin: int, cout: int, stride: int, t: int):
        super().__init__()
        hidden = cin * t
        layers = [] if t == 1 else [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class TinyMobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
            InvertedResidual(8, 8, 1, 1), InvertedResidual(8, 12, 2, 6), InvertedResidual(12, 12, 1, 6),
            nn.Conv2d(12, 4 * 12, 3, 1, 1, groups=4), nn.Tanh(),           # grouped, neither 1 nor depthwise
            nn.Conv2d(48, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10), nn.Sigmoid())

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class Dilated(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, dilation=2)

    def forward(self, x):
        return self.conv(x)


class LeakyHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        return self.act(self.conv(x))


class Fire(nn.Module):
    """SqueezeNet's fire module: squeeze 1x1, then expand 1x1 and 3x3 side by side, concatenated;
    after a ceil-mode max-pool, as SqueezeNet has them."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.squeeze = nn.Conv2d(3, 4, 1)
        self.expand1 = nn.Conv2d(4, 8, 1)
        self.expand3 = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(self.pool(x)))
        return torch.cat([torch.relu(self.expand1(s)), torch.relu(self.expand3(s))], 1)


class DenseBlock(nn.Module):
    """DenseNet's dense block: each layer BN-ReLU-conv1x1-BN-ReLU-conv3x3 on the concatenation of all
    before it; then a transition (BN-ReLU-conv1x1, average pool)."""

    def __init__(self, cin: int = 8, growth: int = 4, layers: int = 3):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(layers):
            c = cin + i * growth
            self.layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 2 * growth, 1, bias=False),
                                             nn.BatchNorm2d(2 * growth), nn.ReLU(),
                                             nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False)))
        c = cin + layers * growth
        self.stem = nn.Conv2d(3, cin, 3, padding=1)
        self.transition = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                        nn.AvgPool2d(2, 2))

    def forward(self, x):
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return self.transition(torch.cat(features, 1))


def channel_shuffle(x, groups: int):
    n, c, h, w = x.size()
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet-v2's units: a stride-2 one (both branches convolved), then a stride-1 one
    (the input split in two halves by chunk, one convolved), each concatenated and shuffled."""

    def __init__(self, cin: int = 8, cout: int = 16):
        super().__init__()
        half = cout // 2
        self.branch1 = nn.Sequential(nn.Conv2d(cin, cin, 3, 2, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                                     nn.Conv2d(cin, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU())
        self.down = self._branch(cin, half, 2)
        self.keep = self._branch(half, half, 1)
        self.stem = nn.Conv2d(3, cin, 3, padding=1)

    @staticmethod
    def _branch(cin: int, cout: int, stride: int):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, stride, 1, groups=cout, bias=False), nn.BatchNorm2d(cout),
                             nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x):
        x = self.stem(x)
        x = channel_shuffle(torch.cat((self.branch1(x), self.down(x)), 1), 2)
        x1, x2 = x.chunk(2, dim=1)
        return channel_shuffle(torch.cat((x1, self.keep(x2)), 1), 2)


class Inception(nn.Module):
    """GoogLeNet's and Inception-v3's block: four branches concatenated: 1x1; 1x1 then 3x3; 1x1 then
    5x5; a padded 3x3 pooling then 1x1 (a ceil-mode max-pool, GoogLeNet's; then an average pool
    that counts its padding, Inception-v3's, and one that does not); after a ceil-mode max-pool."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.b1 = nn.Conv2d(3, 4, 1)
        self.b2 = nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1))
        self.b3 = nn.Sequential(nn.Conv2d(3, 2, 1), nn.ReLU(), nn.Conv2d(2, 4, 5, padding=2))
        self.b4 = nn.Conv2d(3, 4, 1)
        self.b5 = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        x = self.pool(x)
        b4 = self.b4(nn.functional.max_pool2d(x, 3, 1, 1, ceil_mode=True))
        b5 = self.b5(nn.functional.avg_pool2d(x, 3, 1, 1))
        joined = torch.relu(torch.cat([self.b1(x), self.b2(x), self.b3(x), b4, b5], 1))
        return nn.functional.avg_pool2d(joined, 3, 2, 1, ceil_mode=True, count_include_pad=False)


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int, gate: nn.Module, act: nn.Module):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.gate, self.act = gate, act

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return self.gate(self.expand(self.act(self.reduce(s)))) * x


class MobileNetV3Block(nn.Module):
    """MobileNet-v3's bottleneck: expand 1x1 + hardswish, depthwise 3x3 + hardswish, a
    squeeze-and-excitation gate (ReLU, hardsigmoid), project 1x1, add; a hardswish head."""

    def __init__(self, c: int = 8, hidden: int = 16, head: bool = True):
        super().__init__()
        self.with_head = head
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
                                       nn.BatchNorm2d(hidden), nn.Hardswish())
        self.se = SqueezeExcite(hidden, 8, nn.Hardsigmoid(), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))
        self.head = nn.Sequential(nn.Linear(c, 12), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(12, 10))

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.se(self.depthwise(self.expand(x))))
        if not self.with_head:
            return x
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class MBConv(nn.Module):
    """EfficientNet's MBConv: expand 1x1 + SiLU, depthwise 3x3 + SiLU, a squeeze-and-excitation
    gate (SiLU, sigmoid), project 1x1, add; exported SiLU is Sigmoid then Mul."""

    def __init__(self, c: int = 8, hidden: int = 24):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
                                       nn.BatchNorm2d(hidden), nn.SiLU())
        self.se = SqueezeExcite(hidden, 4, nn.Sigmoid(), nn.SiLU())
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        x = self.stem(x)
        return x + self.project(self.se(self.depthwise(self.expand(x))))


class ZooChain(nn.Module):
    """Every zoo block on the same input, each pooled to (N, C, 1, 1), concatenated, and a
    classifier with a softmax: one model through every backend, for the suite's time."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Fire(), DenseBlock(), ShuffleUnit(), Inception(), MobileNetV3Block(head=False),
                                     MBConv()])
        self.fc = nn.Linear(16 + 10 + 16 + 22 + 8 + 8, 6)   # each block's channels

    def forward(self, x):
        pooled = [nn.functional.adaptive_avg_pool2d(block(x), 1) for block in self.blocks]
        return torch.softmax(self.fc(torch.flatten(torch.cat(pooled, 1), 1)), 1)


class SigmoidBeside(nn.Module):
    """A dense layer's output read by a sigmoid and by an add too: refused, naming that."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        y = self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
        return y + torch.sigmoid(y)


class FixedBatchFlatten(nn.Module):
    """A reshape to (1, features): the exported graph fixes the batch at 1 (issue 35)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x).reshape(1, -1)


MODELS = {"resnet-style": TinyResNet, "mobilenet-style": TinyMobileNet, "dilated": Dilated,
          "leaky": LeakyHead, "fire": Fire, "dense-block": DenseBlock, "shuffle-unit": ShuffleUnit,
          "inception": Inception, "mobilenet-v3-block": MobileNetV3Block, "mbconv": MBConv,
          "fixed-batch": FixedBatchFlatten,
          "sigmoid-beside": SigmoidBeside, "zoo-chain": ZooChain}
# the blocks of issue 36's "done when": each a model of the classification zoo in small
ZOO_BLOCKS = ["fire", "dense-block", "shuffle-unit", "inception", "mobilenet-v3-block", "mbconv"]


def export(name: str, path: str, x: np.ndarray, seed: int = 0, dynamic: bool = True) -> np.ndarray:
    """Model `name` with seeded weights written to `path` as ONNX; PyTorch's output on `x`.
    `dynamic`: the batch a dynamic axis (else fixed at 1, as torch.onnx.export writes it by default)."""
    torch.manual_seed(seed)
    model = _randomise_batchnorms(MODELS[name](), seed)
    inp = torch.from_numpy(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the TorchScript exporter says it is deprecated; it needs no onnxscript
        torch.onnx.export(model, inp[:1], path, dynamo=False, training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=["image"], output_names=["out"],
                          dynamic_axes={"image": {0: "n"}} if dynamic else None)
    with torch.no_grad():
        return model(inp).numpy()
