"""EDSR-style super-resolution tail: head conv, residual body, Upsampler built with
int(math.log(scale, 2)) stages of conv + nn.PixelShuffle(2), mean shift in and out."""
import math

import torch
import torch.nn as nn


def default_conv(in_channels, out_channels, kernel_size, bias=True):
    return nn.Conv2d(in_channels, out_channels, kernel_size, padding=(kernel_size // 2), bias=bias)


class MeanShift(nn.Conv2d):
    def __init__(self, rgb_range, rgb_mean=(0.4488, 0.4371, 0.4040), rgb_std=(1.0, 1.0, 1.0),
                 sign=-1):
        super().__init__(3, 3, kernel_size=1)
        std = torch.Tensor(rgb_std)
        self.weight.data = torch.eye(3).view(3, 3, 1, 1) / std.view(3, 1, 1, 1)
        self.bias.data = sign * rgb_range * torch.Tensor(rgb_mean) / std
        for p in self.parameters():
            p.requires_grad = False


class ResBlock(nn.Module):
    def __init__(self, conv, n_feats, kernel_size, res_scale=1.0):
        super().__init__()
        self.body = nn.Sequential(conv(n_feats, n_feats, kernel_size), nn.ReLU(True),
                                  conv(n_feats, n_feats, kernel_size))
        self.res_scale = res_scale

    def forward(self, x):
        res = self.body(x).mul(self.res_scale)
        res += x
        return res


class Upsampler(nn.Sequential):
    def __init__(self, conv, scale, n_feats, bias=True):
        m = []
        if (scale & (scale - 1)) == 0:  # scale = 2^n
            for _ in range(int(math.log(scale, 2))):
                m.append(conv(n_feats, 4 * n_feats, 3, bias))
                m.append(nn.PixelShuffle(2))
        elif scale == 3:
            m.append(conv(n_feats, 9 * n_feats, 3, bias))
            m.append(nn.PixelShuffle(3))
        else:
            raise NotImplementedError
        super().__init__(*m)


class Model(nn.Module):
    def __init__(self, n_feats=8, scale=4, n_resblocks=1, rgb_range=1.0):
        super().__init__()
        self.sub_mean = MeanShift(rgb_range)
        self.add_mean = MeanShift(rgb_range, sign=1)
        self.head = default_conv(3, n_feats, 3)
        self.body = nn.Sequential(*[ResBlock(default_conv, n_feats, 3, res_scale=0.1)
                                    for _ in range(n_resblocks)],
                                  default_conv(n_feats, n_feats, 3))
        self.tail = nn.Sequential(Upsampler(default_conv, scale, n_feats),
                                  default_conv(n_feats, 3, 3))
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        x = self.sub_mean(x)
        x = self.head(x)
        res = self.body(x)
        res += x
        x = self.tail(res)
        x = self.add_mean(x)
        return x


def get_inputs():
    return [torch.rand(1, 3, 5, 5)]


def get_init_inputs():
    return [8, 4, 1, 1.0]
