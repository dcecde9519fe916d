"""ResNet (He et al. 2015) with bottleneck blocks, written here because torchvision's
PyPI wheel does not load against the CPU torch these machines use.

`resnet50()` is the standard 25.6M-parameter network; `resnet_small()` keeps its shape
(stem, four stages, bottlenecks, batch norm) at a size a test can train in seconds."""

import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(
        self,
        blocks=(3, 4, 6, 3),
        widths=(64, 128, 256, 512),
        stem: int = 64,
        num_classes: int = 1000,
    ):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem, 7, 2, 3, bias=False),
            nn.BatchNorm2d(stem),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], stem
        for i, (count, width) in enumerate(zip(blocks, widths)):
            for j in range(count):
                layers.append(Bottleneck(cin, width, 2 if j == 0 and i > 0 else 1))
                cin = width * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def resnet50(num_classes: int = 1000) -> ResNet:
    return ResNet(num_classes=num_classes)


def resnet_small(num_classes: int = 10) -> ResNet:
    return ResNet(blocks=(1, 1, 1, 1), widths=(8, 16, 16, 32), stem=8, num_classes=num_classes)
