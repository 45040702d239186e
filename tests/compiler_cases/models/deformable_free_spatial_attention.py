"""CBAM after a conv layer: channel attention from a shared MLP over avg- and max-pooled
features, spatial attention from a 7x7 conv over the channel-wise mean and max."""
import torch
import torch.nn as nn


class ChannelAttention(nn.Module):
    def __init__(self, in_planes, ratio=4):
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.max_pool = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Sequential(
            nn.Conv2d(in_planes, in_planes // ratio, 1, bias=False),
            nn.ReLU(),
            nn.Conv2d(in_planes // ratio, in_planes, 1, bias=False),
        )
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        avg_out = self.fc(self.avg_pool(x))
        max_out = self.fc(self.max_pool(x))
        out = avg_out + max_out
        return self.sigmoid(out)


class SpatialAttention(nn.Module):
    def __init__(self, kernel_size=7):
        super().__init__()
        assert kernel_size in (3, 7), "kernel size must be 3 or 7"
        padding = 3 if kernel_size == 7 else 1
        self.conv1 = nn.Conv2d(2, 1, kernel_size, padding=padding, bias=False)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        avg_out = torch.mean(x, dim=1, keepdim=True)
        max_out, _ = torch.max(x, dim=1, keepdim=True)
        x = torch.cat([avg_out, max_out], dim=1)
        x = self.conv1(x)
        return self.sigmoid(x)


class Model(nn.Module):
    def __init__(self, in_channels=8, planes=16, ratio=4, kernel_size=7):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, planes, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.ca = ChannelAttention(planes, ratio)
        self.sa = SpatialAttention(kernel_size)
        self.eval()  # an inference model: compiled for eval mode

    def forward(self, x):
        out = self.relu(self.bn(self.conv(x)))
        out = self.ca(out) * out
        out = self.sa(out) * out
        return out


def get_inputs():
    return [torch.randn(2, 8, 6, 6)]


def get_init_inputs():
    return [8, 16, 4, 7]
