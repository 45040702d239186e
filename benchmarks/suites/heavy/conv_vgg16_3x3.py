"""VGG-16 block-2 3x3 convolution, 128 -> 128 channels on 112x112; batch 32."""
import torch
import torch.nn as nn

BATCH, CIN, COUT, SIZE = 32, 128, 128, 112


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=1, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, SIZE, SIZE)]


def get_init_inputs():
    return [CIN, COUT]
