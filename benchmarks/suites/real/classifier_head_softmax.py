"""ImageNet classifier head: global average pool of 2048x7x7 features, 2048 -> 1000, softmax;
batch 4096 (an evaluation batch)."""
import torch
import torch.nn as nn

BATCH, FEATURES, CLASSES = 4096, 2048, 1000


class Model(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return torch.softmax(self.fc(x.mean(dim=(2, 3))), dim=-1)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, 7, 7)]


def get_init_inputs():
    return [FEATURES, CLASSES]
