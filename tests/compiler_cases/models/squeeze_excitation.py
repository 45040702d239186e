"""Conv + BN + ReLU followed by a Squeeze-and-Excitation layer (AdaptiveAvgPool2d(1), two Linear
with ReLU and Sigmoid, channel-wise rescale via expand_as)."""
import torch
import torch.nn as nn


class SELayer(nn.Module):
    def __init__(self, channel, reduction=4):
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
            nn.Linear(channel, channel // reduction, bias=False),
            nn.ReLU(inplace=True),
            nn.Linear(channel // reduction, channel, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        b, c, _, _ = x.size()
        y = self.avg_pool(x).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y.expand_as(x)


class Model(nn.Module):
    def __init__(self, in_channels=8, channels=16, reduction=4):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.se = SELayer(channels, reduction)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        out = self.relu(self.bn(self.conv(x)))
        return self.se(out)


def get_inputs():
    return [torch.randn(2, 8, 6, 6)]


def get_init_inputs():
    return [8, 16, 4]
