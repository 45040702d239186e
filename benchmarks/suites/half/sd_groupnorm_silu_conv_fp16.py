"""Stable Diffusion UNet ResNet-block entry in float16: GroupNorm (32 groups), SiLU, 3x3
convolution 320 -> 320 on 64x64 latents; batch 8."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, SIZE = 8, 320, 64
DTYPE = torch.float16


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(32, channels, eps=1e-5)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.to(DTYPE)

    def forward(self, x):
        return self.conv(F.silu(self.norm(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE, dtype=DTYPE)]


def get_init_inputs():
    return [CHANNELS]
