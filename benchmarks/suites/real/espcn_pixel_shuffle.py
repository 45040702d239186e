"""ESPCN super-resolution (Shi et al. 2016): 5x5 conv 1->64 + tanh, 3x3 conv 64->32 + tanh, 3x3 conv
32->9, PixelShuffle(3); 640x360 luma frames upscaled x3 to 1920x1080, batch 16."""
import torch
import torch.nn as nn

BATCH, CHANNELS, HEIGHT, WIDTH = 16, 1, 360, 640
FEATURES, SCALE = 64, 3


class Model(nn.Module):
    def __init__(self, channels, features, scale):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, features, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(features, features // 2, kernel_size=3, padding=1)
        self.conv3 = nn.Conv2d(features // 2, channels * scale * scale, kernel_size=3, padding=1)
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x):
        x = torch.tanh(self.conv1(x))
        x = torch.tanh(self.conv2(x))
        return self.shuffle(self.conv3(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, FEATURES, SCALE]
