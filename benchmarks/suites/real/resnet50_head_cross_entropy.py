"""ResNet-50 training head: global average pool of the 2048x7x7 final feature map, 2048 -> 1000
linear, cross-entropy vs integer labels; batch 256."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, FEATURES, SIZE, CLASSES = 256, 2048, 7, 1000


class Model(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x, labels):
        logits = self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return F.cross_entropy(logits, labels)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, SIZE, SIZE), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return [FEATURES, CLASSES]
