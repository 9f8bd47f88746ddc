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


MODELS = {"resnet-style": TinyResNet, "mobilenet-style": TinyMobileNet, "dilated": Dilated,
          "leaky": LeakyHead}


def export(name: str, path: str, x: np.ndarray, seed: int = 0) -> np.ndarray:
    """Model `name` with seeded weights written to `path` as ONNX; PyTorch's output on `x`."""
    torch.manual_seed(seed)
    model = _randomise_batchnorms(MODELS[name](), seed)
    inp = torch.from_numpy(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the TorchScript exporter says it is deprecated; it needs no onnxscript
        torch.onnx.export(model, inp[:1], path, dynamo=False, training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=["image"], output_names=["out"], dynamic_axes={"image": {0: "n"}})
    with torch.no_grad():
        return model(inp).numpy()
