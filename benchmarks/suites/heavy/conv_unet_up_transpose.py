"""U-Net decoder 2x2 stride-2 transposed convolution, 256 -> 128 channels from 64x64; batch 16."""
import torch
import torch.nn as nn

BATCH, CIN, COUT, SIZE = 16, 256, 128, 64


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 2, stride=2, padding=0)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, SIZE, SIZE)]


def get_init_inputs():
    return [CIN, COUT]
