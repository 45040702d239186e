"""Stable Diffusion 1.5 UNet ResNet block (down_blocks.1.resnets.0): GroupNorm(32)+SiLU+3x3 conv
320->640, SiLU+linear timestep embedding 1280->640 added, GroupNorm+SiLU+3x3 conv, 1x1 shortcut
residual; 32x32 (512x512 images' 64x64 latents downsampled once), batch 16."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CHANNELS, OUT_CHANNELS, TEMB_CHANNELS, SIZE = 16, 320, 640, 1280, 32
GROUPS = 32


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=1e-5)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=1e-5)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1)
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.conv_shortcut(x) + h


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE), torch.randn(BATCH, TEMB_CHANNELS)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, TEMB_CHANNELS, GROUPS]
