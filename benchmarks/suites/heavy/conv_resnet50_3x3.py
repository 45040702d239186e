"""ResNet-50 stage-1 3x3 convolution, 64 -> 64 channels on 56x56; batch 128."""
import torch
import torch.nn as nn

BATCH, CIN, COUT, SIZE = 128, 64, 64, 56


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
