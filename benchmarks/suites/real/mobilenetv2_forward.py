"""Whole MobileNetV2 (width 1.0) forward: stem, 17 inverted residual blocks, 1x1 conv to 1280,
global pool, 1000-way classifier; batch 128 of 224x224 images."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SIZE = 128, 224
WIDTH = 1.0
LAST_CHANNEL = 1280
NUM_CLASSES = 1000


def make_divisible(value, divisor=8):
    new = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if new < 0.9 * value:
        new += divisor
    return new


class ConvBNReLU6(nn.Sequential):
    def __init__(self, in_channels, out_channels, kernel=3, stride=1, groups=1):
        super().__init__(
            nn.Conv2d(
                in_channels,
                out_channels,
                kernel,
                stride,
                (kernel - 1) // 2,
                groups=groups,
                bias=False,
            ),
            nn.BatchNorm2d(out_channels),
            nn.ReLU6(),
        )


class InvertedResidual(nn.Module):
    def __init__(self, in_channels, out_channels, stride, expand):
        super().__init__()
        hidden = int(round(in_channels * expand))
        self.use_residual = stride == 1 and in_channels == out_channels
        layers = []
        if expand != 1:
            layers.append(ConvBNReLU6(in_channels, hidden, kernel=1))
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv(x)
        return x + out if self.use_residual else out


class Model(nn.Module):
    def __init__(self, width, last_channel, num_classes):
        super().__init__()
        # expansion t, output channels c, repeats n, first stride s
        setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                   [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        in_channels = make_divisible(32 * width)
        features = [ConvBNReLU6(3, in_channels, stride=2)]
        for t, c, n, s in setting:
            out_channels = make_divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(in_channels, out_channels, s if i == 0 else 1, t))
                in_channels = out_channels
        features.append(ConvBNReLU6(in_channels, last_channel, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Linear(last_channel, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(x)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [WIDTH, LAST_CHANNEL, NUM_CLASSES]
