"""MobileNetV1 depthwise-separable block (3x3 depthwise conv + BN + ReLU, 1x1 pointwise conv + BN +
ReLU), the 56x56 stage with 128 channels: batch 512."""
import torch
import torch.nn as nn

BATCH, CHANNELS, OUT_CHANNELS, SIZE = 512, 128, 128, 56


class Model(nn.Module):
    def __init__(self, channels, out_channels):
        super().__init__()
        self.depthwise = nn.Conv2d(
            channels, channels, 3, stride=1, padding=1, groups=channels, bias=False
        )
        self.bn1 = nn.BatchNorm2d(channels)
        self.pointwise = nn.Conv2d(channels, out_channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        x = torch.relu(self.bn1(self.depthwise(x)))
        return torch.relu(self.bn2(self.pointwise(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, OUT_CHANNELS]
