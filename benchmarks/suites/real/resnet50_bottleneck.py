"""ResNet-50 layer1.1 bottleneck block (1x1 256->64, 3x3 64, 1x1 64->256, BN, ReLU, identity
shortcut): batch 256 at 56x56."""
import torch
import torch.nn as nn

BATCH, CHANNELS, WIDTH, SIZE = 256, 256, 64, 56


class Model(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return torch.relu(out + x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, WIDTH]
