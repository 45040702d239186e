"""ConvNeXt block (official code): depthwise 7x7 conv, permute to channels-last, LayerNorm,
Linear 4x, GELU, Linear, layer-scale gamma, permute back, (identity) drop path, residual."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                  requires_grad=True) if layer_scale_init_value > 0 else None
        self.drop_path = nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        if self.gamma is not None:
            x = self.gamma * x
        x = x.permute(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
        x = input + self.drop_path(x)
        return x


class Model(nn.Module):
    def __init__(self, dim=16, depth=2, layer_scale_init_value=0.5):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim, layer_scale_init_value=layer_scale_init_value)
                                      for _ in range(depth)])
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(1, 16, 7, 7)]


def get_init_inputs():
    return [16, 2, 0.5]
