"""U-Net decoder up block: 2x2 stride-2 ConvTranspose2d 256->128 (64x64 -> 128x128), concat with the
128-channel skip, two 3x3 conv+BN+ReLU 256->128->128; U-Net (Ronneberger 2015, padded convs) on
256x256 images, batch 16."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 16, 256, 64


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        out_channels = channels // 2
        self.up = nn.ConvTranspose2d(channels, out_channels, kernel_size=2, stride=2)
        self.conv = nn.Sequential(
            nn.Conv2d(channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x, skip):
        x = self.up(x)
        x = torch.cat([skip, x], dim=1)
        return self.conv(x)


def get_inputs():
    return [
        torch.randn(BATCH, CHANNELS, SIZE, SIZE),
        torch.randn(BATCH, CHANNELS // 2, 2 * SIZE, 2 * SIZE),
    ]


def get_init_inputs():
    return [CHANNELS]
