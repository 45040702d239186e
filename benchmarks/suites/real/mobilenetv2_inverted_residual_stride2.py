"""MobileNetV2 features.4 stride-2 inverted residual block (expansion 6: 1x1 24->144, 3x3 stride-2
depthwise, 1x1 144->32, BN, ReLU6, no residual): batch 256, 56x56 -> 28x28."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CHANNELS, OUT_CHANNELS, SIZE = 256, 24, 32, 56
EXPAND = 6


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, expand):
        super().__init__()
        hidden = in_channels * expand
        self.expand = nn.Conv2d(in_channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(
            hidden, hidden, 3, stride=2, padding=1, groups=hidden, bias=False
        )
        self.bn2 = nn.BatchNorm2d(hidden)
        self.project = nn.Conv2d(hidden, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        out = F.relu6(self.bn1(self.expand(x)))
        out = F.relu6(self.bn2(self.depthwise(out)))
        return self.bn3(self.project(out))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, EXPAND]
