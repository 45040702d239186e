"""Stable Diffusion 1.5 UNet spatial self-attention (down_blocks.0.attentions.0, attn1 path):
GroupNorm(32), 1x1 proj_in, LayerNorm, q/k/v linear 320, 8-head scaled_dot_product_attention over
64x64=4096 positions, out linear, 1x1 proj_out, residual; 512x512 images, batch 8."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, HEADS, SIZE = 8, 320, 8, 64
GROUPS = 32


class Model(nn.Module):
    def __init__(self, channels, heads, groups):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.proj_in = nn.Conv2d(channels, channels, kernel_size=1)
        self.norm1 = nn.LayerNorm(channels)
        self.to_q = nn.Linear(channels, channels, bias=False)
        self.to_k = nn.Linear(channels, channels, bias=False)
        self.to_v = nn.Linear(channels, channels, bias=False)
        self.to_out = nn.Linear(channels, channels)
        self.proj_out = nn.Conv2d(channels, channels, kernel_size=1)

    def forward(self, x):
        b, c, h, w = x.shape
        hidden = self.proj_in(self.norm(x))
        hidden = hidden.permute(0, 2, 3, 1).reshape(b, h * w, c)
        normed = self.norm1(hidden)
        head_dim = c // self.heads
        q = self.to_q(normed).view(b, h * w, self.heads, head_dim).transpose(1, 2)
        k = self.to_k(normed).view(b, h * w, self.heads, head_dim).transpose(1, 2)
        v = self.to_v(normed).view(b, h * w, self.heads, head_dim).transpose(1, 2)
        attn = F.scaled_dot_product_attention(q, k, v)
        attn = attn.transpose(1, 2).reshape(b, h * w, c)
        hidden = self.to_out(attn) + hidden
        hidden = hidden.reshape(b, h, w, c).permute(0, 3, 1, 2)
        return self.proj_out(hidden) + x


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, HEADS, GROUPS]
