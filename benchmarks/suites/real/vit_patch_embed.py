"""ViT-B/16 patch embedding: 16x16 stride-16 convolution to 768 channels; batch 512."""
import torch
import torch.nn as nn

BATCH, SIZE, DIM = 512, 224, 768


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, 16, stride=16)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [DIM]
