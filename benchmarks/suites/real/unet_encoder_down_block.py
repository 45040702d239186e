"""U-Net encoder down block: 2x2 max-pool (128x128 -> 64x64) then two 3x3 conv+BN+ReLU
128->256->256; U-Net (Ronneberger 2015, padded convs) on 256x256 images, batch 16."""
import torch
import torch.nn as nn

BATCH, IN_CHANNELS, OUT_CHANNELS, SIZE = 16, 128, 256, 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.conv(self.pool(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
