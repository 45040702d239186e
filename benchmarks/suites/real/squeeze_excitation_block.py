"""Squeeze-and-excitation block of SE-ResNet-50 stage 1 (global avg pool, fc 256->16, ReLU, fc
16->256, sigmoid, channel scale): batch 256 at 56x56."""
import torch
import torch.nn as nn

BATCH, CHANNELS, SIZE = 256, 256, 56
REDUCTION = 16


class Model(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x):
        squeezed = x.mean(dim=(2, 3))
        scale = torch.sigmoid(self.fc2(torch.relu(self.fc1(squeezed))))
        return x * scale[:, :, None, None]


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, REDUCTION]
