"""ResNet stem in bfloat16: 7x7 stride-2 convolution, batch norm (eval), ReLU, 3x3 stride-2
max pooling on 224x224 images; batch 64."""
import torch
import torch.nn as nn

BATCH, SIZE = 64, 224
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.to(DTYPE)
        self.eval()

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE, dtype=DTYPE)]


def get_init_inputs():
    return []
