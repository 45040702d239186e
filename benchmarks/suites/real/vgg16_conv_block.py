"""VGG-16 conv block 2 (two 3x3 conv 64->128->128 with bias + ReLU, then 2x2 max pool): batch 64 at
112x112."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CHANNELS, OUT_CHANNELS, SIZE = 64, 64, 128, 112


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return F.max_pool2d(x, kernel_size=2, stride=2)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
