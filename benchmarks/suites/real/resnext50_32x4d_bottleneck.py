"""ResNeXt-50 32x4d layer1.1 bottleneck (1x1 256->128, grouped 3x3 with 32 groups of 4, 1x1
128->256, BN, ReLU, identity shortcut): batch 256 at 56x56."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 256, 256, 56
GROUPS, GROUP_WIDTH = 32, 4


class Model(nn.Module):
    def __init__(self, channels, groups, group_width):
        super().__init__()
        width = groups * group_width
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=1, padding=1, groups=groups, bias=False)
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
    return [CHANNELS, GROUPS, GROUP_WIDTH]
