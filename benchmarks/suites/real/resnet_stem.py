"""ResNet stem: 7x7 stride-2 convolution, batch norm, ReLU on 224x224 images; batch 256."""
import torch
import torch.nn as nn

BATCH, SIZE = 256, 224


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(64)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return []
