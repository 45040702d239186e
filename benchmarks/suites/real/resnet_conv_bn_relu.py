"""ResNet-50 stage-1 3x3 convolution, batch norm (training statistics), ReLU; batch 256."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 256, 64, 56


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS]
