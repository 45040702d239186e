"""EfficientNet-B0 stage-3 MBConv6 block (1x1 40->240, 5x5 depthwise, squeeze-excitation
240->10->240, 1x1 240->40, BN, SiLU, residual): batch 256 at 28x28."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, SIZE = 256, 40, 28
EXPAND, KERNEL = 6, 5


class Model(nn.Module):
    def __init__(self, channels, expand, kernel):
        super().__init__()
        hidden = channels * expand
        squeeze = max(1, channels // 4)
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden, eps=1e-3)
        self.depthwise = nn.Conv2d(
            hidden, hidden, kernel, padding=kernel // 2, groups=hidden, bias=False
        )
        self.bn2 = nn.BatchNorm2d(hidden, eps=1e-3)
        self.se_reduce = nn.Conv2d(hidden, squeeze, 1)
        self.se_expand = nn.Conv2d(squeeze, hidden, 1)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels, eps=1e-3)

    def forward(self, x):
        out = F.silu(self.bn1(self.expand(x)))
        out = F.silu(self.bn2(self.depthwise(out)))
        scale = F.adaptive_avg_pool2d(out, 1)
        scale = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(scale))))
        out = out * scale
        out = self.bn3(self.project(out))
        return x + out


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, EXPAND, KERNEL]
