"""MobileNetV2 features.3 inverted residual block (expansion 6: 1x1 24->144, 3x3 depthwise, 1x1
144->24, BN, ReLU6, residual): batch 256 at 56x56."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, SIZE = 256, 24, 56
EXPAND = 6


class Model(nn.Module):
    def __init__(self, channels, expand):
        super().__init__()
        hidden = channels * expand
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(
            hidden, hidden, 3, stride=1, padding=1, groups=hidden, bias=False
        )
        self.bn2 = nn.BatchNorm2d(hidden)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu6(self.bn1(self.expand(x)))
        out = F.relu6(self.bn2(self.depthwise(out)))
        out = self.bn3(self.project(out))
        return x + out


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, EXPAND]
