"""ConvNeXt-T stage-1 block (7x7 depthwise conv, channels-last LayerNorm, 96->384 GELU 384->96 MLP,
layer scale, residual): batch 128 at 56x56."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, DIM, SIZE = 128, 96, 56
LAYER_SCALE = 1.0


class Model(nn.Module):
    def __init__(self, dim, layer_scale):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale * torch.ones(dim))

    def forward(self, x):
        out = self.dwconv(x)
        out = out.permute(0, 2, 3, 1)
        out = self.norm(out)
        out = self.pwconv2(F.gelu(self.pwconv1(out)))
        out = self.gamma * out
        return x + out.permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(BATCH, DIM, SIZE, SIZE)]


def get_init_inputs():
    return [DIM, LAYER_SCALE]
