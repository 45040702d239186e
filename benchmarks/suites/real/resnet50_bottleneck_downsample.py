"""ResNet-50 (v1.5) layer2.0 bottleneck with stride-2 3x3 conv and 1x1 stride-2 projection shortcut:
batch 256, 256x56x56 -> 512x28x28, width 128."""
import torch
import torch.nn as nn

BATCH, IN_CHANNELS, WIDTH, OUT_CHANNELS, SIZE = 256, 256, 128, 512, 56


class Model(nn.Module):
    def __init__(self, in_channels, width, out_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=2, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return torch.relu(out + self.downsample(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, WIDTH, OUT_CHANNELS]
