"""ResNet-50 stage-3 3x3 convolution, 256 -> 256 channels on 14x14; batch 256."""
import torch
import torch.nn as nn

BATCH, CIN, COUT, SIZE = 256, 256, 256, 14


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=1, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, SIZE, SIZE)]


def get_init_inputs():
    return [CIN, COUT]
