"""U-Net up-sampling: 2x2 stride-2 transposed convolution 256 -> 128 channels, then ReLU."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 32, 256, 64


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(channels, channels // 2, 2, stride=2)

    def forward(self, x):
        return torch.relu(self.up(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS]
