"""ResNet stem 7x7 stride-2 convolution, 3 -> 64 channels on 224x224; batch 128."""
import torch
import torch.nn as nn

BATCH, CIN, COUT, SIZE = 128, 3, 64, 224


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 7, stride=2, padding=3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CIN, SIZE, SIZE)]


def get_init_inputs():
    return [CIN, COUT]
