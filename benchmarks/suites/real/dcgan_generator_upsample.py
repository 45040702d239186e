"""DCGAN generator up-sampling blocks (Radford et al. 2016, LSUN generator): three ConvTranspose2d
4x4 stride 2 + BN + ReLU, 1024->512->256->128 channels, 4x4 -> 32x32; batch 128."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 128, 1024, 4
BLOCKS = 3


class Model(nn.Module):
    def __init__(self, channels, blocks):
        super().__init__()
        layers = []
        for _ in range(blocks):
            layers += [
                nn.ConvTranspose2d(
                    channels, channels // 2, kernel_size=4, stride=2, padding=1, bias=False
                ),
                nn.BatchNorm2d(channels // 2),
                nn.ReLU(True),
            ]
            channels //= 2
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, BLOCKS]
