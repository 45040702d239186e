"""Whole ResNet-18 forward (stem, four stages of two basic blocks, global pool, 1000-way fc): batch
32 of 224x224 RGB images, base width 64."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SIZE = 32, 224
WIDTH = 64
NUM_CLASSES = 1000


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(channels),
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + identity)


class Model(nn.Module):
    def __init__(self, width, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages = []
        in_channels = width
        for i in range(4):
            channels = width * 2 ** i
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(in_channels, channels, stride),
                                        BasicBlock(channels, channels, 1)))
            in_channels = channels
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        x = self.layers(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [WIDTH, NUM_CLASSES]
